/**
 * The columns of an export's files, as a model: the raw columns every export writes (DESIGN.md
 * "Columns"), and what decoding adds (decode/ renders the model for Parquet and Arrow; tables take
 * their schema from it). Plain code: the encoder thread loads it.
 */

export type ScalarKind =
  | "boolean"
  | "int32"
  | "uint32"
  | "int64"
  | "uint64"
  | "float"
  | "double"
  | "string"
  | "binary"
  | "json"
  | "wkb"

export type ColumnType =
  | { readonly kind: ScalarKind }
  | { readonly kind: "struct"; readonly fields: ReadonlyArray<Column> }
  | { readonly kind: "list"; readonly element: ColumnType }

export interface Column {
  readonly name: string
  readonly type: ColumnType
  readonly nullable: boolean
}

export const scalar = (kind: ScalarKind): ColumnType => ({ kind })

export const col = (name: string, kind: ScalarKind, nullable = true): Column => ({ name, type: scalar(kind), nullable })

/** The columns every export has, partition first (DESIGN.md "Columns"); the tile columns on heretile layers. */
export const partitionColumns = (heretile: boolean): Array<Column> => [
  col("partition", "string", false),
  col("partition_version", "int64", false),
  col("data_handle", "string", false),
  col("data_size", "int64"),
  col("checksum", "string"),
  ...(heretile
    ? [
      col("tile_level", "int32"),
      col("tile_x", "int32"),
      col("tile_y", "int32"),
      col("tile_west", "double"),
      col("tile_south", "double"),
      col("tile_east", "double"),
      col("tile_north", "double")
    ]
    : [])
]

/** The columns of an export that does not decode: the blob as `data` after the partition's columns. */
export const rawColumns = (heretile: boolean): Array<Column> => {
  const base = partitionColumns(heretile)
  return [...base.slice(0, 5), col("data", "binary"), ...base.slice(5)]
}
