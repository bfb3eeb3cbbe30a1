import type { Column, ColumnType, ScalarKind } from "../Columns.ts"
import type { FieldIds } from "../ParquetFieldIds.ts"
import type { IcebergSchema, IcebergType, NestedField } from "./TableMetadata.ts"

/**
 * The table's columns as an Iceberg schema ("Schemas and Data Types"): the columns an export writes
 * (raw, or decoded with --decode: sinks/Columns.ts) with a field id each. Ids are stable: a column
 * the table already has keeps its id, a new column gets the next unused one (a schema update, which
 * Iceberg allows: new columns are optional, a required column may become optional, an int may grow
 * to a long and a float to a double). Anything else (a column whose type changed, a required column
 * missing from the export) is refused with the differences named.
 */

/** The Iceberg type of a decoded scalar. Iceberg has no unsigned integers: both become long. */
const primitiveOf = (kind: ScalarKind): string => {
  switch (kind) {
    case "boolean":
      return "boolean"
    case "int32":
      return "int"
    case "uint32":
    case "int64":
    case "uint64":
      return "long"
    case "float":
      return "float"
    case "double":
      return "double"
    case "string":
    case "json":
      return "string"
    case "binary":
    case "wkb":
      return "binary"
  }
}

/** Types a table column may have while files of the export's type are written into it (the v2 promotions, both ways). */
const compatible = (table: string, file: string) =>
  table === file || (table === "long" && file === "int") || (table === "double" && file === "float")

/** What a schema update makes of the table's schema for an export's columns. */
export interface Evolved {
  /** The table's schema after the update (the current one when nothing changed). */
  readonly schema: IcebergSchema
  readonly lastColumnId: number
  /** A new schema (new columns, a promoted type, a column made optional). */
  readonly changed: boolean
  /** The export's columns with the table's ids: a data file's own schema (its `iceberg.schema`). */
  readonly fileSchema: { readonly type: "struct"; readonly fields: ReadonlyArray<NestedField> }
  /** The Parquet field id of each column path, for the file writers. */
  readonly fieldIds: FieldIds
}

/** Differences that no schema update can bridge, one sentence each. */
export type Incompatible = ReadonlyArray<string>

class Evolution {
  readonly problems: Array<string> = []
  changed = false

  constructor(private lastId: number) {}

  get lastColumnId() {
    return this.lastId
  }

  private nextId() {
    return ++this.lastId
  }

  /** `columns` merged into `existing` (undefined: a new table). Returns the table's fields and the file's. */
  struct(
    existing: ReadonlyArray<NestedField> | undefined,
    columns: ReadonlyArray<Column>,
    path: string
  ): { table: Array<NestedField>; file: Array<NestedField> } {
    const table: Array<NestedField> = []
    const file: Array<NestedField> = []
    const byName = new Map(columns.map((c) => [c.name, c]))
    const known = new Set<string>()
    for (const field of existing ?? []) {
      known.add(field.name)
      const column = byName.get(field.name)
      const where = `${path}${field.name}`
      if (column === undefined) {
        if (field.required) {
          this.problems.push(`column ${where} is required in the table and this export has no such column`)
        }
        table.push(field)
        continue
      }
      const type = this.type(field.type, column.type, where)
      const required = field.required && !column.nullable
      if (required !== field.required) this.changed = true
      table.push({ ...field, type: type.table, required })
      file.push({ id: field.id, name: field.name, required: !column.nullable, type: type.file })
    }
    // Ids for the new columns first, then for what they hold (as Iceberg assigns fresh ids).
    const added = columns.filter((c) => !known.has(c.name)).map((column) => ({ column, id: this.nextId() }))
    for (const { column, id } of added) {
      const type = this.type(undefined, column.type, `${path}${column.name}`)
      // Columns added to an existing table are optional (v2 has no defaults for older rows).
      table.push({ id, name: column.name, required: existing === undefined && !column.nullable, type: type.table })
      file.push({ id, name: column.name, required: !column.nullable, type: type.file })
      if (existing !== undefined) this.changed = true
    }
    return { table, file }
  }

  type(existing: IcebergType | undefined, type: ColumnType, where: string): { table: IcebergType; file: IcebergType } {
    switch (type.kind) {
      case "struct": {
        if (existing !== undefined && (typeof existing === "string" || existing.type !== "struct")) {
          return this.mismatch(existing, "a struct", where)
        }
        const fields = this.struct(existing?.fields, type.fields, `${where}.`)
        return { table: { type: "struct", fields: fields.table }, file: { type: "struct", fields: fields.file } }
      }
      case "list": {
        if (existing !== undefined && (typeof existing === "string" || existing.type !== "list")) {
          return this.mismatch(existing, "a list", where)
        }
        const id = existing?.["element-id"] ?? this.nextId()
        const element = this.type(existing?.element, type.element, `${where}.element`)
        // Decoded list elements are never null (Columns.ts writes them required).
        const list = (element: IcebergType, required: boolean): IcebergType => ({
          type: "list",
          "element-id": id,
          element,
          "element-required": required
        })
        return { table: list(element.table, existing?.["element-required"] ?? true), file: list(element.file, true) }
      }
      default: {
        const file = primitiveOf(type.kind)
        if (existing === undefined) return { table: file, file }
        if (typeof existing !== "string") return this.mismatch(existing, file, where)
        if (compatible(existing, file)) return { table: existing, file }
        if (compatible(file, existing)) {
          this.changed = true
          return { table: file, file }
        }
        return this.mismatch(existing, file, where)
      }
    }
  }

  private mismatch(existing: IcebergType, wanted: string, where: string) {
    const name = typeof existing === "string" ? existing : `a ${existing.type}`
    this.problems.push(`column ${where} is ${name} in the table and ${wanted} in this export`)
    return { table: existing, file: existing }
  }
}

/**
 * The table schema for `columns`: a new table's first schema (`current` undefined, id 0), or the
 * table's current schema updated for them; the differences when Iceberg cannot evolve to them.
 */
export const evolve = (
  columns: ReadonlyArray<Column>,
  current?: { readonly schema: IcebergSchema; readonly lastColumnId: number }
): { readonly _tag: "Evolved"; readonly evolved: Evolved } | {
  readonly _tag: "Incompatible"
  readonly problems: Incompatible
} => {
  const evolution = new Evolution(current?.lastColumnId ?? 0)
  const { file, table } = evolution.struct(current?.schema.fields, columns, "")
  if (evolution.problems.length > 0) return { _tag: "Incompatible", problems: evolution.problems }
  const schemaId = current === undefined ? 0 : current.schema["schema-id"] + (evolution.changed ? 1 : 0)
  const schema: IcebergSchema = current !== undefined && !evolution.changed
    ? current.schema
    : { type: "struct", "schema-id": schemaId, fields: table }
  const fileSchema = { type: "struct" as const, fields: file }
  return {
    _tag: "Evolved",
    evolved: {
      schema,
      lastColumnId: evolution.lastColumnId,
      changed: evolution.changed,
      fileSchema,
      fieldIds: fieldIdsOf(file)
    }
  }
}

/** The Parquet column paths of `fields` (3-level lists: `name.list.element`) with their ids. */
export const fieldIdsOf = (fields: ReadonlyArray<NestedField>): FieldIds => {
  const ids: Record<string, number> = {}
  const visit = (type: IcebergType, path: string) => {
    if (typeof type === "string") return
    switch (type.type) {
      case "struct":
        for (const f of type.fields) {
          ids[`${path}.${f.name}`] = f.id
          visit(f.type, `${path}.${f.name}`)
        }
        return
      case "list":
        ids[`${path}.list.element`] = type["element-id"]
        visit(type.element, `${path}.list.element`)
        return
      case "map":
        ids[`${path}.key_value.key`] = type["key-id"]
        ids[`${path}.key_value.value`] = type["value-id"]
        visit(type.key, `${path}.key_value.key`)
        visit(type.value, `${path}.key_value.value`)
    }
  }
  for (const f of fields) {
    ids[f.name] = f.id
    visit(f.type, f.name)
  }
  return ids
}

/** The field `id` of `schema` and its type, looked up through nested types. */
export const fieldById = (fields: ReadonlyArray<NestedField>, id: number): NestedField | undefined => {
  for (const f of fields) {
    if (f.id === id) return f
    const nested = typeof f.type === "string" ? undefined : f.type.type === "struct" ? f.type.fields : undefined
    const found = nested === undefined ? undefined : fieldById(nested, id)
    if (found !== undefined) return found
  }
  return undefined
}
