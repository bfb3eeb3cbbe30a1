import {
  Binary,
  Bool,
  type DataType,
  Field,
  Float32,
  Float64,
  Int32,
  Int64,
  List,
  makeBuilder,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Uint32,
  Uint64,
  Utf8
} from "apache-arrow"
import type { Column, ColumnType, ScalarKind } from "../sinks/Columns.ts"
import type { ColumnBatch } from "./Columns.ts"

/** The decoded columns (Columns.ts) as Arrow: structs and lists, built with apache-arrow's builders. */

/** Arrow extension names readers use for JSON text and WKB geometries. */
const extension = (kind: ScalarKind): Map<string, string> | undefined =>
  kind === "json"
    ? new Map([["ARROW:extension:name", "arrow.json"], ["ARROW:extension:metadata", ""]])
    : kind === "wkb"
    ? new Map([["ARROW:extension:name", "geoarrow.wkb"], ["ARROW:extension:metadata", "{}"]])
    : undefined

const arrowType = (type: ColumnType): DataType => {
  switch (type.kind) {
    case "boolean":
      return new Bool()
    case "int32":
      return new Int32()
    case "uint32":
      return new Uint32()
    case "int64":
      return new Int64()
    case "uint64":
      return new Uint64()
    case "float":
      return new Float32()
    case "double":
      return new Float64()
    case "string":
    case "json":
      return new Utf8()
    case "binary":
    case "wkb":
      return new Binary()
    case "struct":
      return new Struct(type.fields.map(arrowField))
    case "list":
      return new List(new Field("element", arrowType(type.element), false, extension(type.element.kind as ScalarKind)))
  }
}

const arrowField = (column: Column): Field =>
  new Field(column.name, arrowType(column.type), column.nullable, extension(column.type.kind as ScalarKind))

export const arrowSchema = (
  columns: ReadonlyArray<Column>,
  metadata: ReadonlyMap<string, string> = new Map()
): Schema => new Schema(columns.map(arrowField), new Map(metadata))

/** One record batch of the columns; nested values go through apache-arrow's builders. */
export const arrowRecordBatch = (schema: Schema, batch: ColumnBatch): RecordBatch => {
  const children = schema.fields.map((field, i) => {
    const builder = makeBuilder({ type: field.type, nullValues: [null, undefined] })
    for (const value of batch.columns[i]!) builder.append(value)
    return builder.finish().flush()
  })
  const struct = makeData({ type: new Struct(schema.fields), length: batch.rows, nullCount: 0, children })
  return new RecordBatch(schema, struct)
}
