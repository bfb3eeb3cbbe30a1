import type { SchemaElement } from "hyparquet-writer"

/**
 * Field ids on a Parquet schema: table formats (Apache Iceberg) find a file's columns by the id in
 * each schema element, not by name. `ids` maps a column's path (the names of its schema elements
 * below the root, joined by "."; a list's element is `name.list.element`) to its id; elements not in
 * it get none. Plain code: the encoder thread calls it once per file.
 */

/** Field ids by column path. */
export type FieldIds = Readonly<Record<string, number>>

/** `schema` (flat, pre-order, root first, as hyparquet-writer takes it) with the field ids of `ids`. */
export const withFieldIds = (schema: ReadonlyArray<SchemaElement>, ids: FieldIds): Array<SchemaElement> => {
  const out: Array<SchemaElement> = [schema[0]!]
  let next = 1
  const visit = (prefix: string) => {
    const element = schema[next++]!
    const path = prefix === "" ? element.name : `${prefix}.${element.name}`
    const id = ids[path]
    out.push(id === undefined ? element : { ...element, field_id: id })
    for (let i = 0; i < (element.num_children ?? 0); i++) visit(path)
  }
  while (next < schema.length) visit("")
  return out
}
