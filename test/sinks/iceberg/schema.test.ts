/**
 * The table's schema: decoded columns with field ids, a schema update when a later export has new
 * columns (every tag still read by icebird, older files' missing columns as nulls), a refused change
 * that Iceberg cannot evolve to (nothing written), and metadata fields other writers add kept.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { exitCodeOf } from "../../../src/cli/Exit.ts"
import { decoderOf, type DecodeSettings } from "../../../src/decode/Decoder.ts"
import { col } from "../../../src/sinks/Columns.ts"
import { destination } from "../../../src/sinks/Destination.ts"
import { readCurrent } from "../../../src/sinks/iceberg/Commit.ts"
import { tableAt } from "../../../src/sinks/iceberg/Location.ts"
import { commitVersion, loadTable, schemaFor } from "../../../src/sinks/iceberg/Table.ts"
import { literal, query, withDuckDB } from "../../support/duckdb.ts"
import { filesBelow } from "../../support/files.ts"
import {
  exportVersion,
  IDENTITY,
  initialLayer,
  raw,
  type Row,
  rowOf,
  run,
  tablesTest,
  writeDataFiles
} from "./support.ts"

const { read, tempDir } = tablesTest("iceberg-schema-")

const content = { layerId: IDENTITY.layerId, contentType: "application/json", heretile: false }
const jsonDecode = (onError: "skip" | "raw"): DecodeSettings => ({ content, options: { mode: "json", onError } })

/** A JSON layer's rows at `version`: every 5th blob is not JSON at version 1. */
const jsonRows = (count: number, version: number): Array<Row> =>
  Array.from({ length: count }, (_, i) => {
    const base = rowOf(`p${String(i).padStart(4, "0")}`, version)
    const broken = version === 1 && i % 5 === 0
    return { ...base, data: broken ? `not json ${i}` : JSON.stringify({ id: i, version, name: `ü-${i}` }) }
  })

/** What icebird reads for a JSON layer's row (the JSON column parsed; columns a file lacks undefined). */
const decodedRecord = (row: Row, raw: boolean) => {
  const document = (() => {
    try {
      return JSON.parse(row.data!)
    } catch {
      return undefined
    }
  })()
  return {
    partition: row.partition,
    partition_version: row.partitionVersion,
    data_handle: row.dataHandle,
    data_size: row.dataSize,
    checksum: row.checksum,
    document: document ?? null,
    ...(raw ? { data: document === undefined ? row.data : null } : {})
  }
}

describe("Iceberg table schemas", () => {
  it("a later export with new columns updates the schema; every tag still reads its rows", async () => {
    const dest = await run(destination(tempDir()))
    const table = tableAt(dest, "demo/json")
    const commitJson = (version: number, onError: "skip" | "raw", rows: Array<Row>) =>
      Effect.gen(function*() {
        const decode = jsonDecode(onError)
        const current = yield* loadTable(table, IDENTITY)
        const schema = yield* schemaFor(table, current, decoderOf(decode.content, decode.options).columns)
        const files = yield* writeDataFiles(table, schema, rows, `v${version}`, { decode })
        return {
          schema,
          result: yield* commitVersion(table, {
            identity: IDENTITY,
            version,
            mode: "full",
            schema,
            files,
            createdBy: "test"
          })
        }
      })
    const v0 = jsonRows(60, 0)
    const first = await run(commitJson(0, "skip", v0))
    expect(first.schema.schema["schema-id"]).toBe(0)
    expect(first.schema.schema.fields.map((f) => `${f.id}:${f.name}:${f.type}`)).toEqual([
      "1:partition:string",
      "2:partition_version:long",
      "3:data_handle:string",
      "4:data_size:long",
      "5:checksum:string",
      "6:document:string"
    ])
    // --on-decode-error raw adds the raw bytes and the reason: a schema update, new ids.
    const v1 = jsonRows(60, 1)
    const second = await run(commitJson(1, "raw", v1))
    expect(second.schema.changed).toBe(true)
    expect(second.schema.schema["schema-id"]).toBe(1)
    expect(second.schema.schema.fields.slice(6).map((f) => `${f.id}:${f.name}:${f.type}:${f.required}`)).toEqual([
      "7:data:binary:false",
      "8:decode_error:string:false"
    ])
    const metadata = (await run(readCurrent(table))).metadata!
    expect(metadata["current-schema-id"]).toBe(1)
    expect(metadata.schemas.map((s) => s["schema-id"])).toEqual([0, 1])
    expect(metadata["last-column-id"]).toBe(8)
    const byPartition = (a: { partition: string }, b: { partition: string }) => (a.partition < b.partition ? -1 : 1)
    const read0 = await read(table.uri, "v0")
    expect(read0).toEqual(v0.map((r) => decodedRecord(r, false)).sort(byPartition))
    const read1 = await read(table.uri, "v1")
    expect(read1.map(({ decode_error: _reason, ...rest }) => rest)).toEqual(
      v1.map((r) => decodedRecord(r, true)).sort(byPartition)
    )
    expect(read1.filter((r) => typeof r.decode_error === "string").length).toBe(12)
    // Field ids on every column of both versions' files, nested ones included.
    const ids = await withDuckDB((c) =>
      query(
        c,
        `SELECT DISTINCT name, field_id FROM parquet_schema(${
          literal(path.join(table.dest.at(table.key), "data", "*", "*.parquet"))
        }) WHERE name <> 'root' ORDER BY field_id`
      )
    )
    expect(ids.map((r) => `${r.field_id}:${r.name}`)).toEqual([
      "1:partition",
      "2:partition_version",
      "3:data_handle",
      "4:data_size",
      "5:checksum",
      "6:document",
      "7:data",
      "8:decode_error"
    ])
  })

  it("refuses columns Iceberg cannot evolve to, naming the differences, and writes nothing", async () => {
    const out = tempDir()
    const dest = await run(destination(out))
    const table = tableAt(dest, "demo/places")
    await run(exportVersion(table, { version: 0, rows: [...initialLayer(20).values()] }))
    const files = filesBelow(out)
    const current = await run(loadTable(table, IDENTITY))
    const changed = raw.map((c) => (c.name === "partition_version" ? col("partition_version", "string", false) : c))
    const error = await Effect.runPromise(Effect.flip(schemaFor(table, current, changed)))
    expect(error).toMatchObject({ _tag: "IcebergError", reason: "SchemaChange", table: table.uri })
    expect(exitCodeOf(error)).toBe(2)
    expect(error.message).toContain("column partition_version is long in the table and string in this export")
    const missing = raw.filter((c) => c.name !== "data_handle")
    const second = await Effect.runPromise(Effect.flip(schemaFor(table, current, missing)))
    expect(second.message).toContain("column data_handle is required in the table and this export has no such column")
    // An int column may widen to long; a new nullable column is added.
    const widened = await run(schemaFor(table, current, [...raw, col("extra", "int32")]))
    expect(widened.schema.fields.at(-1)).toEqual({ id: 7, name: "extra", required: false, type: "int" })
    expect(filesBelow(out)).toEqual(files)
    expect((await run(readCurrent(table))).version).toBe(1)
  })

  it("refuses a directory holding a Parquet export, another layer's table, or a table moved elsewhere", async () => {
    const out = tempDir()
    fs.mkdirSync(path.join(out, "demo/places/version=3"), { recursive: true })
    const dest = await run(destination(out))
    const plain = await Effect.runPromise(Effect.flip(loadTable(tableAt(dest, "demo/places"), IDENTITY)))
    expect(plain).toMatchObject({ reason: "Mismatch" })
    expect(plain.message).toContain("holds a Parquet/Arrow export (version=3)")
    const table = tableAt(dest, "demo/other")
    await run(exportVersion(table, { version: 0, rows: [...initialLayer(5).values()] }))
    const other = await Effect.runPromise(Effect.flip(loadTable(table, { ...IDENTITY, layerId: "roads" })))
    expect(other.message).toContain(
      `is the table of ${IDENTITY.catalogHrn} layer places, not of ${IDENTITY.catalogHrn} layer roads`
    )
    fs.cpSync(path.join(out, "demo/other"), path.join(out, "demo/copy"), { recursive: true })
    const moved = await Effect.runPromise(Effect.flip(loadTable(tableAt(dest, "demo/copy"), IDENTITY)))
    expect(moved.message).toContain("it was copied or moved")
  })

  it("keeps the metadata fields other writers add", async () => {
    const out = tempDir()
    const dest = await run(destination(out))
    const table = tableAt(dest, "demo/places")
    await run(exportVersion(table, { version: 0, rows: [...initialLayer(20).values()] }))
    // Another writer's v2: fields this library does not model, and a table property.
    const file = path.join(out, "demo/places/metadata")
    const v1 = JSON.parse(fs.readFileSync(path.join(file, "v1.metadata.json"), "utf8"))
    const other = {
      ...v1,
      "partition-statistics": [],
      "x-engine-extension": { a: 1 },
      properties: { ...v1.properties, "history.expire.max-snapshot-age-ms": "1000" },
      schemas: v1.schemas.map((s: any) => ({
        ...s,
        fields: s.fields.map((f: any) => ({ ...f, doc: `about ${f.name}` }))
      })),
      snapshots: v1.snapshots.map((s: any) => ({ ...s, summary: { ...s.summary, "spark.app.id": "local-1" } }))
    }
    fs.writeFileSync(path.join(file, "v2.metadata.json"), JSON.stringify(other))
    fs.writeFileSync(path.join(file, "version-hint.text"), "2")
    const second = rowOf("extra", 1)
    await run(exportVersion(table, { version: 1, rows: [...initialLayer(20).values(), second] }))
    const v3 = JSON.parse(fs.readFileSync(path.join(file, "v3.metadata.json"), "utf8"))
    expect(v3["x-engine-extension"]).toEqual({ a: 1 })
    expect(v3["partition-statistics"]).toEqual([])
    expect(v3.properties["history.expire.max-snapshot-age-ms"]).toBe("1000")
    expect(v3.schemas[0].fields[0].doc).toBe("about partition")
    expect(v3.snapshots[0].summary["spark.app.id"]).toBe("local-1")
    expect((await read(table.uri, "v1")).length).toBe(21)
  })
})
