/**
 * The per-column metrics a data file's manifest entry carries: written with field ids by the export's
 * own writer (several row groups, awkward values: non-ASCII and astral partition ids, int64 above
 * 2^53, nulls, heretile columns), the counts and the single-value-encoded bounds compared with what
 * DuckDB computes from the file itself.
 */
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { rawColumns } from "../../../src/sinks/Columns.ts"
import { metricsOf } from "../../../src/sinks/iceberg/Metrics.ts"
import { evolve } from "../../../src/sinks/iceberg/TableSchema.ts"
import { literal } from "../../support/duckdb.ts"
import { makeRows, metadata, query, tempDirs, withDuckDB, writeAll } from "../support.ts"

const newDir = tempDirs()

const decode = (type: string, bytes: Uint8Array): unknown => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  switch (type) {
    case "long":
      return view.getBigInt64(0, true)
    case "int":
      return view.getInt32(0, true)
    case "double":
      return view.getFloat64(0, true)
    case "string":
      return new TextDecoder().decode(bytes)
    default:
      return bytes
  }
}

describe("Iceberg data file metrics", () => {
  it("value and null counts and bounds match the file's columns; strings bounded by 16 characters", async () => {
    const evolved = evolve(rawColumns(true))
    if (evolved._tag !== "Evolved") throw new Error("expected a schema")
    const { fieldIds, schema } = evolved.evolved
    const dir = newDir()
    const rows = makeRows(700, { heretile: true }).map((r, i) =>
      i % 50 === 0 ? { ...r, partition: `${"\u{1F5FA}".repeat(3)}-long-partition-id-${i}` } : r
    )
    const files = await writeAll(
      { dir, format: "parquet", heretile: true, metadata, fieldIds, rowGroupBytes: 8 * 1024 },
      rows,
      41
    )
    expect(files).toHaveLength(1)
    const stats = files[0]!.columns!
    expect(stats.map((s) => s.fieldId)).toEqual(schema.fields.map((f) => f.id))
    const metrics = metricsOf(stats, schema.fields)
    const file = literal(path.join(dir, files[0]!.path))
    await withDuckDB(async (db) => {
      const groups = await query(db, `SELECT count(*) AS n FROM parquet_metadata(${file}) WHERE column_id = 0`)
      expect(Number(groups[0]!.n)).toBeGreaterThan(3)
      for (const field of schema.fields) {
        const [actual] = await query(
          db,
          `SELECT count(*) AS rows, count(${field.name}) AS present,
                  ${field.type === "binary" ? "NULL" : `min(${field.name})`} AS low,
                  ${field.type === "binary" ? "NULL" : `max(${field.name})`} AS high
           FROM read_parquet(${file})`
        )
        const get = (list: typeof metrics.value_counts) => list?.find((kv) => kv.key === field.id)?.value
        expect(get(metrics.value_counts), field.name).toBe(Number(actual!.rows))
        const lower = metrics.lower_bounds?.find((kv) => kv.key === field.id)?.value
        const upper = metrics.upper_bounds?.find((kv) => kv.key === field.id)?.value
        // The writer keeps no statistics for handles, checksums and blobs: counts only.
        if (["data_handle", "checksum", "data"].includes(field.name)) {
          expect([lower, upper], field.name).toEqual([undefined, undefined])
          continue
        }
        expect(get(metrics.null_value_counts), field.name).toBe(Number(actual!.rows) - Number(actual!.present))
        const [low, high] = [decode(field.type as string, lower!), decode(field.type as string, upper!)]
        if (field.type === "string") {
          const [min, max] = [actual!.low as string, actual!.high as string]
          expect(min.startsWith(low as string), `${field.name} lower ${low} of ${min}`).toBe(true)
          expect(Buffer.compare(Buffer.from(high as string), Buffer.from(max)), `${field.name} upper`)
            .toBeGreaterThanOrEqual(0)
          expect([...(low as string)].length).toBeLessThanOrEqual(16)
        } else {
          expect([low, high], field.name).toEqual([actual!.low, actual!.high])
        }
      }
    })
  })
})
