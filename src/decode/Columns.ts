import type { ColumnSource, SchemaElement } from "hyparquet-writer"
import type { Column, ColumnType, ScalarKind } from "../sinks/Columns.ts"

/**
 * The Parquet rendering of the column model (sinks/Columns.ts): nested groups and 3-level lists,
 * written by hyparquet-writer's Dremel encoder; ArrowColumns.ts renders it for Arrow, loaded only for
 * Arrow files. Batches are columnar at the top level: one JS array per column, whose values are plain
 * JS (structs as objects keyed by field name, lists as arrays, int64 as bigint, bytes as Uint8Array,
 * JSON and strings as strings, null for absent).
 */

/** A batch of output rows: `columns[i]` holds the values of `schema[i]` for every row. */
export interface ColumnBatch {
  readonly rows: number
  readonly columns: ReadonlyArray<ReadonlyArray<unknown>>
}

// --- Parquet -------------------------------------------------------------------------------------

const parquetLeaf = (name: string, kind: ScalarKind, repetition: "REQUIRED" | "OPTIONAL"): SchemaElement => {
  const base = { name, repetition_type: repetition } as const
  switch (kind) {
    case "boolean":
      return { ...base, type: "BOOLEAN" }
    case "int32":
      return { ...base, type: "INT32" }
    case "uint32":
      return { ...base, type: "INT32", converted_type: "UINT_32" }
    case "int64":
      return { ...base, type: "INT64" }
    case "uint64":
      return { ...base, type: "INT64", converted_type: "UINT_64" }
    case "float":
      return { ...base, type: "FLOAT" }
    case "double":
      return { ...base, type: "DOUBLE" }
    case "string":
      return { ...base, type: "BYTE_ARRAY", converted_type: "UTF8" }
    // The logical type alone while writing (with the JSON converted type hyparquet-writer would serialize
    // the text again); footerSchema adds the converted type, which DuckDB needs to read the column as JSON.
    case "json":
      return { ...base, type: "BYTE_ARRAY", logical_type: { type: "JSON" } }
    case "binary":
    case "wkb":
      return { ...base, type: "BYTE_ARRAY" }
  }
}

const parquetElements = (name: string, type: ColumnType, nullable: boolean): Array<SchemaElement> => {
  const repetition = nullable ? "OPTIONAL" : "REQUIRED"
  switch (type.kind) {
    case "struct":
      return [
        { name, repetition_type: repetition, num_children: type.fields.length },
        ...type.fields.flatMap((f) => parquetElements(f.name, f.type, f.nullable))
      ]
    case "list":
      return [
        { name, repetition_type: repetition, converted_type: "LIST", logical_type: { type: "LIST" }, num_children: 1 },
        { name: "list", repetition_type: "REPEATED", num_children: 1 },
        ...parquetElements("element", type.element, false)
      ]
    default:
      return [parquetLeaf(name, type.kind, repetition)]
  }
}

/*
 * Unsigned integers carry the UINT_32 / UINT_64 converted type only: hyparquet-writer 0.17 writes the
 * INTEGER logical type's bit width as an i32 where the format has an i8, and readers reject the footer.
 */

/** The flat (pre-order) Parquet schema of the columns, root included, as the writer needs it. */
export const parquetSchema = (columns: ReadonlyArray<Column>): Array<SchemaElement> => [
  { name: "root", num_children: columns.length },
  ...columns.flatMap((c) => parquetElements(c.name, c.type, c.nullable))
]

/**
 * Completes a schema from `parquetSchema` for the footer: JSON leaves get the JSON converted type.
 * Call it (it changes the elements in place) after the last row group and before `ParquetWriter.finish`.
 */
export const footerSchema = (schema: Array<SchemaElement>): void => {
  for (const element of schema) if (element.logical_type?.type === "JSON") element.converted_type = "JSON"
}

const textEncoder = new TextEncoder()

/** JSON text goes in as bytes (see parquetLeaf); min/max of blobs, documents and geometries prune nothing. */
export const parquetColumnData = (columns: ReadonlyArray<Column>, batch: ColumnBatch): Array<ColumnSource> =>
  columns.map((column, i) => {
    const values = batch.columns[i]!
    switch (column.type.kind) {
      case "json":
        return {
          name: column.name,
          data: values.map((v) => (typeof v === "string" ? textEncoder.encode(v) : v)),
          statistics: false
        }
      case "binary":
      case "wkb":
        return { name: column.name, data: values as Array<unknown>, encoding: "PLAIN", statistics: false }
      default:
        return { name: column.name, data: values as Array<unknown> }
    }
  })
