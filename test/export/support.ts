/**
 * Helpers of the in-process stage tests: a small catalog in memory (test/support/catalog.ts) with
 * the layer kinds an export meets, the layers that run the stages over it, and what the catalog
 * holds in the shape DuckDB reads an export's rows back in.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Partition } from "../../src/domain/Partition.ts"
import { Encoder } from "../../src/encoder/Encoder.ts"
import { InMemoryCatalog, layerTest, TestCatalog } from "../support/catalog.ts"
import type { ReadRow } from "../support/duckdb.ts"
import { sha1 } from "../support/files.ts"

export const HRN = "hrn:here:data::test:roads"

/** A HERE tile id, computed here from its definition (level marker bit, then the Morton bits of column and row). */
export const tileId = (level: number, x: number, y: number): string => {
  let id = 1n << BigInt(2 * level)
  for (let bit = 0; bit < level; bit++) {
    id |= BigInt((x >> bit) & 1) << BigInt(2 * bit)
    id |= BigInt((y >> bit) & 1) << BigInt(2 * bit + 1)
  }
  return id.toString()
}

const place = (i: number) => `p-${String(i).padStart(4, "0")}`
const placeData = (i: number, version: number) => JSON.stringify({ place: i, version, name: `place ${i}` })

/**
 * Layers: `places` (versioned JSON, SHA-256 checksums), `tiles` (versioned, gzip, HERE tiles at
 * level 12 around Berlin, MD5), `plain` (versioned, no digest: SHA-1 guessed from the checksum's
 * length), `traffic` (volatile), `events` (stream: not exportable). Versions:
 *   0  places p-0000..p-0119, tiles 16, plain 5
 *   1  places: 0..9 updated, 10..14 deleted, p-0200..p-0204 created
 *   2  places: 20..24 updated, p-0200 deleted again, p-empty created with an empty blob
 *   3  tiles: 4 updated
 */
export const makeCatalog = (): InMemoryCatalog => {
  const catalog = new InMemoryCatalog({
    hrn: HRN,
    layers: [
      { id: "places", layerType: "versioned", contentType: "application/json", digest: "SHA-256" },
      {
        id: "tiles",
        layerType: "versioned",
        contentType: "application/x-protobuf",
        contentEncoding: "gzip",
        digest: "MD5",
        partitioning: { scheme: "heretile", tileLevels: [12] }
      },
      { id: "plain", layerType: "versioned" },
      { id: "traffic", layerType: "volatile", contentType: "application/json" },
      { id: "events", layerType: "stream" }
    ]
  })
  const tiles = Array.from({ length: 16 }, (_, i) => ({ x: 2196 + (i % 4), y: 1620 + Math.floor(i / 4) }))
  catalog.publish({
    places: Array.from({ length: 120 }, (_, i) => ({ partition: place(i), data: placeData(i, 0) })),
    tiles: tiles.map(({ x, y }) => ({ partition: tileId(12, x, y), data: `tile ${x}/${y} `.repeat(40) })),
    plain: Array.from({ length: 5 }, (_, i) => ({ partition: `plain-${i}`, data: `plain ${i}` }))
  })
  catalog.publish({
    places: [
      ...Array.from({ length: 10 }, (_, i) => ({ partition: place(i), data: placeData(i, 1) })),
      ...Array.from({ length: 5 }, (_, i) => ({ partition: place(10 + i) })),
      ...Array.from({ length: 5 }, (_, i) => ({ partition: place(200 + i), data: placeData(200 + i, 1) }))
    ]
  })
  catalog.publish({
    places: [
      ...Array.from({ length: 5 }, (_, i) => ({ partition: place(20 + i), data: placeData(20 + i, 2) })),
      { partition: place(200) },
      { partition: "p-empty", data: "" }
    ]
  })
  catalog.publish({
    tiles: tiles.slice(0, 4).map(({ x, y }) => ({ partition: tileId(12, x, y), data: `tile ${x}/${y} v3 `.repeat(30) }))
  })
  catalog.putVolatile(
    "traffic",
    Array.from({ length: 30 }, (_, i) => ({ partition: `road-${i}`, data: JSON.stringify({ road: i, speed: 50 + i }) }))
  )
  return catalog
}

/** The client's test layers over `makeCatalog()` (or another), and the encoder on this thread. */
export const stagesLayer = (catalog: () => InMemoryCatalog = makeCatalog) =>
  Layer.merge(layerTest(catalog), Encoder.inline)

/**
 * As `stagesLayer`, with an encoder that opens a writer's files only once the catalog has been asked
 * for a blob (and dies after 5 s without one): an export completes only if its first blob requests
 * do not wait for its files to open.
 */
export const filesOpenedAfterFirstBlobLayer = (catalog: () => InMemoryCatalog = makeCatalog) =>
  Layer.provideMerge(
    Layer.effect(
      Encoder,
      Effect.gen(function*() {
        const test = yield* TestCatalog
        const inline = yield* Effect.provide(Encoder, Encoder.inline)
        // Real timers: the test clock of `it.scoped` would never move.
        const firstBlobAsked = Effect.flatMap(
          Effect.promise(async () => {
            for (const end = Date.now() + 5000; Date.now() < end;) {
              if (test.blobRequests.length > 0) return true
              await new Promise((resolve) => setTimeout(resolve, 5))
            }
            return false
          }),
          (asked) => (asked ? Effect.void : Effect.dieMessage("no blob was asked for within 5 s of opening the files"))
        )
        return { open: (settings, workload) => Effect.zipRight(firstBlobAsked, inline.open(settings, workload)) }
      })
    ),
    layerTest(catalog)
  )

/** A directory removed with the test's scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-stages-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** The rows an export of `partitions` (as listed) must hold, as `readParquet` reads them. */
export const expectedRows = (
  catalog: InMemoryCatalog,
  layer: string,
  partitions: ReadonlyArray<Partition>
): Array<Omit<ReadRow, `tile_${string}`>> =>
  partitions.map((p) => {
    const data = p.dataHandle === "" ? undefined : catalog.blob(layer, p.dataHandle)
    return {
      partition: p.partition,
      partition_version: BigInt(p.version),
      data_handle: p.dataHandle,
      data_size: data === undefined ? null : BigInt(p.dataSize ?? data.byteLength),
      checksum: p.checksum ?? null,
      data_sha1: data === undefined ? null : sha1(data)
    }
  })
