/**
 * GeoJSON to GeoParquet 1.1 and JSON documents to a JSON column, and what happens to a blob that does
 * not decode under each --on-decode-error, at the module level. Files are read back by DuckDB (WKB
 * parsed by the test's own reader) and apache-arrow.
 */
import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { buildBundle } from "../../src/decode/Bundle.ts"
import { type DecodeOptions, type LayerContent, resolveKind } from "../../src/decode/Decoder.ts"
import { DecodeError } from "../../src/decode/Errors.ts"
import { makeDecoder } from "../../src/decode/LayerContent.ts"
import { UndecodableBlob } from "../../src/decode/Shared.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { partition, readWkb, tempDir, writeDecoded } from "./support.ts"

const dir = tempDir()
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const bytes = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value))

const features = [
  {
    type: "Feature",
    id: 7,
    geometry: { type: "Point", coordinates: [13.4, 52.5] },
    properties: { kind: "cafe", big: 12345678901234567000 }
  },
  {
    type: "Feature",
    id: "road-1",
    geometry: { type: "LineString", coordinates: [[13.0, 52.0], [13.5, 52.25], [14.0, 52.5]] },
    properties: null
  },
  {
    type: "Feature",
    geometry: {
      type: "Polygon",
      coordinates: [[[10, 50], [11, 50], [11, 51], [10, 51], [10, 50]], [[10.2, 50.2], [10.4, 50.2], [10.4, 50.4], [
        10.2,
        50.2
      ]]]
    },
    properties: { name: "park" }
  },
  {
    type: "Feature",
    id: "multi",
    geometry: {
      type: "MultiPolygon",
      coordinates: [[[[0, 0], [1, 0], [1, 1], [0, 0]]], [[[2, 2], [3, 2], [3, 3], [2, 2]]]]
    },
    properties: {}
  },
  {
    type: "Feature",
    id: "peak",
    geometry: { type: "Point", coordinates: [-5.5, 60.25, 1343] },
    properties: { height: 1343 }
  },
  { type: "Feature", id: "nowhere", geometry: null, properties: { note: "no geometry" } }
]

const geoLayer: LayerContent = { layerId: "tiles", contentType: "application/vnd.geo+json", heretile: true }
const geoInputs = [
  partition("23618364", bytes({ type: "FeatureCollection", features: features.slice(0, 3) })),
  partition("23618365", bytes({ type: "FeatureCollection", features: features.slice(3) })),
  partition("23618366", bytes(features[0])),
  partition("23618367", null)
]

const decoder = (layer: LayerContent, options: Partial<DecodeOptions> = {}) =>
  Effect.runPromise(makeDecoder(layer, { mode: "auto", onError: "fail", ...options }))

describe("GeoJSON", () => {
  it("writes one row per feature with WKB geometries and GeoParquet 1.1 metadata", async () => {
    const d = await decoder(geoLayer)
    expect(d.kind).toBe("geojson")
    const file = path.join(dir, "tiles.parquet")
    await writeDecoded(d, file, "parquet", geoInputs, 2)
    await withDuckDB(async (db) => {
      const [kv] = await query(
        db,
        `SELECT decode(value) AS value FROM parquet_kv_metadata(${literal(file)}) WHERE decode(key) = 'geo'`
      )
      const geo = JSON.parse(kv!.value as string)
      expect(geo).toEqual({
        version: "1.1.0",
        primary_column: "geometry",
        columns: {
          geometry: {
            encoding: "WKB",
            geometry_types: ["LineString", "MultiPolygon", "Point", "Point Z", "Polygon"],
            bbox: [-5.5, 0, 14, 60.25]
          }
        }
      })
      const types = Object.fromEntries(
        (await query(db, `DESCRIBE SELECT * FROM read_parquet(${literal(file)})`)).map((
          r
        ) => [r.column_name, r.column_type])
      )
      expect(types).toMatchObject({
        partition: "VARCHAR",
        feature_id: "VARCHAR",
        geometry: "GEOMETRY('OGC:CRS84')",
        properties: "JSON",
        tile_level: "INTEGER",
        tile_west: "DOUBLE"
      })
      // DuckDB reads the GeoParquet metadata and types the column GEOMETRY; the WKB itself, without it:
      await query(db, "SET enable_geoparquet_conversion = false")
      const rows = await query(
        db,
        `SELECT partition, feature_id, geometry, properties, properties->>'kind' AS kind, tile_x FROM read_parquet(${
          literal(file)
        })`
      )
      expect(rows.map((r) => r.partition)).toEqual([
        "23618364",
        "23618364",
        "23618364",
        "23618365",
        "23618365",
        "23618365",
        "23618366",
        "23618367"
      ])
      const written = [...features.slice(0, 3), ...features.slice(3), features[0]!]
      written.forEach((f, i) => {
        const row = rows[i]!
        expect(row.feature_id).toBe("id" in f && f.id !== undefined ? String(f.id) : null)
        expect(row.geometry === null ? null : readWkb(row.geometry as Uint8Array)).toEqual(f.geometry)
        // JSON text as written: numbers beyond 2^53 keep the digits JSON.stringify gave them
        expect(row.properties === null ? null : JSON.parse(row.properties as string)).toEqual(f.properties)
      })
      expect(rows[0]!.kind).toBe("cafe")
      expect(rows[0]!.tile_x).toBe(2198)
      expect(rows[7]).toMatchObject({ feature_id: null, geometry: null, properties: null })
    })
  })

  it("marks the geometry column geoarrow.wkb in Arrow files", async () => {
    const d = await decoder(geoLayer)
    const file = path.join(dir, "tiles.arrow")
    await writeDecoded(d, file, "arrow", geoInputs)
    const table = tableFromIPC(fs.readFileSync(file))
    expect(table.numRows).toBe(8)
    expect(table.schema.fields.find((f) => f.name === "geometry")!.metadata.get("ARROW:extension:name")).toBe(
      "geoarrow.wkb"
    )
    expect(readWkb(table.getChild("geometry")!.get(1)!)).toEqual(features[1]!.geometry)
  })
})

describe("JSON", () => {
  it("writes the document as a JSON column, text unchanged", async () => {
    const d = await decoder({ layerId: "places", contentType: "application/json; charset=utf-8", heretile: false })
    expect(d.kind).toBe("json")
    const docs = [`{"id":"p1","n":12345678901234567890,"tags":["a","b"]}`, `[1,2,3]`, `"just a string"`]
    const file = path.join(dir, "places.parquet")
    await writeDecoded(d, file, "parquet", docs.map((doc, i) => partition(`p${i}`, bytes(doc))))
    await withDuckDB(async (db) => {
      const rows = await query(
        db,
        `SELECT partition, document, typeof(document) AS t, document->>'n' AS n FROM read_parquet(${
          literal(file)
        }) ORDER BY partition`
      )
      expect(rows.map((r) => r.document)).toEqual(docs)
      expect(rows[0]).toMatchObject({ t: "JSON", n: "12345678901234567890" })
    })
  })

  it("chooses by content type in auto mode, and raw when nothing fits", () => {
    const bundle = new Uint8Array(1)
    expect(
      resolveKind(
        { layerId: "l", contentType: "application/x-protobuf", heretile: false, schemaBundle: bundle },
        "auto"
      )
    ).toBe("protobuf")
    expect(resolveKind({ layerId: "l", contentType: "application/x-protobuf", heretile: false }, "auto")).toBe("raw")
    expect(resolveKind({ layerId: "l", contentType: "application/geo+json", heretile: false }, "auto")).toBe("geojson")
    expect(resolveKind({ layerId: "l", contentType: "application/vnd.geo+json", heretile: false }, "auto")).toBe(
      "geojson"
    )
    expect(resolveKind({ layerId: "l", contentType: "application/json", heretile: false }, "auto")).toBe("json")
    expect(resolveKind({ layerId: "l", contentType: "text/plain", heretile: false }, "auto")).toBe("raw")
    expect(resolveKind({ layerId: "l", contentType: "application/json", heretile: false }, "none")).toBe("raw")
    expect(resolveKind({ layerId: "l", contentType: "text/plain", heretile: false }, "json")).toBe("json")
  })
})

describe("--on-decode-error", () => {
  const good = bytes({ ok: true })
  const inputs = [
    partition("a", good),
    partition("b", bytes("{not json")),
    partition("c", good),
    partition("d", new Uint8Array([0xff, 0xfe]))
  ]
  const layer: LayerContent = { layerId: "places", contentType: "application/json", heretile: false }

  it("fail: stops at the first blob that does not decode, naming the partition", async () => {
    const d = await decoder(layer)
    const thrown = (() => {
      try {
        d.decode(batchOf(inputs))
      } catch (e) {
        return e
      }
    })()
    expect(thrown).toBeInstanceOf(UndecodableBlob)
    const error = DecodeError.of(thrown as UndecodableBlob)
    expect(error.partition).toBe("b")
    expect(error.message).toMatch(/Partition b of layer places \(data handle handle-b\) does not decode/)
    expect(error.message).toMatch(/--on-decode-error skip or raw/)
  })

  it("skip: leaves the blob out and reports it", async () => {
    const d = await decoder(layer, { onError: "skip" })
    expect(d.columns.map((c) => c.name)).not.toContain("decode_error")
    const batch = d.decode(batchOf(inputs))
    expect(batch.partitions).toBe(4)
    expect(batch.rows).toBe(2)
    expect(batch.columns[0]).toEqual(["a", "c"])
    expect(batch.failures.map((f) => f.partition)).toEqual(["b", "d"])
    expect(batch.failures[1]!.reason).toMatch(/encoded data was not valid|invalid/i)
  })

  it("raw: writes the bytes and the reason in data and decode_error", async () => {
    const d = await decoder(layer, { onError: "raw" })
    const file = path.join(dir, "raw.parquet")
    const failures = await writeDecoded(d, file, "parquet", inputs)
    expect(failures.map((f) => f.partition)).toEqual(["b", "d"])
    await withDuckDB(async (db) => {
      const rows = await query(
        db,
        `SELECT partition, document, data, decode_error FROM read_parquet(${literal(file)}) ORDER BY partition`
      )
      expect(
        rows.map((
          r
        ) => [
          r.partition,
          r.document,
          r.data === null ? null : Array.from(r.data as Uint8Array),
          r.decode_error === null ? null : "error"
        ])
      ).toEqual([
        ["a", `{"ok":true}`, null, null],
        ["b", null, Array.from(bytes("{not json")), "error"],
        ["c", `{"ok":true}`, null, null],
        ["d", null, [0xff, 0xfe], "error"]
      ])
      expect(rows[1]!.decode_error).toMatch(/JSON/)
    })
  })

  it("applies to protobuf blobs too", async () => {
    const bundle = buildBundle({
      protoFiles: { "t.proto": `syntax = "proto3"; package t; message M { string s = 1; repeated int32 n = 2; }` },
      mainMessage: "t.M"
    })
    const d = await decoder({
      layerId: "pb",
      contentType: "application/x-protobuf",
      heretile: false,
      schemaBundle: bundle
    }, { onError: "skip" })
    // a length prefix running past the end, and a wire type 7 that does not exist
    const batch = d.decode(
      batchOf([
        partition("x", new Uint8Array([0x0a, 0x7f, 0x41])),
        partition("y", new Uint8Array([0x0f, 0x01])),
        partition("z", new Uint8Array([0x0a, 0x01, 0x41, 0x10, 0x05]))
      ])
    )
    expect(batch.failures.map((f) => f.partition)).toEqual(["x", "y"])
    expect(batch.columns[5]).toEqual(["A"])
    expect(batch.columns[6]).toEqual([[5]])
  })
})
