import * as Schema from "effect/Schema"

/**
 * The data files the sinks write, as manifests and checkpoints record them. The writers on the
 * encoder thread use these types only (`import type`): that thread loads no Effect.
 */

export const FileFormat = Schema.Literal("parquet", "arrow")
export type FileFormat = typeof FileFormat.Type

/** `--format`: `both` writes every row to a Parquet and to an Arrow file. */
export const OutputFormat = Schema.Literal(...FileFormat.literals, "both")
export type OutputFormat = typeof OutputFormat.Type

/** A finished data file as the manifest lists it; `path` is relative to the export's directory. */
export const WrittenFile = Schema.Struct({
  path: Schema.String,
  format: FileFormat,
  rows: Schema.Number,
  bytes: Schema.Number,
  sha256: Schema.String
})
export type WrittenFile = typeof WrittenFile.Type

/**
 * A column's statistics in one data file (files written with field ids: Iceberg tables), as the
 * table's manifests record them: value and null counts, and the least and greatest value (int64 as a
 * decimal string) where the writer kept them.
 */
export const ColumnStats = Schema.Struct({
  fieldId: Schema.Number,
  /** values in the column, nulls included */
  values: Schema.Number,
  nulls: Schema.optional(Schema.Number),
  nans: Schema.optional(Schema.Number),
  min: Schema.optional(Schema.Union(Schema.String, Schema.Number, Schema.Boolean)),
  max: Schema.optional(Schema.Union(Schema.String, Schema.Number, Schema.Boolean))
})
export type ColumnStats = typeof ColumnStats.Type

/**
 * A data file as a writer returns it and a checkpoint or shard manifest records it: on an object
 * store with its ETag, which commit checks; with its columns' statistics when written with field ids.
 */
export const RecordedFile = Schema.Struct({
  ...WrittenFile.fields,
  etag: Schema.optional(Schema.String),
  columns: Schema.optional(Schema.Array(ColumnStats))
})
export type RecordedFile = typeof RecordedFile.Type
