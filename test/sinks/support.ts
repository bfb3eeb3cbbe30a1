import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach } from "vitest"
import * as HereTile from "../../src/domain/HereTile.ts"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"

export const metadata = {
  catalog_hrn: "hrn:here:data::olp-here:rib-2",
  layer_id: "topology-geometry",
  layer_type: "versioned",
  content_type: "application/x-protobuf",
  content_encoding: "gzip",
  catalog_version: "4711",
  tool_version: "0.1.0"
}

import { sha1 } from "../support/files.ts"

export { sha1, sha256File } from "../support/files.ts"

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

/** A row as the tests think of it; writers take them column by column (`batchOf`). */
export interface TestRow {
  readonly partition: string
  readonly partitionVersion: bigint | number
  readonly dataHandle: string
  readonly dataSize: bigint | number | null
  readonly checksum: string | null
  readonly data: Uint8Array | null
}

/**
 * Rows covering the awkward cases: int64 above 2^53 (as bigint), versions given as numbers,
 * null and empty blobs, null checksums and sizes, non-ASCII partition ids; with `heretile`, partition
 * ids that are HERE tiles of every level and some that are not (null tile columns).
 */
export const makeRows = (
  count: number,
  options: { readonly dataBytes?: number; readonly heretile?: boolean } = {}
): Array<TestRow> =>
  Array.from({ length: count }, (_, i): TestRow => {
    const data = i % 7 === 3
      ? null
      : i % 11 === 5
      ? new Uint8Array(0)
      : bytes(options.dataBytes ?? 64 + (i % 50) * 37, i + 1)
    const level = i % 15
    const partition = options.heretile
      ? i % 9 === 0
        ? `not-a-tile-${i}`
        : String(HereTile.fromAddress({ level, column: (i * 3) % 2 ** level, row: i % Math.max(1, 2 ** (level - 1)) }))
      : i % 13 === 0
      ? `straße-${i}-🗺`
      : `${100000 + i}`
    return {
      partition,
      partitionVersion: i % 3 === 0 ? ABOVE_2_53 + BigInt(i) : i % 3 === 1 ? INT64_MAX - BigInt(i - 1) : i,
      dataHandle: `handle-${i.toString(16).padStart(8, "0")}`,
      dataSize: i % 5 === 0 ? null : i % 5 === 1 ? ABOVE_2_53 + 2n : (data?.byteLength ?? 0),
      checksum: i % 4 === 0 ? null : data === null ? null : sha1(data),
      data
    }
  })

export const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), "sinks-test-"))

/** Opens a writer, writes `rows` in batches and finishes, all in one scope. */
export const writeRows = (options: RollingWriter.Options, rows: ReadonlyArray<TestRow>, batchSize = 100) =>
  Effect.scoped(
    Effect.gen(function*() {
      const writer = yield* RollingWriter.make(options)
      for (let i = 0; i < rows.length; i += batchSize) yield* writer.write(batchOf(rows.slice(i, i + batchSize)))
      return yield* writer.finish
    })
  )

/** `writeRows` run to its end, encoding on the encoder thread (or `encoder`), for tests that read the files back. */
export const writeAll = (
  options: RollingWriter.Options,
  rows: ReadonlyArray<TestRow>,
  batchSize = 100,
  encoder: Layer.Layer<Encoder> = Encoder.thread
) => Effect.runPromise(writeRows(options, rows, batchSize).pipe(Effect.provide(encoder)))

/** A new temporary directory for each call, all removed after each test. */
export const tempDirs = (): () => string => {
  const dirs: Array<string> = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = tempDir()
    dirs.push(dir)
    return dir
  }
}

export { query, withDuckDB } from "../support/duckdb.ts"

/** The values DuckDB or Arrow should read back for a row, with `data` as its sha1 and tile columns from its id. */
export const expectedRecord = (row: TestRow, heretile: boolean): Record<string, unknown> => ({
  partition: row.partition,
  partition_version: BigInt(row.partitionVersion),
  data_handle: row.dataHandle,
  data_size: row.dataSize === null ? null : BigInt(row.dataSize),
  checksum: row.checksum,
  data_sha1: row.data === null ? null : sha1(row.data),
  ...(heretile ? expectedTiles(row.partition) : {})
})

const expectedTiles = (partition: string) => {
  const id = HereTile.parseTileId(partition)
  if (id === undefined) {
    return {
      tile_level: null,
      tile_x: null,
      tile_y: null,
      tile_west: null,
      tile_south: null,
      tile_east: null,
      tile_north: null
    }
  }
  const { level, column, row } = HereTile.toAddress(id)
  const box = HereTile.boundingBox(id)
  return {
    tile_level: level,
    tile_x: column,
    tile_y: row,
    tile_west: box.west,
    tile_south: box.south,
    tile_east: box.east,
    tile_north: box.north
  }
}

export const listDir = (dir: string): Array<string> => fs.readdirSync(dir).sort()
