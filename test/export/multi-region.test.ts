/**
 * Exports and publications of a multi-region catalog through the real CLI against the local service:
 * `publish` writes both regions of a versioned layer or is refused during an outage; an export whose
 * primary region goes down in the middle of the run goes on in the backup region and completes
 * exactly (DuckDB against the service); the manifest and the summary say which region served each
 * part; `--no-failover` keeps to the selected region; a volatile snapshot is read whole from one region.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { noFaults } from "../../src/server/Faults.ts"
import { catalogBody, createCatalog, layer, post, put } from "../admin/helpers.ts"
import { eachLimited } from "../reliability/support.ts"
import { expectJson, expectStatus, sleep } from "../server/helpers.ts"
import { BIN, cliFor, type CliResult } from "../support/cli.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { sha1 } from "../support/files.ts"
import { startService, type TestService } from "../support/service.ts"

const EU = "eu-ireland"
const US = "us-oregon"
const PARTITIONS = 1200

let svc: TestService
let credentials: string
let hrn: string

const cli = (...args: Array<string>) => cliFor(svc, credentials)(...args)
const setRegion = async (region: string, state: "up" | "down") =>
  expectStatus(await put(svc, `/local/v1/regions/${region}`, { state }), 200)

/** Starts the CLI and returns its running process's result; `started` resolves once it runs. */
const spawnCli = (args: Array<string>) => {
  const child = spawn(process.execPath, [BIN, ...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d) => (stdout += d))
  child.stderr.on("data", (d) => (stderr += d))
  return new Promise<CliResult>((resolve) =>
    child.on("close", (code) => resolve({ code, signal: null, stdout, stderr }))
  )
}

/** What a region serves for a layer: partition -> sha1 of its blob. */
const served = async (region: string, layerId: string, version?: number) => {
  const base = `/regions/${region}`
  const q = version === undefined ? "" : `version=${version}&`
  const listing = await expectJson<{ partitions: Array<{ partition: string; dataHandle: string }> }>(
    await svc.get(`${base}/metadata/v1/catalogs/${hrn}/layers/${layerId}/partitions?${q}`),
    200
  )
  const out = new Map<string, string>()
  // Sixteen at a time: one after another, the service's latency makes 1,200 blobs take seconds.
  await eachLimited(listing.partitions, 16, async (p) => {
    const blob = await svc.get(`${base}/blobstore/v1/catalogs/${hrn}/layers/${layerId}/data/${p.dataHandle}`)
    expect(blob.status, p.partition).toBe(200)
    out.set(p.partition, sha1(new Uint8Array(await blob.arrayBuffer())))
  })
  return out
}

/** What the export wrote: partition -> sha1 of its data, read back by DuckDB. */
const exported = (dir: string) =>
  withDuckDB(async (c) => {
    const rows = await query(
      c,
      `SELECT partition, sha1(data) AS digest FROM read_parquet(${
        literal(path.join(dir, "*.parquet"))
      }, hive_partitioning = false)`
    )
    return new Map(rows.map((r) => [r.partition as string, r.digest as string]))
  })

const manifestOf = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "_manifest.json"), "utf8"))

beforeAll(async () => {
  // A little latency per request, so that an export of a few thousand blobs runs long enough to be interrupted.
  svc = await startService({
    seed: { partitions: 20, versions: 2 },
    replicationDelayMs: 200,
    faults: { ...noFaults, latencyMs: [3, 6] }
  })
  credentials = await svc.credentialsFile()
  const replication = { regions: [{ id: EU, role: "primary" }, { id: US, role: "secondary" }] }
  hrn = await createCatalog(
    svc,
    catalogBody("mr-export", [layer("v", "versioned", { digest: "SHA-1" }), layer("vol", "volatile")], { replication })
  )
  const init = await expectJson<{ id: string }>(
    await post(svc, `/publish/v2/catalogs/${hrn}/publications`, { layerIds: ["v"] }),
    200
  )
  const partitions = Array.from({ length: PARTITIONS }, (_, i) => {
    const text = `partition ${i} `.repeat(1 + (i % 7))
    return {
      partition: `p-${String(i).padStart(5, "0")}`,
      data: Buffer.from(text).toString("base64"),
      dataSize: text.length,
      checksum: sha1(text)
    }
  })
  await expectStatus(
    await post(svc, `/publish/v2/catalogs/${hrn}/layers/v/publications/${init.id}/partitions`, { partitions }),
    204
  )
  await expectStatus(await put(svc, `/publish/v2/catalogs/${hrn}/publications/${init.id}`, undefined), 204)
}, 120_000)
afterAll(() => svc?.close())

describe("publish into a multi-region catalog", () => {
  it("writes a versioned layer to both regions, and is refused (exit 5, naming the region) while one is down", async () => {
    const file = path.join(svc.dir, "extra.json")
    fs.writeFileSync(file, `{"extra":true}`)
    const ok = await cli("publish", "--catalog", hrn, "--layer", "v", "--partition", `extra=${file}`)
    expect(ok.stderr).toBe("")
    expect(ok.code).toBe(0)
    const version = Number(/catalog version (\d+)/.exec(ok.stdout)![1])
    expect((await served(US, "v", version)).get("extra")).toBe(sha1(`{"extra":true}`))
    expect((await served(EU, "v", version)).get("extra")).toBe(sha1(`{"extra":true}`))

    await setRegion(US, "down")
    try {
      const refused = await cli(
        "publish",
        "--catalog",
        hrn,
        "--layer",
        "v",
        "--partition",
        `refused=${file}`,
        "--retry-budget",
        "2s"
      )
      expect(refused.code).toBe(5)
      expect(refused.stderr).toMatch(/503.*region us-oregon of this multi-region catalog is unavailable/)
    } finally {
      await setRegion(US, "up")
    }
    const latest = await expectJson<{ version: number }>(
      await svc.get(`/regions/${EU}/metadata/v1/catalogs/${hrn}/versions/latest`),
      200
    )
    expect(latest.version).toBe(version)
  })
})

describe("an export of a multi-region catalog", () => {
  it(
    "completes exactly when its primary region goes down in the middle of the run, from the backup region, and says which region served each part",
    async () => {
      const out = path.join(svc.dir, "failover")
      const run = spawnCli([
        "export",
        "--catalog",
        hrn,
        "--layer",
        "v",
        "--out",
        out,
        "--parts",
        "4",
        "--list-concurrency",
        "1",
        "--concurrency",
        "4",
        "--json",
        "--log-format",
        "json"
      ])
      // Once the first part is checkpointed, eu-ireland goes down.
      const layerDir = path.join(out, "mr-export", "v")
      let dir: string | undefined
      for (let i = 0; i < 1500 && dir === undefined; i++) {
        const versions = fs.existsSync(layerDir) ? fs.readdirSync(layerDir).filter((d) => d.startsWith("version=")) : []
        if (versions.length > 0 && fs.existsSync(path.join(layerDir, versions[0]!, "_parts", "part-0.json"))) {
          dir = path.join(layerDir, versions[0]!)
        } else await sleep(20)
      }
      expect(dir, "the first part was never checkpointed").toBeDefined()
      expect(fs.existsSync(path.join(dir!, "_manifest.json")), "the export ended before the outage").toBe(false)
      await setRegion(EU, "down")
      let result: CliResult
      try {
        result = await run
      } finally {
        await setRegion(EU, "up")
      }
      expect(result.code, result.stderr).toBe(0)

      const summary = JSON.parse(result.stdout)
      expect(summary.status).toBe("exported")
      expect(summary.failover).toMatchObject({ from: EU, to: US })
      expect(summary.failover.reason).toMatch(/503/)
      const manifest = manifestOf(dir!)
      expect(manifest.regions.map((r: { part: number }) => r.part)).toEqual([0, 1, 2, 3])
      expect(manifest.regions[0]).toEqual({ part: 0, region: EU })
      expect(manifest.regions.some((r: { region: string }) => r.region === US)).toBe(true)
      expect(summary.regions).toEqual(manifest.regions)
      // The failover is logged once, as a warning naming both regions.
      const warnings = result.stderr.split("\n").filter((l) => l.includes("failing over"))
      expect(warnings).toHaveLength(1)
      expect(JSON.parse(warnings[0]!)).toMatchObject({
        logLevel: "WARN",
        annotations: { event: "failover", from: EU, to: US }
      })

      // Exactly what the service holds at that version: every partition once, every byte.
      const expected = await served(US, "v", manifest.version)
      expect(expected.size).toBeGreaterThanOrEqual(PARTITIONS)
      expect(await exported(dir!)).toEqual(expected)
      expect(manifest.partitions).toBe(expected.size)
    },
    120_000
  )

  it("keeps to the selected region with --no-failover (exit 5), and reads the region --region names", async () => {
    await setRegion(EU, "down")
    try {
      const out = path.join(svc.dir, "no-failover")
      const stuck = await cli(
        "export",
        "--catalog",
        hrn,
        "--layer",
        "v",
        "--out",
        out,
        "--no-failover",
        "--retry-budget",
        "2s"
      )
      expect(stuck.code).toBe(5)
      expect(stuck.stderr).toMatch(/503/)
      expect(fs.existsSync(path.join(out, "mr-export", "v"))).toBe(false)

      const us = path.join(svc.dir, "us-only")
      const read = await cli("export", "--catalog", hrn, "--layer", "v", "--out", us, "--region", US, "--json")
      expect(read.code, read.stderr).toBe(0)
      const summary = JSON.parse(read.stdout)
      expect(summary.failover).toBeUndefined()
      expect(summary.regions.every((r: { region: string }) => r.region === US)).toBe(true)
      expect(await exported(summary.dir)).toEqual(await served(US, "v", summary.version))
    } finally {
      await setRegion(EU, "up")
    }
  }, 60_000)

  it(
    "reads a volatile snapshot whole from one region: after a failover, the backup's data, without the write it lost",
    async () => {
      const publishVolatile = async (region: string, partitions: Record<string, string>) => {
        const base = `/regions/${region}/publish/v2/catalogs/${hrn}`
        const { id } = await expectJson<{ id: string }>(
          await post(svc, `${base}/publications`, { layerIds: ["vol"] }),
          200
        )
        const body = {
          partitions: Object.entries(partitions).map(([partition, text]) => ({
            partition,
            data: Buffer.from(text).toString("base64")
          }))
        }
        await expectStatus(await post(svc, `${base}/layers/vol/publications/${id}/partitions`, body), 204)
        await expectStatus(await put(svc, `${base}/publications/${id}`, undefined), 204)
      }
      await publishVolatile(EU, { a: "a1", b: "b1" })
      for (let i = 0; i < 100 && (await served(US, "vol")).size < 2; i++) await sleep(50)
      // Acknowledged in eu-ireland, which goes down before the copy is made.
      await publishVolatile(EU, { b: "b2" })
      await setRegion(EU, "down")
      try {
        const out = path.join(svc.dir, "volatile")
        const snapshot = await cli(
          "export",
          "--catalog",
          hrn,
          "--layer",
          "vol",
          "--out",
          out,
          "--json",
          "--log-format",
          "json"
        )
        expect(snapshot.code, snapshot.stderr).toBe(0)
        const summary = JSON.parse(snapshot.stdout)
        expect(summary.failover).toMatchObject({ from: EU, to: US })
        expect(summary.regions).toEqual([{ part: 0, region: US }])
        expect(await exported(summary.dir)).toEqual(new Map([["a", sha1("a1")], ["b", sha1("b1")]]))
      } finally {
        await setRegion(EU, "up")
      }
    },
    60_000
  )
})
