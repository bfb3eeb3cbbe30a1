import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ExportOptions, runExport } from "../../src/export/Export.ts"
import { makePlan, type PlanRequest } from "../../src/export/Plan.ts"
import { type Expected, expectMatchesService, serviceState } from "../reliability/support.ts"
import { type ClientLayer, clientLayerFor, runWith } from "../support/client.ts"
import { readParquet as readParquetFiles } from "../support/duckdb.ts"
import { sha1, sha256File } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

/**
 * One export over the whole real path (client, local service over HTTP, files), and one killed for
 * real. Versions, layer kinds, re-runs, deletions and failures are tested in process over the
 * client's test layers: runExport.test.ts and the stage tests beside it.
 */

let svc: TestService
let client: ClientLayer
let out: string

const options = (overrides: Partial<ExportOptions> = {}): ExportOptions => ({
  out,
  format: "both",
  compression: "zstd",
  concurrency: 8,
  listConcurrency: 2,
  force: false,
  ...overrides
})

const exportLayer = (request: Partial<PlanRequest> & { layer: string }, overrides: Partial<ExportOptions> = {}) =>
  runWith(
    client,
    Effect.flatMap(
      makePlan({ catalog: DEMO, version: "latest", parts: 3, ...request }),
      (plan) => runExport(plan, options(overrides))
    )
  )

/** Every column of an export directory's Parquet files (with the tile columns), read by DuckDB. */
const readParquet = (dir: string) => readParquetFiles(dir, "*")

const readArrow = (dir: string) =>
  fs.readdirSync(dir).filter((f) => f.endsWith(".arrow")).flatMap((f) =>
    tableFromIPC(fs.readFileSync(path.join(dir, f))).toArray().map((r) => {
      const row = r.toJSON() as Record<string, unknown>
      return {
        partition: row.partition as string,
        data: row.data as Uint8Array | null,
        data_handle: row.data_handle as string
      }
    })
  ).sort((a, b) => (a.partition < b.partition ? -1 : 1))

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 400, versions: 8 } })
  client = await clientLayerFor(svc)
  out = path.join(svc.dir, "out")
})
afterAll(() => svc.close())

describe("export of a versioned layer", () => {
  it("writes the latest version; DuckDB and apache-arrow read back what the service holds", async () => {
    const result = await exportLayer({ layer: "places" })
    expect(result._tag).toBe("Exported")
    const latest =
      ((await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest`)).json()) as { version: number }).version
    expect(latest).toBe(7)
    expect(result.dir).toBe(path.join(out, "demo", "places", `version=${latest}`))
    const expected = await serviceState(svc, "places", latest)
    const rows = await readParquet(result.dir)
    expectMatchesService(rows, expected)
    const arrow = readArrow(result.dir)
    expect(arrow.map((r) => r.partition)).toEqual(rows.map((r) => r.partition))
    for (const r of arrow) expect(r.data === null ? null : sha1(r.data)).toBe(expected.get(r.partition)!.dataSha1)

    const manifest = JSON.parse(fs.readFileSync(path.join(result.dir, "_manifest.json"), "utf8"))
    expect(manifest).toMatchObject({
      formatVersion: 1,
      catalogHrn: DEMO,
      layerId: "places",
      layerType: "versioned",
      version: latest,
      mode: "full",
      partitions: expected.size,
      deleted: 0
    })
    expect(manifest.files.filter((f: any) => f.format === "parquet").reduce((n: number, f: any) => n + f.rows, 0)).toBe(
      expected.size
    )
    for (const file of manifest.files) expect(sha256File(path.join(result.dir, file.path))).toBe(file.sha256)
    expect(fs.readdirSync(result.dir).some((f) => f.endsWith(".partial") || f === "_parts")).toBe(false)
    const state = JSON.parse(fs.readFileSync(path.join(out, "demo", "places", "_state.json"), "utf8"))
    expect(state.lastVersion).toBe(latest)
  })
})

describe("a killed export", () => {
  it("leaves no finished-looking directory, and the next run completes with the same rows", async () => {
    const slow = await startService({
      seed: { partitions: 600, versions: 2 },
      faults: { ...(await import("../../src/server/Faults.ts")).noFaults, latencyMs: [15, 25] }
    })
    try {
      const credentials = await slow.credentialsFile()
      const target = path.join(slow.dir, "out")
      const run = (extra: Array<string> = []) =>
        spawn(process.execPath, [
          "src/cli/bin.mjs",
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--out",
          target,
          "--parts",
          "4",
          "--list-concurrency",
          "2",
          "--concurrency",
          "4",
          "--lookup-url",
          slow.lookupUrl,
          "--credentials",
          credentials,
          "--quiet",
          ...extra
        ], { stdio: ["ignore", "pipe", "pipe"] })
      const dir = path.join(target, "demo", "places", "version=1")
      const killed = run()
      // Kill once the run is well under way: some rows written, not all.
      await new Promise<void>((resolve, reject) => {
        const started = Date.now()
        const timer = setInterval(() => {
          const files = fs.existsSync(dir) ? fs.readdirSync(dir) : []
          if (files.some((f) => f.endsWith(".partial")) || Date.now() - started > 30_000) {
            clearInterval(timer)
            killed.kill("SIGKILL")
            resolve()
          }
        }, 20)
        killed.on("exit", (code) => code === 0 && reject(new Error("the export finished before it could be killed")))
      })
      await new Promise((r) => killed.on("close", r))
      expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)

      const rerun = run()
      const code = await new Promise((r) => rerun.on("close", r))
      expect(code).toBe(0)
      expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(true)
      expect(fs.readdirSync(dir).some((f) => f.endsWith(".partial"))).toBe(false)
      const expected = new Map<string, Expected>()
      const listing = (await (await slow.get(
        `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=1&additionalFields=checksum`
      )).json()) as {
        partitions: Array<{ partition: string; version: number; dataHandle: string; checksum: string }>
      }
      for (const p of listing.partitions) {
        expected.set(p.partition, {
          version: p.version,
          dataHandle: p.dataHandle,
          checksum: p.checksum,
          dataSize: null,
          dataSha1: p.checksum
        })
      }
      expectMatchesService(await readParquet(dir), expected)
    } finally {
      await slow.close()
    }
  })
})
