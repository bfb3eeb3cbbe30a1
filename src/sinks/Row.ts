/**
 * One exported partition, as written to Parquet and Arrow files (DESIGN.md "Columns").
 * The tile fields are written only by writers opened with `heretile: true`.
 */
export interface Row {
  readonly partition: string
  readonly partitionVersion: bigint | number
  readonly dataHandle: string
  readonly dataSize: bigint | number | null
  readonly checksum: string | null
  /** null for an empty data handle (deleted partition) */
  readonly data: Uint8Array | null
  readonly tileLevel?: number | null
  readonly tileX?: number | null
  readonly tileY?: number | null
  readonly tileWest?: number | null
  readonly tileSouth?: number | null
  readonly tileEast?: number | null
  readonly tileNorth?: number | null
}

export const baseColumns = ["partition", "partition_version", "data_handle", "data_size", "checksum", "data"] as const
export const tileIntColumns = ["tile_level", "tile_x", "tile_y"] as const
export const tileFloatColumns = ["tile_west", "tile_south", "tile_east", "tile_north"] as const

export const columnNames = (heretile: boolean): ReadonlyArray<string> =>
  heretile ? [...baseColumns, ...tileIntColumns, ...tileFloatColumns] : baseColumns

// Counts the JS object and the fixed-width columns too, so rows without data still fill a row group.
const ROW_OVERHEAD_BYTES = 96

/** Bytes a buffered row stands for; drives row-group flushing and file rolling. */
export const rowBytes = (row: Row): number =>
  ROW_OVERHEAD_BYTES +
  row.partition.length +
  row.dataHandle.length +
  (row.checksum?.length ?? 0) +
  (row.data?.byteLength ?? 0)

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

const isInt64 = (value: bigint | number): boolean =>
  typeof value === "bigint" ? value >= INT64_MIN && value <= INT64_MAX : Number.isSafeInteger(value)

const isInt32 = (value: number): boolean => (value | 0) === value

/**
 * Throws a RangeError naming the partition and column when a value cannot be written exactly
 * (a number beyond 2^53 may already have lost digits, so int64 numbers must be safe integers).
 */
export const checkRow = (row: Row): void => {
  const fail = (column: string, value: unknown) => {
    throw new RangeError(`partition ${JSON.stringify(row.partition)}: ${column} ${String(value)} is not ${column.startsWith("tile_") ? "an int32" : "an exact int64 (pass a bigint above 2^53)"}`)
  }
  if (!isInt64(row.partitionVersion)) fail("partition_version", row.partitionVersion)
  if (row.dataSize !== null && !isInt64(row.dataSize)) fail("data_size", row.dataSize)
  if (row.tileLevel != null && !isInt32(row.tileLevel)) fail("tile_level", row.tileLevel)
  if (row.tileX != null && !isInt32(row.tileX)) fail("tile_x", row.tileX)
  if (row.tileY != null && !isInt32(row.tileY)) fail("tile_y", row.tileY)
}

/** For checked rows only. */
export const toInt64 = (value: bigint | number): bigint => (typeof value === "bigint" ? value : BigInt(value))

export const toNullableInt64 = (value: bigint | number | null): bigint | null => (value === null ? null : toInt64(value))
