import type { ColumnStats } from "../WrittenFile.ts"
import { serialize, truncateLower, truncateUpper } from "./SingleValue.ts"
import type { NestedField } from "./TableMetadata.ts"
import { fieldById } from "./TableSchema.ts"

/**
 * A data file's field-level metrics as a manifest records them ("Field-level Metrics and
 * Statistics"): value, null and NaN counts and lower and upper bounds, each a map from field id (an
 * Avro array of key/value records). From the column statistics the writer returned for the file.
 */

export interface KeyValue<V> {
  readonly key: number
  readonly value: V
}

export interface Metrics {
  readonly value_counts: ReadonlyArray<KeyValue<number>> | null
  readonly null_value_counts: ReadonlyArray<KeyValue<number>> | null
  readonly nan_value_counts: ReadonlyArray<KeyValue<number>> | null
  readonly lower_bounds: ReadonlyArray<KeyValue<Uint8Array>> | null
  readonly upper_bounds: ReadonlyArray<KeyValue<Uint8Array>> | null
}

export const noMetrics: Metrics = {
  value_counts: null,
  null_value_counts: null,
  nan_value_counts: null,
  lower_bounds: null,
  upper_bounds: null
}

const orNull = <V>(entries: Array<KeyValue<V>>) => (entries.length === 0 ? null : entries)

/** Bounds of a column of primitive `type`; strings truncated, and none for values that cannot be one. */
const boundsOf = (
  type: string,
  min: string | number | boolean,
  max: string | number | boolean
): { lower?: Uint8Array; upper?: Uint8Array } => {
  if (type === "string") {
    if (typeof min !== "string" || typeof max !== "string") return {}
    const upper = truncateUpper(max)
    return {
      lower: serialize(type, truncateLower(min))!,
      ...(upper === undefined ? {} : { upper: serialize(type, upper)! })
    }
  }
  const lower = serialize(type, min)
  const upper = serialize(type, max)
  return lower === undefined || upper === undefined ? {} : { lower, upper }
}

/** The metrics of a file whose columns (of the table schema `fields`) have the statistics `stats`. */
export const metricsOf = (stats: ReadonlyArray<ColumnStats>, fields: ReadonlyArray<NestedField>): Metrics => {
  const values: Array<KeyValue<number>> = []
  const nulls: Array<KeyValue<number>> = []
  const nans: Array<KeyValue<number>> = []
  const lower: Array<KeyValue<Uint8Array>> = []
  const upper: Array<KeyValue<Uint8Array>> = []
  for (const column of stats) {
    const key = column.fieldId
    values.push({ key, value: column.values })
    if (column.nulls !== undefined) nulls.push({ key, value: column.nulls })
    if (column.nans !== undefined) nans.push({ key, value: column.nans })
    const type = fieldById(fields, key)?.type
    if (column.min === undefined || column.max === undefined || typeof type !== "string") continue
    const bounds = boundsOf(type, column.min, column.max)
    if (bounds.lower !== undefined) lower.push({ key, value: bounds.lower })
    if (bounds.upper !== undefined) upper.push({ key, value: bounds.upper })
  }
  return {
    value_counts: orNull(values),
    null_value_counts: orNull(nulls),
    nan_value_counts: orNull(nans),
    lower_bounds: orNull(lower),
    upper_bounds: orNull(upper)
  }
}
