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
import { literal, query, readParquet as readParquetFiles, withDuckDB } from "../support/duckdb.ts"
import { sha1, sha256File } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

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

  it("writes an older version, which differs from the latest", async () => {
    const result = await exportLayer({ layer: "places", version: 3 })
    expect(result.dir.endsWith("version=3")).toBe(true)
    const expected = await serviceState(svc, "places", 3)
    const rows = await readParquet(result.dir)
    expectMatchesService(rows, expected)
    const latestRows = await readParquet(path.join(out, "demo", "places", "version=7"))
    expect(latestRows.map((r) => r.data_handle)).not.toEqual(rows.map((r) => r.data_handle))
    // The incremental cursor never moves back.
    expect(JSON.parse(fs.readFileSync(path.join(out, "demo", "places", "_state.json"), "utf8")).lastVersion).toBe(7)
  })

  it("does nothing on a re-run of a finished export, and re-exports the same rows with force", async () => {
    const dir = path.join(out, "demo", "places", "version=7")
    const before = fs.readdirSync(dir).map((f) => [f, fs.statSync(path.join(dir, f)).mtimeMs] as const)
    const again = await exportLayer({ layer: "places" })
    expect(again._tag).toBe("AlreadyExported")
    expect(fs.readdirSync(dir).map((f) => [f, fs.statSync(path.join(dir, f)).mtimeMs] as const)).toEqual(before)
    const rowsBefore = await readParquet(dir)
    const forced = await exportLayer({ layer: "places" }, { force: true, format: "parquet" })
    expect(forced._tag).toBe("Exported")
    expect(fs.readdirSync(dir).some((f) => f.endsWith(".arrow"))).toBe(false)
    expect(await readParquet(dir)).toEqual(rowsBefore)
  })

  it("decodes the gzip heretile layer and fills the tile columns", async () => {
    const result = await exportLayer({ layer: "tiles" }, { format: "parquet" })
    const expected = await serviceState(svc, "tiles", result.manifest.version)
    const rows = await readParquet(result.dir)
    expectMatchesService(rows, expected)
    for (const row of rows) {
      // The checksum is of the uncompressed data, so this also proves the data was stored decoded.
      expect(row.data_sha1).toBe(row.checksum)
      // Independent of src/domain/HereTile: level from the bit length, column/row from the Morton bits.
      const id = BigInt(row.partition)
      const level = (id.toString(2).length - 1) / 2
      let column = 0
      let rowIndex = 0
      for (let bit = 0; bit < level; bit++) {
        column |= Number((id >> BigInt(2 * bit)) & 1n) << bit
        rowIndex |= Number((id >> BigInt(2 * bit + 1)) & 1n) << bit
      }
      const size = 360 / 2 ** level
      expect(row.tile_level).toBe(level)
      expect(row.tile_x).toBe(column)
      expect(row.tile_y).toBe(rowIndex)
      expect(row.tile_west).toBeCloseTo(-180 + column * size, 9)
      expect(row.tile_south).toBeCloseTo(-90 + rowIndex * size, 9)
      expect(row.tile_east).toBeCloseTo(-180 + (column + 1) * size, 9)
      expect(row.tile_north).toBeCloseTo(-90 + (rowIndex + 1) * size, 9)
    }
    // The worked example of the facts sheet, when the seed holds that tile.
    const berlin = rows.find((r) => r.partition === "23618364")
    if (berlin !== undefined) {
      expect([berlin.tile_level, berlin.tile_x, berlin.tile_y]).toEqual([12, 2198, 1622])
      expect([berlin.tile_west, berlin.tile_south, berlin.tile_east, berlin.tile_north]).toEqual([
        13.18359375,
        52.55859375,
        13.271484375,
        52.646484375
      ])
    }
  })
})

describe("export of a volatile layer", () => {
  it("writes a snapshot of the current data", async () => {
    const result = await exportLayer({ layer: "traffic" }, { format: "parquet" })
    expect(path.basename(result.dir)).toMatch(/^snapshot=\d{8}T\d{6}Z$/)
    const rows = await readParquet(result.dir)
    expectMatchesService(rows, await serviceState(svc, "traffic", undefined))
    expect(rows.length).toBe(100)
    expect(fs.existsSync(path.join(out, "demo", "traffic", "_state.json"))).toBe(false)
  })
})

describe("partitions without data", () => {
  it("writes deletions in a changes export as rows with null data, and an empty blob as empty data", async () => {
    // Publish one version: an empty blob for a new partition, and a deletion of an existing one.
    const put = await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/empty-blob-1`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: new Uint8Array(0)
    })
    expect(put.status).toBe(200)
    const init = await svc.get(`/publish/v2/catalogs/${DEMO}/publications`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ layerIds: ["places"] })
    })
    const publication = (await init.json()) as { id: string }
    const upload = await svc.get(
      `/publish/v2/catalogs/${DEMO}/layers/places/publications/${publication.id}/partitions`,
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          partitions: [{ partition: "zz-empty", dataHandle: "empty-blob-1", dataSize: 0 }, {
            partition: "place-0000000",
            dataHandle: ""
          }]
        })
      }
    )
    expect(upload.status).toBe(204)
    expect((await svc.get(`/publish/v2/catalogs/${DEMO}/publications/${publication.id}`, { method: "PUT" })).status)
      .toBe(204)

    const result = await exportLayer({ layer: "places", mode: "changes", baseVersion: 7, parts: 1 }, {
      format: "parquet"
    })
    expect(result.manifest).toMatchObject({ mode: "changes", baseVersion: 7, version: 8, partitions: 2, deleted: 1 })
    const rows = await withDuckDB((c) =>
      query(
        c,
        `SELECT partition, data_handle, data IS NULL AS no_data, octet_length(data) AS bytes FROM read_parquet(${
          literal(path.join(result.dir, "*.parquet"))
        }) ORDER BY partition`
      )
    )
    expect(rows).toEqual([
      { partition: "place-0000000", data_handle: "", no_data: true, bytes: null },
      { partition: "zz-empty", data_handle: "empty-blob-1", no_data: false, bytes: 0n }
    ])
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
