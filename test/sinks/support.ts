import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as RollingWriter from "../../src/sinks/RollingWriter.ts"
import type { Row } from "../../src/sinks/Row.ts"

export const metadata = {
  catalog_hrn: "hrn:here:data::olp-here:rib-2",
  layer_id: "topology-geometry",
  layer_type: "versioned",
  content_type: "application/x-protobuf",
  content_encoding: "gzip",
  catalog_version: "4711",
  tool_version: "0.1.0"
}

export const sha1 = (bytes: Uint8Array): string => createHash("sha1").update(bytes).digest("hex")

export const sha256File = (file: string): string => createHash("sha256").update(fs.readFileSync(file)).digest("hex")

/** Deterministic bytes (xorshift), so a failing test can be rerun on the same data. */
export const bytes = (size: number, seed: number): Uint8Array => {
  let x = seed * 2654435761 || 1
  const out = new Uint8Array(size)
  for (let i = 0; i < size; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

export const INT64_MAX = 2n ** 63n - 1n
export const ABOVE_2_53 = 2n ** 53n + 1n

/**
 * Rows covering the awkward cases: int64 above 2^53 (as bigint), versions given as numbers,
 * null and empty blobs, null checksums and sizes, non-ASCII partition ids, null tile fields.
 */
export const makeRows = (count: number, options: { readonly dataBytes?: number; readonly heretile?: boolean } = {}): Array<Row> =>
  Array.from({ length: count }, (_, i): Row => {
    const data = i % 7 === 3 ? null : i % 11 === 5 ? new Uint8Array(0) : bytes(options.dataBytes ?? 64 + (i % 50) * 37, i + 1)
    const base = {
      partition: i % 13 === 0 ? `straße-${i}-🗺` : `${100000 + i}`,
      partitionVersion: i % 3 === 0 ? ABOVE_2_53 + BigInt(i) : i % 3 === 1 ? INT64_MAX - BigInt(i - 1) : i,
      dataHandle: `handle-${i.toString(16).padStart(8, "0")}`,
      dataSize: i % 5 === 0 ? null : i % 5 === 1 ? ABOVE_2_53 + 2n : (data?.byteLength ?? 0),
      checksum: i % 4 === 0 ? null : data === null ? null : sha1(data),
      data
    }
    if (!options.heretile) return base
    return {
      ...base,
      tileLevel: i % 9 === 0 ? null : i % 15,
      tileX: i % 9 === 0 ? null : i * 3,
      tileY: i % 9 === 0 ? null : -i,
      tileWest: i % 9 === 0 ? null : -180 + i * 0.125,
      tileSouth: i % 9 === 0 ? null : -90 + i * 0.0625,
      tileEast: i % 10 === 0 ? null : -179.875 + i * 0.125,
      tileNorth: i % 9 === 0 ? null : 89.5
    }
  })

export const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), "sinks-test-"))

/** Opens a writer, writes `rows` in batches and finishes, all in one scope. */
export const writeAll = (options: RollingWriter.Options, rows: ReadonlyArray<Row>, batchSize = 100) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const writer = yield* RollingWriter.make(options)
        for (let i = 0; i < rows.length; i += batchSize) yield* writer.write(rows.slice(i, i + batchSize))
        return yield* writer.finish
      })
    )
  )

export { query, withDuckDB } from "../support/duckdb.ts"

/** The values DuckDB or Arrow should read back for a row, with `data` as its sha1. */
export const expectedRecord = (row: Row, heretile: boolean): Record<string, unknown> => ({
  partition: row.partition,
  partition_version: BigInt(row.partitionVersion),
  data_handle: row.dataHandle,
  data_size: row.dataSize === null ? null : BigInt(row.dataSize),
  checksum: row.checksum,
  data_sha1: row.data === null ? null : sha1(row.data),
  ...(heretile
    ? {
        tile_level: row.tileLevel ?? null,
        tile_x: row.tileX ?? null,
        tile_y: row.tileY ?? null,
        tile_west: row.tileWest ?? null,
        tile_south: row.tileSouth ?? null,
        tile_east: row.tileEast ?? null,
        tile_north: row.tileNorth ?? null
      }
    : {})
})

export const listDir = (dir: string): Array<string> => fs.readdirSync(dir).sort()
