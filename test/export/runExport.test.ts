import { describe, expect, it } from "@effect/vitest"
import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { ApiError, RetryBudgetExhausted } from "../../src/client/Errors.ts"
import { type ExportOptions, runExport } from "../../src/export/Export.ts"
import { makePlan, type PlanRequest } from "../../src/export/Plan.ts"
import { TestCatalog } from "../support/catalog.ts"
import { literal, query, readParquet, withDuckDB } from "../support/duckdb.ts"
import { filesBelow, readJson, sha1, sha256File } from "../support/files.ts"
import { expectedRows, filesOpenedAfterFirstBlobLayer, HRN, stagesLayer, tempDir } from "./support.ts"

/**
 * runExport in this process: plan, list, fetch, write, checkpoint and commit, over the in-memory
 * catalog (test/support/catalog.ts), with the files read back by DuckDB and apache-arrow.
 */

const exportLayer = (
  out: string,
  request: Partial<PlanRequest> & { layer: string },
  options: Partial<ExportOptions> = {}
) =>
  Effect.flatMap(
    makePlan({ catalog: HRN, version: "latest", parts: 3, ...request }),
    (plan) =>
      runExport(plan, {
        out,
        format: "parquet",
        concurrency: 8,
        listConcurrency: 2,
        force: false,
        ...options
      })
  )

const placesDir = (out: string, version: number) => path.join(out, "roads", "places", `version=${version}`)
const stateOf = (out: string, layer = "places") => readJson(path.join(out, "roads", layer, "_state.json"))

const readArrow = (dir: string) =>
  fs.readdirSync(dir).filter((f) => f.endsWith(".arrow")).flatMap((f) =>
    tableFromIPC(fs.readFileSync(path.join(dir, f))).toArray().map((r) => {
      const row = r.toJSON() as { partition: string; data: Uint8Array | null }
      return { partition: row.partition, data_sha1: row.data === null ? null : sha1(row.data) }
    })
  ).sort((a, b) => (a.partition < b.partition ? -1 : 1))

describe("runExport", () => {
  it.scoped("writes the latest version: every partition once, as the catalog holds it, its manifest and the cursor", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      catalog.listingChunk = 7
      const out = yield* tempDir
      const result = yield* exportLayer(out, { layer: "places" }, { format: "both", maxFileBytes: 4096 })
      expect(result._tag).toBe("Exported")
      const dir = placesDir(out, 3)
      expect(result.dir).toBe(dir)
      const partitions = catalog.partitionsAt("places", 3)
      const expected = expectedRows(catalog, "places", partitions)
      const rows = yield* Effect.promise(() => readParquet(dir))
      expect(rows).toEqual(expected)
      expect(readArrow(dir)).toEqual(expected.map((r) => ({ partition: r.partition, data_sha1: r.data_sha1 })))

      const manifest = readJson(path.join(dir, "_manifest.json"))
      const bytes = partitions.reduce((n, p) => n + catalog.blob("places", p.dataHandle)!.byteLength, 0)
      expect(manifest).toMatchObject({
        formatVersion: 1,
        catalogHrn: HRN,
        layerId: "places",
        layerType: "versioned",
        version: 3,
        contentType: "application/json",
        mode: "full",
        partitions: partitions.length,
        deleted: 0,
        bytes
      })
      expect(result._tag === "Exported" && result.counters).toMatchObject({ partitions: partitions.length, bytes })
      // Several files per part and format (rolled at maxFileBytes), each as recorded, and nothing else.
      expect(manifest.files.length).toBeGreaterThan(6)
      expect(filesBelow(dir)).toEqual([...manifest.files.map((f: { path: string }) => f.path), "_manifest.json"].sort())
      for (const format of ["parquet", "arrow"]) {
        const files = manifest.files.filter((f: { format: string }) => f.format === format)
        expect(files.reduce((n: number, f: { rows: number }) => n + f.rows, 0)).toBe(partitions.length)
      }
      for (const f of manifest.files) expect(sha256File(path.join(dir, f.path))).toBe(f.sha256)
      expect(stateOf(out)).toMatchObject({ catalogHrn: HRN, layerId: "places", lastVersion: 3 })
      // One listing per part, each of the pinned version.
      expect(catalog.listings).toHaveLength(3)
      expect(new Set(catalog.listings.map((l) => l.options.part)).size).toBe(3)
      expect(catalog.listings.every((l) => l.kind === "partitions" && l.options.version === 3)).toBe(true)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("writes an older version, which differs from the latest; the cursor never moves back", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      yield* exportLayer(out, { layer: "places" })
      const result = yield* exportLayer(out, { layer: "places", version: 1 })
      expect(result.dir).toBe(placesDir(out, 1))
      const rows = yield* Effect.promise(() => readParquet(placesDir(out, 1)))
      expect(rows).toEqual(expectedRows(catalog, "places", catalog.partitionsAt("places", 1)))
      const latest = yield* Effect.promise(() => readParquet(placesDir(out, 3)))
      expect(latest.map((r) => r.data_handle)).not.toEqual(rows.map((r) => r.data_handle))
      expect(stateOf(out).lastVersion).toBe(3)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("does nothing on a re-run of a finished export, and re-exports the same rows with force", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const dir = placesDir(out, 3)
      yield* exportLayer(out, { layer: "places" }, { format: "both" })
      const stamp = () => filesBelow(dir).map((f) => [f, fs.statSync(path.join(dir, f)).mtimeMs])
      const before = stamp()
      const requests = catalog.requests.length
      const again = yield* exportLayer(out, { layer: "places" }, { format: "both" })
      expect(again._tag).toBe("AlreadyExported")
      expect(stamp()).toEqual(before)
      // Planning asked the service; the export itself did not.
      expect(catalog.requests.slice(requests)).not.toContain("metadata.partitions")
      const rows = yield* Effect.promise(() => readParquet(dir))
      const forced = yield* exportLayer(out, { layer: "places" }, { force: true, format: "parquet" })
      expect(forced._tag).toBe("Exported")
      expect(filesBelow(dir).some((f) => f.endsWith(".arrow"))).toBe(false)
      expect(yield* Effect.promise(() => readParquet(dir))).toEqual(rows)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("unpacks a gzip heretile layer (its checksums are of the unpacked data) and fills the tile columns", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const result = yield* exportLayer(out, { layer: "tiles" })
      const rows = yield* Effect.promise(() => readParquet(result.dir, "*"))
      const partitions = catalog.partitionsAt("tiles", 3)
      expect(rows.map(({ partition, partition_version, data_handle, data_size, checksum, data_sha1 }) => ({
        partition,
        partition_version,
        data_handle,
        data_size,
        checksum,
        data_sha1
      }))).toEqual(expectedRows(catalog, "tiles", partitions))
      const md5 = yield* Effect.promise(() =>
        withDuckDB((c) =>
          query(
            c,
            `SELECT partition, md5(data) AS md5 FROM read_parquet(${literal(path.join(result.dir, "*.parquet"))})`
          )
        )
      )
      for (const { partition, md5: digest } of md5) {
        expect(digest).toBe(partitions.find((p) => p.partition === partition)!.checksum)
      }
      for (const row of rows) {
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
      // The worked example of the facts sheet.
      const berlin = rows.find((r) => r.partition === "23618364")!
      expect([berlin.tile_level, berlin.tile_x, berlin.tile_y]).toEqual([12, 2198, 1622])
      expect([berlin.tile_west, berlin.tile_south, berlin.tile_east, berlin.tile_north]).toEqual([
        13.18359375,
        52.55859375,
        13.271484375,
        52.646484375
      ])
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("writes a snapshot of a volatile layer's current data, and no cursor", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const result = yield* exportLayer(out, { layer: "traffic" })
      expect(path.basename(result.dir)).toMatch(/^snapshot=\d{8}T\d{6}Z$/)
      const rows = yield* Effect.promise(() => readParquet(result.dir))
      expect(rows).toEqual(expectedRows(catalog, "traffic", catalog.partitionsAt("traffic")))
      expect(rows).toHaveLength(30)
      expect(rows.every((r) => r.partition_version === -1n)).toBe(true)
      expect(fs.existsSync(path.join(out, "roads", "traffic", "_state.json"))).toBe(false)
      expect(readJson(path.join(result.dir, "_manifest.json"))).toMatchObject({
        layerType: "volatile",
        snapshot: path.basename(result.dir).slice(9)
      })
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("writes deletions in a changes export as rows with null data, and an empty blob as empty data", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const result = yield* exportLayer(out, { layer: "places", version: 2, mode: "changes", baseVersion: 0 })
      const changes = catalog.changesBetween("places", 0, 2)
      const deleted = changes.filter((p) => p.dataHandle === "").map((p) => p.partition)
      // 10..14 deleted at 1, p-0200 created at 1 and deleted at 2
      expect(deleted).toEqual(["p-0010", "p-0011", "p-0012", "p-0013", "p-0014", "p-0200"])
      expect(result.manifest).toMatchObject({
        mode: "changes",
        baseVersion: 0,
        version: 2,
        partitions: changes.length,
        deleted: deleted.length
      })
      expect(yield* Effect.promise(() => readParquet(result.dir))).toEqual(expectedRows(catalog, "places", changes))
      const rows = yield* Effect.promise(() =>
        withDuckDB((c) =>
          query(
            c,
            `SELECT partition, data_handle, data IS NULL AS no_data, octet_length(data) AS bytes FROM read_parquet(${
              literal(path.join(result.dir, "*.parquet"))
            }) WHERE partition IN ('p-0010', 'p-empty') ORDER BY partition`
          )
        )
      )
      expect(rows).toEqual([
        { partition: "p-0010", data_handle: "", no_data: true, bytes: null },
        {
          partition: "p-empty",
          data_handle: changes.find((p) => p.partition === "p-empty")!.dataHandle,
          no_data: false,
          bytes: 0n
        }
      ])
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("asks for the first blobs without waiting for the part's files to open", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const result = yield* exportLayer(out, { layer: "places" })
      expect(result._tag).toBe("Exported")
      expect(yield* Effect.promise(() => readParquet(placesDir(out, 3)))).toEqual(
        expectedRows(catalog, "places", catalog.partitionsAt("places", 3))
      )
    }).pipe(Effect.provide(filesOpenedAfterFirstBlobLayer())))
})

describe("runExport after a failure", () => {
  it.scoped("a listing that fails stops the run and commits nothing; the next run lists only the parts not finished", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const plan = yield* makePlan({ catalog: HRN, layer: "places", version: "latest", parts: 3 })
      const parts = path.join(placesDir(out, 3), "_parts")
      const error = new RetryBudgetExhausted({
        method: "GET",
        url: "memory://metadata/partitions",
        retries: 20,
        elapsedMs: 1000,
        lastError: new ApiError({ status: 503, method: "GET", url: "memory://metadata/partitions" })
      })
      // The last part's listing fails once the other two have finished.
      catalog.listingFault = {
        after: 5,
        error,
        when: (request) => request.options.part === plan.parts[2],
        wait: Effect.promise(async () => {
          while (!["part-0.json", "part-1.json"].every((f) => fs.existsSync(path.join(parts, f)))) {
            await new Promise((resolve) => setTimeout(resolve, 5))
          }
        })
      }
      const options = { out, format: "parquet", concurrency: 4, listConcurrency: 3, force: false } as const
      const failed = yield* Effect.flip(runExport(plan, options))
      expect(failed).toMatchObject({ _tag: "RetryBudgetExhausted", message: error.message })
      const dir = placesDir(out, 3)
      expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)
      expect(fs.readdirSync(parts).sort()).toEqual(["part-0.json", "part-1.json"])
      // Nothing of the failed part looks finished: its rows are in .partial files at most.
      const vouched = new Set(
        ["part-0.json", "part-1.json"].flatMap((f) =>
          readJson(path.join(parts, f)).files.map((x: { path: string }) => x.path)
        )
      )
      for (const f of fs.readdirSync(dir)) if (f.endsWith(".parquet")) expect(vouched.has(f)).toBe(true)

      catalog.listingFault = undefined
      const listings = catalog.listings.length
      const again = yield* runExport(plan, options)
      expect(again._tag).toBe("Exported")
      expect(catalog.listings.slice(listings).map((l) => l.options.part)).toEqual([plan.parts[2]])
      expect(again._tag === "Exported" && again.counters.skippedParts).toBe(2)
      expect(yield* Effect.promise(() => readParquet(dir))).toEqual(
        expectedRows(catalog, "places", catalog.partitionsAt("places", 3))
      )
      expect(filesBelow(dir).filter((f) => !f.endsWith(".parquet"))).toEqual(["_manifest.json"])
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("a blob that never matches its checksum stops the run with IntegrityError; the next run completes", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const target = catalog.partitionsAt("places", 3)[42]!
      catalog.blobFaults.set(target.dataHandle, ["corrupt", "corrupt"])
      const error = yield* Effect.flip(exportLayer(out, { layer: "places" }, { integrityAttempts: 2 }))
      expect(error._tag).toBe("IntegrityError")
      expect(error.message).toContain(`partition '${target.partition}'`)
      const dir = placesDir(out, 3)
      expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)
      const again = yield* exportLayer(out, { layer: "places" })
      expect(again._tag).toBe("Exported")
      expect(yield* Effect.promise(() => readParquet(dir))).toEqual(
        expectedRows(catalog, "places", catalog.partitionsAt("places", 3))
      )
    }).pipe(Effect.provide(stagesLayer())))
})
