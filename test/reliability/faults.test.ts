/**
 * Exports against the local service's fault injection: a large layer under throttling, 503s,
 * connection resets and truncated bodies; a listing cut in the middle; tokens that expire mid-export.
 * Every output is compared with what the service holds, fetched and hashed independently.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { noFaults } from "../../src/server/Faults.ts"
import { cli } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups, filesBelow, readJson } from "../support/files.ts"
import { DEMO, startService } from "../support/service.ts"
import {
  expectMatchesService,
  exportPlaces,
  handleOf,
  isBlobRequest,
  isListing,
  serviceState,
  startProxy
} from "./support.ts"

const { cleanup, tempDir } = cleanups()

const sha256File = (file: string) => createHash("sha256").update(fs.readFileSync(file)).digest("hex")

describe("20,000 partitions under 10% 429, 3% 503, 2% resets, 1% truncated bodies", () => {
  it(
    "exports every partition exactly once with the service's data, exact manifest counts, and the retries in the summary",
    async () => {
      const dataDir = tempDir("reliability-faults-data-")
      const seed = { partitions: 20_000, versions: 1, blobBytes: 256 }
      // Two services over one data directory: one without faults to read what it holds, one with faults to export from.
      const clean = await startService({ dataDir, seed })
      cleanup.push(() => clean.close())
      const faulty = await startService({
        dataDir,
        seed,
        faults: {
          ...noFaults,
          throttle: 0.1,
          unavailable: 0.03,
          reset: 0.02,
          truncate: 0.01,
          retryAfterSeconds: 1,
          seed: 20_240_601
        }
      })
      cleanup.push(() => faulty.close())
      const credentials = await faulty.credentialsFile()
      const out = tempDir("reliability-faults-out-")
      const [run, expected] = await Promise.all([
        cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--version",
          "0",
          "--out",
          out,
          "--format",
          "parquet",
          "--parts",
          "4",
          "--concurrency",
          "192",
          "--lookup-url",
          faulty.lookupUrl,
          "--credentials",
          credentials,
          "--log-format",
          "json"
        ], { timeoutMs: 200_000 }),
        serviceState(clean, "places", 0)
      ])
      expect(expected.size).toBe(20_000)
      expect(run.code, run.stderr.slice(-2000)).toBe(0)

      const summary = run.stdout.split("\n").find((l) => l.startsWith("Exported "))
      expect(summary, run.stdout).toBeDefined()
      expect(summary).toContain("20000 partitions")
      const retries = Number(/(\d+) retries/.exec(summary!)?.[1])
      // About 16% of ~20,000 blob requests fail at least once: the summary must count their retries.
      expect(retries).toBeGreaterThan(2_000)

      const dir = path.join(out, "demo", "places", "version=0")
      const rows = await readParquet(dir)
      expectMatchesService(rows, expected)

      const manifest = readJson(path.join(dir, "_manifest.json"))
      const bytes = [...expected.values()].reduce((n, e) => n + e.dataSize!, 0)
      expect(manifest).toMatchObject({
        catalogHrn: DEMO,
        layerId: "places",
        version: 0,
        mode: "full",
        partitions: 20_000,
        deleted: 0,
        bytes
      })
      expect(manifest.files.reduce((n: number, f: { rows: number }) => n + f.rows, 0)).toBe(20_000)
      for (const f of manifest.files) {
        expect(fs.statSync(path.join(dir, f.path)).size).toBe(f.bytes)
        expect(sha256File(path.join(dir, f.path))).toBe(f.sha256)
      }
      expect(filesBelow(out).filter((f) => f.endsWith(".partial") || f.includes("_parts"))).toEqual([])
    },
    240_000
  )
})

describe("a listing connection cut in the middle", () => {
  it("resumes with Range from the last complete partition: every partition once, data equal to the service's", async () => {
    const svc = await startService({ seed: { partitions: 1_500, versions: 1, blobBytes: 64 } })
    cleanup.push(() => svc.close())
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    // The first three listing responses are cut at 40%, 55% and 90% of the document (of what is left, after a Range).
    const cuts = [0.4, 0.55, 0.9]
    const documentBytes = (await (await svc.get(
      "/metadata/v1/catalogs/" + DEMO + "/layers/places/partitions?version=0&additionalFields=dataSize,checksum"
    )).arrayBuffer()).byteLength
    const cutAt: Array<number> = []
    proxy.decide = (req, log) => {
      const listings = log.filter(isListing).length
      if (!/\/layers\/places\/partitions(\?|$)/.test(req.url ?? "") || listings >= cuts.length) {
        return { kind: "forward" }
      }
      const from = Number(/bytes=(\d+)-/.exec(req.headers.range ?? "")?.[1] ?? 0)
      const at = Math.floor(documentBytes * cuts[listings]!)
      cutAt.push(at)
      return { kind: "cut", afterBytes: at - from }
    }
    const out = tempDir("reliability-cut-out-")
    const run = await exportPlaces(svc, proxy, out)
    expect(run.code, run.stderr).toBe(0)

    const listings = proxy.log.filter(isListing)
    expect(listings.map((e) => e.action)).toEqual(["cut", "cut", "cut", "forward"])
    expect(listings[0]!.range).toBeUndefined()
    const offsets = listings.slice(1).map((e) => Number(/^bytes=(\d+)-$/.exec(e.range ?? "")?.[1]))
    // Each resume starts where a complete partition ended: after the previous start, at most one partition before the cut.
    offsets.forEach((offset, i) => {
      expect(offset).toBeGreaterThan(i === 0 ? 0 : offsets[i - 1]!)
      expect(offset).toBeLessThanOrEqual(cutAt[i]!)
      expect(cutAt[i]! - offset).toBeLessThan(400)
    })
    expect(listings.slice(1).every((e) => e.status === 206)).toBe(true)

    const rows = await readParquet(path.join(out, "demo", "places", "version=0"))
    expectMatchesService(rows, await serviceState(svc, "places", 0))
    // Each blob was fetched once: the resumed listing repeated no partition.
    const handles = proxy.log.filter(isBlobRequest).map(handleOf)
    expect(handles.length).toBe(1_500)
    expect(new Set(handles).size).toBe(1_500)
  })
})

describe("tokens that expire mid-export", () => {
  it("a run several token lifetimes long uses fresh tokens, and no request fails", async () => {
    const svc = await startService({
      seed: { partitions: 400, versions: 1, blobBytes: 64 },
      auth: { maxTokenSeconds: 2 },
      faults: { ...noFaults, latencyMs: [30, 40] }
    })
    cleanup.push(() => svc.close())
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    const out = tempDir("reliability-token-out-")
    const run = await exportPlaces(svc, proxy, out, ["--parts", "2", "--concurrency", "2", "--list-concurrency", "1"])
    expect(run.code, run.stderr).toBe(0)
    const data = proxy.log.filter((e) => e.authorization !== undefined)
    const tokens = new Set(data.map((e) => e.authorization))
    // 400 blobs two at a time at 30-40 ms each: over 6 s, so at least three 2-second tokens.
    expect(tokens.size).toBeGreaterThanOrEqual(3)
    // A 401 may only be the race of a refresh with the clock; the same request then succeeded.
    for (const [i, e] of data.entries()) {
      if (e.status !== 401) continue
      expect(
        data.slice(i + 1).some((later) => later.path === e.path && later.status < 300),
        `${e.path} failed with 401`
      ).toBe(true)
    }
    // At most the requests in flight when a token ran out, per token.
    expect(data.filter((e) => e.status === 401).length).toBeLessThanOrEqual(2 * tokens.size)
    expectMatchesService(
      await readParquet(path.join(out, "demo", "places", "version=0")),
      await serviceState(svc, "places", 0)
    )
  })

  it("a request throttled across token lifetimes sends the current token on every retry (a gateway that checks tokens before throttling)", async () => {
    const svc = await startService({
      seed: { partitions: 30, versions: 1, blobBytes: 64 },
      auth: { maxTokenSeconds: 2 }
    })
    cleanup.push(() => svc.close())
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    // The first blob is throttled six times (Retry-After: 1) after the service has accepted its token: ~6 s, three token lifetimes.
    let target: string | undefined
    let throttled = 0
    proxy.decide = (req) => {
      const path = (req.url ?? "").split("?")[0]!
      if (!/\/data\/[^/]+$/.test(path) || req.method !== "GET") return { kind: "forward" }
      target ??= path
      if (path !== target) return { kind: "forward" }
      return {
        kind: "inspect",
        replace: (status) =>
          status === 200 && throttled++ < 6 ? { status: 429, headers: { "retry-after": "1" } } : undefined
      }
    }
    const out = tempDir("reliability-token2-out-")
    const run = await exportPlaces(svc, proxy, out)
    expect(run.code, run.stderr).toBe(0)
    const attempts = proxy.log.filter((e) => e.path === target)
    // A 401 could only be a refresh racing the clock on a loaded machine (then retried at once with a new token).
    expect(attempts.map((e) => e.status).filter((s) => s !== 401)).toEqual([429, 429, 429, 429, 429, 429, 200])
    expect(new Set(attempts.map((e) => e.authorization)).size).toBeGreaterThanOrEqual(3)
    expect(proxy.log.filter((e) => e.status === 401).length).toBeLessThanOrEqual(1)
    expectMatchesService(
      await readParquet(path.join(out, "demo", "places", "version=0")),
      await serviceState(svc, "places", 0)
    )
  })
})
