import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { parquetCompressions } from "../../src/sinks/ParquetCodecs.ts"
import { columnNames } from "../../src/sinks/Row.ts"
import { batchOf, rowBytes } from "../../src/sinks/RowBatch.ts"
import {
  ABOVE_2_53,
  expectedRecord,
  INT64_MAX,
  makeRows,
  metadata,
  query,
  tempDirs,
  type TestRow,
  withDuckDB,
  writeAll
} from "./support.ts"

const newDir = tempDirs()

/** Rows per group when a group is cut as soon as its rows reach `groupBytes`. */
const expectedGroupSizes = (rows: ReadonlyArray<TestRow>, groupBytes: number): Array<number> => {
  const sizes: Array<number> = []
  const batch = batchOf(rows)
  let count = 0
  let bytes = 0
  for (let i = 0; i < batch.length; i++) {
    count++
    bytes += rowBytes(batch, i)
    if (bytes >= groupBytes) {
      sizes.push(count)
      count = 0
      bytes = 0
    }
  }
  if (count > 0) sizes.push(count)
  return sizes
}

const selectRows = (files: ReadonlyArray<string>, heretile: boolean) => {
  const list = files.map((f) => `'${f}'`).join(", ")
  const tile = heretile ? ", tile_level, tile_x, tile_y, tile_west, tile_south, tile_east, tile_north" : ""
  return `select partition, partition_version, data_handle, data_size, checksum, sha1(data) as data_sha1${tile}
          from read_parquet([${list}], filename = true, file_row_number = true)
          order by filename, file_row_number`
}

describe("Parquet files read back by DuckDB", () => {
  it("hold every row exactly: int64 above 2^53, null and empty blobs, heretile columns", async () => {
    const dir = newDir()
    const rows = makeRows(500, { heretile: true })
    const files = await writeAll({ dir, format: "parquet", heretile: true, metadata }, rows, 37)
    expect(files).toHaveLength(1)
    const file = path.join(dir, files[0]!.path)

    await withDuckDB(async (db) => {
      const read = await query(db, selectRows([file], true))
      expect(read).toHaveLength(rows.length)
      expect(read).toEqual(rows.map((row) => expectedRecord(row, true)))

      const exact = await query(
        db,
        `select count(*) as n from read_parquet('${file}') where partition_version = ${ABOVE_2_53} or partition_version = ${INT64_MAX}`
      )
      expect(exact[0]!.n).toBe(2n)
      const nulls = await query(db, `select count(*) as n from read_parquet('${file}') where data is null`)
      expect(Number(nulls[0]!.n)).toBe(rows.filter((r) => r.data === null).length)
      const empty = await query(db, `select count(*) as n from read_parquet('${file}') where octet_length(data) = 0`)
      expect(Number(empty[0]!.n)).toBe(rows.filter((r) => r.data?.byteLength === 0).length)
    })
  })

  it("carry the export's key-value metadata", async () => {
    const dir = newDir()
    const files = await writeAll({ dir, format: "parquet", metadata }, makeRows(10))
    await withDuckDB(async (db) => {
      const kv = await query(db, `select key, value from parquet_kv_metadata('${path.join(dir, files[0]!.path)}')`)
      const decoded = Object.fromEntries(
        kv.map((
          { key, value }
        ) => [Buffer.from(key as Uint8Array).toString(), Buffer.from(value as Uint8Array).toString()])
      )
      expect(decoded).toEqual(metadata)
    })
  })

  it("have exactly the DESIGN.md columns, tile columns only for heretile layers", async () => {
    for (const heretile of [false, true]) {
      const dir = newDir()
      const files = await writeAll({ dir, format: "parquet", heretile, metadata }, makeRows(5, { heretile }))
      await withDuckDB(async (db) => {
        const schema = await query(
          db,
          `select name, type, repetition_type, converted_type from parquet_schema('${
            path.join(dir, files[0]!.path)
          }') where name <> 'root'`
        )
        expect(schema.map((c) => c.name)).toEqual(columnNames(heretile))
        const byName = Object.fromEntries(
          schema.map((c) => [c.name, `${c.type}/${c.repetition_type}/${c.converted_type ?? ""}`])
        )
        expect(byName).toMatchObject({
          partition: "BYTE_ARRAY/REQUIRED/UTF8",
          partition_version: "INT64/REQUIRED/",
          data_handle: "BYTE_ARRAY/REQUIRED/UTF8",
          data_size: "INT64/OPTIONAL/",
          checksum: "BYTE_ARRAY/OPTIONAL/UTF8",
          data: "BYTE_ARRAY/OPTIONAL/"
        })
        if (heretile) {
          expect(byName).toMatchObject({
            tile_level: "INT32/OPTIONAL/",
            tile_x: "INT32/OPTIONAL/",
            tile_y: "INT32/OPTIONAL/",
            tile_west: "DOUBLE/OPTIONAL/",
            tile_south: "DOUBLE/OPTIONAL/",
            tile_east: "DOUBLE/OPTIONAL/",
            tile_north: "DOUBLE/OPTIONAL/"
          })
        }
      })
    }
  })

  it("keep no statistics on data (the footer stays small) but keep them on partition and partition_version", async () => {
    const dir = newDir()
    const rows = makeRows(200, { dataBytes: 4096 })
    const files = await writeAll({ dir, format: "parquet", metadata }, rows)
    await withDuckDB(async (db) => {
      const stats = await query(
        db,
        `select path_in_schema as col, stats_min_value as min, stats_max_value as max
         from parquet_metadata('${path.join(dir, files[0]!.path)}')`
      )
      const byColumn = Object.fromEntries(stats.map((s) => [s.col, s]))
      expect(byColumn.data).toMatchObject({ min: null, max: null })
      expect(byColumn.partition!.min).not.toBeNull()
      expect(byColumn.partition_version!.max).toBe(
        String(rows.reduce((max, r) => (BigInt(r.partitionVersion) > max ? BigInt(r.partitionVersion) : max), 0n))
      )
      const file = fs.readFileSync(path.join(dir, files[0]!.path))
      const footerBytes = file.readUInt32LE(file.byteLength - 8)
      expect(footerBytes).toBeLessThan(4096)
    })
  })

  it("flush a row group whenever the buffered rows reach rowGroupBytes", async () => {
    const dir = newDir()
    const rows = makeRows(300, { dataBytes: 1024 })
    const files = await writeAll({ dir, format: "parquet", metadata, rowGroupBytes: 16 * 1024 }, rows)
    await withDuckDB(async (db) => {
      const groups = await query(
        db,
        `select row_group_id, any_value(row_group_num_rows) as n from parquet_metadata('${
          path.join(dir, files[0]!.path)
        }') group by row_group_id order by row_group_id`
      )
      expect(groups.length).toBeGreaterThan(15)
      expect(groups.map((g) => Number(g.n))).toEqual(expectedGroupSizes(rows, 16 * 1024))
    })
  })

  it.each([...parquetCompressions, undefined])(
    "are readable with compression %s (default zstd)",
    async (compression) => {
      const dir = newDir()
      const rows = makeRows(150)
      const files = await writeAll(
        { dir, format: "parquet", metadata, ...(compression === undefined ? {} : { compression }) },
        rows
      )
      const file = path.join(dir, files[0]!.path)
      await withDuckDB(async (db) => {
        expect(await query(db, selectRows([file], false))).toEqual(rows.map((row) => expectedRecord(row, false)))
        const codecs = await query(db, `select distinct compression from parquet_metadata('${file}')`)
        const expected = { none: "UNCOMPRESSED", snappy: "SNAPPY", zstd: "ZSTD", gzip: "GZIP" }[compression ?? "zstd"]
        expect(codecs).toEqual([{ compression: expected }])
      })
    }
  )

  it("of an export without rows still have the columns, and zero rows", async () => {
    const dir = newDir()
    const files = await writeAll({ dir, format: "parquet", heretile: true, metadata }, [])
    expect(files).toMatchObject([{ path: "part-0-00000.parquet", rows: 0 }])
    await withDuckDB(async (db) => {
      const file = path.join(dir, files[0]!.path)
      expect(await query(db, `select count(*) as n from read_parquet('${file}')`)).toEqual([{ n: 0n }])
      const columns = await query(db, `select column_name from (describe select * from read_parquet('${file}'))`)
      expect(columns.map((c) => c.column_name)).toEqual(columnNames(true))
    })
  })
})
