import type { ParquetWriter, SchemaElement } from "hyparquet-writer"
import type { ColumnStats } from "./WrittenFile.ts"

/**
 * The per-column statistics of a finished Parquet file, as table formats record them per data file
 * (Iceberg's value counts, null counts, lower and upper bounds): added up from the row groups'
 * column statistics that hyparquet-writer kept while writing, so it costs nothing per row. Only
 * columns with a field id and outside lists (whose values are not one per row); bounds where the
 * writer kept statistics. Plain code: runs on the encoder thread.
 */

type Bound = string | number | boolean

/** A statistic value as JSON keeps it: int64 as a decimal string; none for values a bound cannot be (bytes, NaN, infinities). */
const boundOf = (value: unknown): Bound | undefined => {
  switch (typeof value) {
    case "bigint":
      return value.toString()
    case "number":
      return Number.isFinite(value) ? value : undefined
    case "string":
    case "boolean":
      return value
    default:
      return undefined
  }
}

/** Unicode code point order, which is UTF-8 byte order (JavaScript's `<` compares UTF-16 code units). */
export const compareUtf8 = (a: string, b: string): number => {
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(j)!
    if (x !== y) return x - y
    i += x > 0xffff ? 2 : 1
    j += y > 0xffff ? 2 : 1
  }
  return (i < a.length ? 1 : 0) - (j < b.length ? 1 : 0)
}

const compare = (a: Bound, b: Bound, int64: boolean): number => {
  if (int64) {
    const d = BigInt(a) - BigInt(b)
    return d < 0n ? -1 : d > 0n ? 1 : 0
  }
  if (typeof a === "string" && typeof b === "string") return compareUtf8(a, b)
  return a < b ? -1 : a > b ? 1 : 0
}

interface Leaf {
  readonly fieldId: number | undefined
  readonly repeated: boolean
  readonly int64: boolean
}

const leavesOf = (schema: ReadonlyArray<SchemaElement>): Array<Leaf> => {
  const leaves: Array<Leaf> = []
  let next = 1
  const visit = (repeated: boolean) => {
    const element = schema[next++]!
    const inList = repeated || element.repetition_type === "REPEATED"
    const children = element.num_children ?? 0
    if (children === 0) leaves.push({ fieldId: element.field_id, repeated: inList, int64: element.type === "INT64" })
    for (let i = 0; i < children; i++) visit(inList)
  }
  while (next < schema.length) visit(false)
  return leaves
}

/** The statistics of the columns of a finished file, from its writer. */
export const columnStats = (writer: ParquetWriter): Array<ColumnStats> => {
  const leaves = leavesOf(writer.schema)
  const out: Array<ColumnStats> = []
  leaves.forEach((leaf, index) => {
    if (leaf.fieldId === undefined || leaf.repeated) return
    let values = 0
    let nulls: number | undefined = 0
    let nans: number | undefined = 0
    let min: Bound | undefined
    let max: Bound | undefined
    let bounded = true
    for (const group of writer.row_groups) {
      const meta = group.columns[index]?.meta_data
      if (meta === undefined) continue
      values += Number(meta.num_values)
      const stats = meta.statistics as
        | { min_value?: unknown; max_value?: unknown; null_count?: bigint; nan_count?: bigint }
        | undefined
      nulls = stats?.null_count === undefined || nulls === undefined ? undefined : nulls + Number(stats.null_count)
      nans = stats?.nan_count === undefined || nans === undefined ? undefined : nans + Number(stats.nan_count)
      if (stats === undefined) {
        bounded = false
        continue
      }
      const [low, high] = [boundOf(stats.min_value), boundOf(stats.max_value)]
      // A group with values but no bounds (all null, NaN or bytes) leaves bounds only if all were null.
      if (low === undefined || high === undefined) {
        if (Number(stats.null_count ?? -1n) !== Number(meta.num_values)) bounded = false
        continue
      }
      if (min === undefined || compare(low, min, leaf.int64) < 0) min = low
      if (max === undefined || compare(high, max, leaf.int64) > 0) max = high
    }
    out.push({
      fieldId: leaf.fieldId,
      values,
      ...(nulls === undefined || writer.row_groups.length === 0 ? {} : { nulls }),
      ...(nans === undefined || writer.row_groups.length === 0 ? {} : { nans }),
      ...(bounded && min !== undefined && max !== undefined ? { min, max } : {})
    })
  })
  return out
}
