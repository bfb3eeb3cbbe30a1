import * as HereTile from "../domain/HereTile.ts"
import type { RowBatch } from "./RowBatch.ts"

/** The columns of every export file (DESIGN.md "Columns"), as written to Parquet and Arrow alike. */
export const baseColumns = ["partition", "partition_version", "data_handle", "data_size", "checksum", "data"] as const
export const tileIntColumns = ["tile_level", "tile_x", "tile_y"] as const
export const tileFloatColumns = ["tile_west", "tile_south", "tile_east", "tile_north"] as const

export const columnNames = (heretile: boolean): ReadonlyArray<string> =>
  heretile ? [...baseColumns, ...tileIntColumns, ...tileFloatColumns] : baseColumns

/** Rows `from` (inclusive) to `to` (exclusive) of a batch: the unit the format writers buffer. */
export interface Slice {
  readonly batch: RowBatch
  readonly from: number
  readonly to: number
}

export const sliceLength = (slices: ReadonlyArray<Slice>): number => {
  let n = 0
  for (const s of slices) n += s.to - s.from
  return n
}

/** One column of the sliced rows, in order. */
export const gather = <A>(slices: ReadonlyArray<Slice>, value: (batch: RowBatch, i: number) => A): Array<A> => {
  const out = new Array<A>(sliceLength(slices))
  let k = 0
  for (const { batch, from, to } of slices) for (let i = from; i < to; i++) out[k++] = value(batch, i)
  return out
}

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

const isInt64 = (value: bigint | number): boolean =>
  typeof value === "bigint" ? value >= INT64_MIN && value <= INT64_MAX : Number.isSafeInteger(value)

/**
 * Throws a RangeError naming the partition and column when a value of the rows cannot be written
 * exactly (a number beyond 2^53 may already have lost digits, so int64 numbers must be safe integers).
 */
export const checkRows = (batch: RowBatch, from: number, to: number): void => {
  for (let i = from; i < to; i++) {
    const version = batch.partitionVersion[i]!
    const size = batch.dataSize[i]!
    if (typeof version !== "number" || !Number.isSafeInteger(version)) {
      if (!isInt64(version)) fail(batch.partition[i]!, "partition_version", version)
    }
    if (size !== null && !isInt64(size)) fail(batch.partition[i]!, "data_size", size)
  }
}

const fail = (partition: string, column: string, value: unknown): never => {
  throw new RangeError(
    `partition ${JSON.stringify(partition)}: ${column} ${
      String(value)
    } is not an exact int64 (pass a bigint above 2^53)`
  )
}

/** For checked rows only. */
export const toInt64 = (value: bigint | number): bigint => (typeof value === "bigint" ? value : BigInt(value))

export const toNullableInt64 = (
  value: bigint | number | null
): bigint | null => (value === null ? null : toInt64(value))

/** The tile_* columns of one partition id: level, column, row and bounding box, or nulls for an id that is not a HERE tile. */
export interface TileColumns {
  readonly level: Array<number | null>
  readonly x: Array<number | null>
  readonly y: Array<number | null>
  readonly west: Array<number | null>
  readonly south: Array<number | null>
  readonly east: Array<number | null>
  readonly north: Array<number | null>
}

export const tileColumns = (partitions: ReadonlyArray<string>): TileColumns => {
  const n = partitions.length
  const columns: TileColumns = {
    level: new Array(n),
    x: new Array(n),
    y: new Array(n),
    west: new Array(n),
    south: new Array(n),
    east: new Array(n),
    north: new Array(n)
  }
  for (let i = 0; i < n; i++) {
    const id = HereTile.parseTileId(partitions[i]!)
    if (id === undefined) {
      columns.level[i] =
        columns.x[i] =
        columns.y[i] =
        columns.west[i] =
        columns.south[i] =
        columns.east[i] =
        columns.north[i] =
          null
      continue
    }
    const { level, column, row } = HereTile.toAddress(id)
    const box = HereTile.boundingBox(id)
    columns.level[i] = level
    columns.x[i] = column
    columns.y[i] = row
    columns.west[i] = box.west
    columns.south[i] = box.south
    columns.east[i] = box.east
    columns.north[i] = box.north
  }
  return columns
}
