import { type Table, tableFromIPC } from "apache-arrow"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { columnNames } from "../../src/sinks/Row.ts"
import { ABOVE_2_53, expectedRecord, INT64_MAX, makeRows, metadata, sha1, tempDirs, writeAll } from "./support.ts"

const newDir = tempDirs()

const readTable = (file: string): Table => tableFromIPC(fs.readFileSync(file))

/** The table's rows in the shape of `expectedRecord`. */
const records = (table: Table): Array<Record<string, unknown>> =>
  table.toArray().map((row) => {
    const { data, ...rest } = row.toJSON() as Record<string, unknown>
    return { ...rest, data_sha1: data === null ? null : sha1(data as Uint8Array) }
  })

describe("Arrow IPC files read back by apache-arrow", () => {
  it("hold every row exactly: int64 above 2^53, null and empty blobs, heretile columns", async () => {
    const dir = newDir()
    const rows = makeRows(500, { heretile: true })
    const files = await writeAll({ dir, format: "arrow", heretile: true, metadata }, rows, 41)
    expect(files).toMatchObject([{ path: "part-0-00000.arrow", format: "arrow", rows: 500 }])
    const table = readTable(path.join(dir, files[0]!.path))

    expect(table.numRows).toBe(rows.length)
    const expected = rows.map((row) => expectedRecord(row, true))
    expect(records(table)).toEqual(expected)
    const versions = table.getChild("partition_version")!.toArray() as BigInt64Array
    expect(versions).toContain(ABOVE_2_53)
    expect(versions).toContain(INT64_MAX)
    expect(table.getChild("data")!.nullCount).toBe(rows.filter((r) => r.data === null).length)
  })

  it("have the DESIGN.md columns with their types and nullability, and the key-value metadata", async () => {
    for (const heretile of [false, true]) {
      const dir = newDir()
      const files = await writeAll({ dir, format: "arrow", heretile, metadata }, makeRows(5, { heretile }))
      const { schema } = readTable(path.join(dir, files[0]!.path))
      expect(schema.fields.map((f) => f.name)).toEqual(columnNames(heretile))
      const types = Object.fromEntries(schema.fields.map((f) => [f.name, `${f.type}${f.nullable ? "?" : ""}`]))
      expect(types).toMatchObject({
        partition: "Utf8",
        partition_version: "Int64",
        data_handle: "Utf8",
        data_size: "Int64?",
        checksum: "Utf8?",
        data: "Binary?"
      })
      if (heretile) {
        expect(types).toMatchObject({
          tile_level: "Int32?",
          tile_x: "Int32?",
          tile_y: "Int32?",
          tile_west: "Float64?",
          tile_south: "Float64?",
          tile_east: "Float64?",
          tile_north: "Float64?"
        })
      }
      expect(Object.fromEntries(schema.metadata)).toEqual(metadata)
    }
  })

  it("flush a record batch whenever the buffered rows reach rowGroupBytes", async () => {
    const dir = newDir()
    const rows = makeRows(300, { dataBytes: 1024 })
    const files = await writeAll({ dir, format: "arrow", metadata, rowGroupBytes: 16 * 1024 }, rows)
    const table = readTable(path.join(dir, files[0]!.path))
    expect(table.batches.length).toBeGreaterThan(15)
    for (const batch of table.batches.slice(0, -1)) {
      expect(batch.getChild("data")!.data.reduce((sum, d) => sum + d.values.byteLength, 0)).toBeLessThan(
        16 * 1024 + 1024
      )
    }
    expect(records(table)).toEqual(rows.map((row) => expectedRecord(row, false)))
  })

  it("of an export without rows still have the columns, and zero rows", async () => {
    const dir = newDir()
    const files = await writeAll({ dir, format: "arrow", heretile: true, metadata }, [])
    expect(files).toMatchObject([{ path: "part-0-00000.arrow", rows: 0 }])
    const table = readTable(path.join(dir, files[0]!.path))
    expect(table.numRows).toBe(0)
    expect(table.schema.fields.map((f) => f.name)).toEqual(columnNames(true))
  })
})
