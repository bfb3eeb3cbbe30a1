/**
 * Protobuf decoding end to end at the module level: a schema bundle built here from .proto text (no
 * protoc), blobs encoded from known values, decoded in batches, written to Parquet and Arrow, and read
 * back by DuckDB and apache-arrow with every field compared to the values the blobs were made from.
 */
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf"
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import { strToU8, unzipSync, zipSync } from "fflate"
import * as fs from "node:fs"
import * as path from "node:path"
import protobuf from "protobufjs"
import { arrowSchema } from "../../src/decode/ArrowColumns.ts"
import { buildBundle, DESCRIPTOR_SET_PATH, readBundle } from "../../src/decode/Bundle.ts"
import { parquetSchema } from "../../src/decode/Columns.ts"
import { makeDecoder } from "../../src/decode/LayerContent.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { partition, tempDir, writeDecoded } from "./support.ts"

const COMMON = `syntax = "proto3";
package test.roads.v1;

enum Kind {
  KIND_UNSPECIFIED = 0;
  MOTORWAY = 1;
  RESIDENTIAL = 2;
}

message Point {
  double lat = 1;
  double lon = 2;
}
`

const TILE = `syntax = "proto3";
package test.roads.v1;

import "google/protobuf/wrappers.proto";
import "test/roads/v1/common.proto";

message Link {
  string id = 1;
  uint64 global_id = 2;
  Kind kind = 3;
  repeated Point shape = 4;
  google.protobuf.UInt32Value speed_limit = 5;
  sint64 offset = 6;
  map<string, int32> attributes = 7;
}

// Contains itself: written as JSON from the second level on.
message Meta {
  string source = 1;
  Meta parent = 2;
}

message Tile {
  fixed64 tile_key = 1;
  int64 created = 2;
  repeated Link links = 3;
  Meta meta = 4;
  bytes blob = 5;
  repeated int64 samples = 6;
  optional string note = 7;
  float ratio = 8;
  bool active = 9;
  uint32 count = 10;
  oneof extra {
    string label = 11;
    int32 number = 12;
  }
  // The same name as a partition column.
  string checksum = 13;
}
`

const PROTO_FILES = { "test/roads/v1/common.proto": COMMON, "test/roads/v1/tile.proto": TILE }

const U64_MAX = 2n ** 64n - 1n
const ABOVE_2_53 = 2n ** 53n + 1n

interface LinkValue {
  id: string
  global_id: bigint
  kind: string
  shape: Array<{ lat: number; lon: number }>
  speed_limit: number | null
  offset: bigint
  attributes: Array<{ key: string; value: number }>
}

interface TileValue {
  tile_key: bigint
  created: bigint
  links: Array<LinkValue>
  meta: { source: string; parent: string | null } | null
  blob: Uint8Array
  samples: Array<bigint>
  note: string | null
  ratio: number
  active: boolean
  count: number
  label: string | null
  number: number | null
  checksum: string
}

const tiles: Array<TileValue> = [
  {
    tile_key: U64_MAX,
    created: -(2n ** 62n) - 7n,
    links: [
      {
        id: "a",
        global_id: U64_MAX - 1n,
        kind: "MOTORWAY",
        shape: [{ lat: 52.5, lon: 13.4 }, { lat: 52.6, lon: 13.5 }],
        speed_limit: 120,
        offset: ABOVE_2_53,
        attributes: [{ key: "lanes", value: 3 }]
      },
      {
        id: "b",
        global_id: ABOVE_2_53,
        kind: "KIND_UNSPECIFIED",
        shape: [],
        speed_limit: null,
        offset: -ABOVE_2_53,
        attributes: []
      }
    ],
    meta: { source: "survey", parent: JSON.stringify({ source: "root" }) },
    blob: new Uint8Array([0, 1, 2, 255]),
    samples: [ABOVE_2_53, -1n, 0n],
    note: "checked",
    ratio: 0.5,
    active: true,
    count: 4_000_000_000,
    label: "x",
    number: null,
    checksum: "from-the-message"
  },
  {
    tile_key: 5n,
    created: 0n,
    links: [{
      id: "c",
      global_id: 2n ** 63n,
      kind: "RESIDENTIAL",
      shape: [{ lat: -1.25, lon: 2.5 }],
      speed_limit: 0,
      offset: 0n,
      attributes: [{ key: "a", value: -1 }, { key: "b", value: 2 }]
    }],
    meta: null,
    blob: new Uint8Array(0),
    samples: [],
    note: null,
    ratio: 0,
    active: false,
    count: 0,
    label: null,
    number: 42,
    checksum: ""
  }
]

/** The blob of a tile, encoded from the .proto text (protobuf.js parses it; our descriptor set is not involved). */
const encoder = protobuf.parse(
  COMMON + TILE.replace(/syntax = "proto3";\npackage test.roads.v1;\n/, "").replace(/import .*\n/g, ""),
  { keepCase: true }
)
  .root.lookupType("test.roads.v1.Tile")
const encode = (t: TileValue): Uint8Array => {
  const object: Record<string, unknown> = {
    tile_key: String(t.tile_key),
    created: String(t.created),
    links: t.links.map((l) => ({
      id: l.id,
      global_id: String(l.global_id),
      kind: l.kind,
      shape: l.shape,
      ...(l.speed_limit === null ? {} : { speed_limit: { value: l.speed_limit } }),
      offset: String(l.offset),
      attributes: Object.fromEntries(l.attributes.map((a) => [a.key, a.value]))
    })),
    ...(t.meta === null ? {} : { meta: { source: t.meta.source, parent: { source: "root" } } }),
    blob: t.blob,
    samples: t.samples.map(String),
    ...(t.note === null ? {} : { note: t.note }),
    ratio: t.ratio,
    active: t.active,
    count: t.count,
    ...(t.label === null ? {} : { label: t.label }),
    ...(t.number === null ? {} : { number: t.number }),
    checksum: t.checksum
  }
  return encoder.encode(encoder.fromObject(object)).finish()
}

// protobuf.js needs the wrappers type for encoding.
encoder.root.add(protobuf.Root.fromJSON(protobuf.common.get("google/protobuf/wrappers.proto")!).lookup("google")!)
encoder.root.resolveAll()

const dir = tempDir()
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const bundle = buildBundle({ protoFiles: PROTO_FILES, mainMessage: "test.roads.v1.Tile" })
const blobs = tiles.map(encode)

const inputs = [
  partition("tile-a", blobs[0]!, { checksum: "sha-a" }),
  partition("tile-deleted", null),
  partition("tile-b", blobs[1]!, { checksum: "sha-b", partitionVersion: 2n ** 62n })
]

const decoderFor = (bundleBytes: Uint8Array, explode?: string) =>
  Effect.runPromise(makeDecoder(
    { layerId: "roads", contentType: "application/x-protobuf", heretile: false, schemaBundle: bundleBytes },
    { mode: "auto", onError: "fail", ...(explode === undefined ? {} : { explode }) }
  ))

const normalizeDuck = (value: unknown): unknown => {
  if (value instanceof Uint8Array) return Array.from(value)
  if (Array.isArray(value)) return value.map(normalizeDuck)
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>
    // DuckDB gives MAP-less lists of structs as arrays; BLOBs as {bytes}
    if ("bytes" in o && o.bytes instanceof Uint8Array && Object.keys(o).length === 1) return Array.from(o.bytes)
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, normalizeDuck(v)]))
  }
  return value
}

const expected = (t: TileValue) => normalizeDuck({ ...t, checksum_: t.checksum, checksum: undefined })

describe("schema bundles", () => {
  it("compiles .proto text into a descriptor set that a strict reader accepts", () => {
    const files = unzipSync(bundle)
    expect(Object.keys(files).sort()).toEqual([
      "META-INF/layer.fds",
      "META-INF/layer.manifest.json",
      "test/roads/v1/common.proto",
      "test/roads/v1/tile.proto"
    ])
    expect(JSON.parse(new TextDecoder().decode(files["META-INF/layer.manifest.json"]!)).main).toEqual({
      message: "test.roads.v1.Tile",
      source: "test/roads/v1/tile.proto"
    })
    // @bufbuild/protobuf resolves only fully-qualified type names, as protoc writes them.
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, files[DESCRIPTOR_SET_PATH]!))
    const tile = registry.getMessage("test.roads.v1.Tile")!
    expect(tile.fields.map((f) => f.name)).toEqual([
      "tile_key",
      "created",
      "links",
      "meta",
      "blob",
      "samples",
      "note",
      "ratio",
      "active",
      "count",
      "label",
      "number",
      "checksum"
    ])
    expect(registry.getFile("test/roads/v1/tile.proto")!.dependencies.map((d) => d.name)).toEqual([
      "google/protobuf/wrappers",
      "test/roads/v1/common"
    ]) // bufbuild names files without .proto
    // ... and decodes our blobs to the same values.
    const decoded = fromBinary(tile, blobs[0]!) as any
    expect(decoded.tileKey).toBe(U64_MAX)
    expect(decoded.links[0].globalId).toBe(U64_MAX - 1n)
  })

  it.effect("refuses bundles that cannot be used, naming what is missing", () =>
    Effect.gen(function*() {
      const refusal = (bytes: Uint8Array) =>
        Effect.flip(
          makeDecoder(
            { layerId: "roads", contentType: "application/x-protobuf", heretile: false, schemaBundle: bytes },
            { mode: "protobuf", onError: "fail" }
          )
        )
      expect((yield* refusal(new Uint8Array([1, 2, 3]))).message).toMatch(/not a ZIP/)
      expect((yield* refusal(zipSync({ "a.proto": strToU8(COMMON) }))).message).toMatch(
        /no META-INF\/layer\.manifest\.json/
      )
      expect(
        (yield* refusal(
          zipSync({
            "META-INF/layer.manifest.json": strToU8(`{"main":{"message":"test.roads.v1.Nope"}}`),
            "test/roads/v1/common.proto": strToU8(COMMON)
          })
        )).message
      ).toMatch(/no message test\.roads\.v1\.Nope/)
      const noSchema = yield* Effect.flip(
        makeDecoder({ layerId: "roads", contentType: "application/x-protobuf", heretile: false }, {
          mode: "protobuf",
          onError: "fail"
        })
      )
      expect(noSchema._tag).toBe("DecodeSetupError")
      expect(noSchema.message).toMatch(/--schema-bundle/)
      const explodeMeta = yield* Effect.flip(makeDecoder(
        { layerId: "roads", contentType: "application/x-protobuf", heretile: false, schemaBundle: bundle },
        { mode: "auto", onError: "fail", explode: "meta" }
      ))
      expect(explodeMeta.message).toMatch(
        /--explode meta: test\.roads\.v1\.Tile has no repeated field of that name \(repeated fields: links, samples\)/
      )
    }))
})

describe("protobuf decoding", () => {
  it("writes one column per field, nested and repeated, 64-bit exact, read back by DuckDB field by field", async () => {
    const decoder = await decoderFor(bundle)
    expect(decoder.kind).toBe("protobuf")
    expect(decoder.columns.map((c) => c.name)).toEqual([
      "partition",
      "partition_version",
      "data_handle",
      "data_size",
      "checksum",
      "tile_key",
      "created",
      "links",
      "meta",
      "blob",
      "samples",
      "note",
      "ratio",
      "active",
      "count",
      "label",
      "number",
      "checksum_"
    ])
    const file = path.join(dir, "tiles.parquet")
    expect(await writeDecoded(decoder, file, "parquet", inputs, 2)).toEqual([])
    await withDuckDB(async (db) => {
      const types = Object.fromEntries(
        (await query(db, `DESCRIBE SELECT * FROM read_parquet(${literal(file)})`)).map((
          r
        ) => [r.column_name, r.column_type])
      )
      expect(types).toMatchObject({
        tile_key: "UBIGINT",
        created: "BIGINT",
        links:
          "STRUCT(id VARCHAR, global_id UBIGINT, kind VARCHAR, shape STRUCT(lat DOUBLE, lon DOUBLE)[], speed_limit UINTEGER, \"offset\" BIGINT, attributes STRUCT(\"key\" VARCHAR, \"value\" INTEGER)[])[]",
        meta: "STRUCT(\"source\" VARCHAR, parent JSON)",
        blob: "BLOB",
        samples: "BIGINT[]",
        count: "UINTEGER",
        ratio: "FLOAT",
        checksum: "VARCHAR",
        checksum_: "VARCHAR"
      })
      const rows = await query(
        db,
        `SELECT * EXCLUDE (partition, partition_version, data_handle, data_size, checksum) FROM read_parquet(${
          literal(file)
        }) ORDER BY partition`
      )
      expect(rows).toHaveLength(3)
      expect(normalizeDuck(rows[0])).toEqual(expected(tiles[0]!))
      expect(normalizeDuck(rows[1])).toEqual(expected(tiles[1]!))
      expect(Object.values(rows[2]!).every((v) => v === null)).toBe(true)
      const meta = await query(
        db,
        `SELECT partition, partition_version, checksum FROM read_parquet(${literal(file)}) ORDER BY partition`
      )
      expect(meta).toEqual([
        { partition: "tile-a", partition_version: 3n, checksum: "sha-a" },
        { partition: "tile-b", partition_version: 2n ** 62n, checksum: "sha-b" },
        { partition: "tile-deleted", partition_version: 3n, checksum: null }
      ])
      // Exact above 2^53 in SQL too, and nested fields are addressable.
      const [q] = await query(
        db,
        `SELECT tile_key::VARCHAR AS k, links[1].global_id::VARCHAR AS g, links[1].shape[2].lon AS lon, meta.parent->>'source' AS parent
        FROM read_parquet(${literal(file)}) WHERE partition = 'tile-a'`
      )
      expect(q).toEqual({ k: String(U64_MAX), g: String(U64_MAX - 1n), lon: 13.5, parent: "root" })
      // Filters that can use the column statistics of unsigned 64-bit values above 2^63.
      const counts = await query(
        db,
        `SELECT count(*) FILTER (WHERE tile_key > 9223372036854775808) AS high, count(*) FILTER (WHERE tile_key < 10) AS low FROM read_parquet(${
          literal(file)
        })`
      )
      expect(counts).toEqual([{ high: 1n, low: 1n }])
      expect(
        await query(db, `SELECT partition FROM read_parquet(${literal(file)}) WHERE tile_key = 18446744073709551615`)
      ).toEqual([{ partition: "tile-a" }])
      expect(await query(db, `SELECT partition FROM read_parquet(${literal(file)}) WHERE tile_key BETWEEN 1 AND 9`))
        .toEqual([{ partition: "tile-b" }])
    })
  })

  it("writes the same to Arrow IPC, read back by apache-arrow", async () => {
    const decoder = await decoderFor(bundle)
    const file = path.join(dir, "tiles.arrow")
    await writeDecoded(decoder, file, "arrow", inputs, 2)
    const table = tableFromIPC(fs.readFileSync(file))
    expect(table.numRows).toBe(3)
    expect(String(table.schema.fields.find((f) => f.name === "links")!.type)).toMatch(
      /^List<Struct<\{id:Utf8, global_id:Uint64/
    )
    const row = table.get(0)!.toJSON() as Record<string, any>
    expect(row.tile_key).toBe(U64_MAX)
    expect(row.created).toBe(tiles[0]!.created)
    const links = row.links.toArray().map((l: any) => l.toJSON())
    expect(links[0].global_id).toBe(U64_MAX - 1n)
    expect(links[0].kind).toBe("MOTORWAY")
    expect(links[0].shape.toArray().map((p: any) => p.toJSON())).toEqual(tiles[0]!.links[0]!.shape)
    expect(links[1].speed_limit).toBeNull()
    expect(row.meta.toJSON()).toEqual(tiles[0]!.meta)
    expect(Array.from(row.samples.toArray())).toEqual(tiles[0]!.samples)
    expect(Array.from(row.blob)).toEqual([0, 1, 2, 255])
    expect(table.schema.fields.find((f) => f.name === "meta")!.type.children[1].metadata.get("ARROW:extension:name"))
      .toBe("arrow.json")
  })

  it("decodes with the .proto files when the bundle has no descriptor set", async () => {
    const withoutFds = buildBundle({
      protoFiles: PROTO_FILES,
      mainMessage: "test.roads.v1.Tile",
      withoutDescriptorSet: true
    })
    expect(readBundle(withoutFds).descriptorSet).toBeUndefined()
    const a = await decoderFor(withoutFds)
    const b = await decoderFor(bundle)
    expect(a.columns).toEqual(b.columns)
    const [x, y] = [a, b].map((d) => d.decode(batchOf(inputs)))
    expect(x!.columns).toEqual(y!.columns)
  })

  it("--explode writes one row per element of a repeated field, keeping the partition columns", async () => {
    const decoder = await decoderFor(bundle, "links")
    expect(decoder.columns.map((c) => c.name)).toEqual([
      "partition",
      "partition_version",
      "data_handle",
      "data_size",
      "checksum",
      "links_index",
      "id",
      "global_id",
      "kind",
      "shape",
      "speed_limit",
      "offset",
      "attributes"
    ])
    const file = path.join(dir, "links.parquet")
    await writeDecoded(decoder, file, "parquet", inputs)
    await withDuckDB(async (db) => {
      const rows = await query(
        db,
        `SELECT partition, links_index, id, global_id, kind, speed_limit, "offset", len(shape) AS points FROM read_parquet(${
          literal(file)
        }) ORDER BY partition, links_index`
      )
      expect(rows).toEqual([
        {
          partition: "tile-a",
          links_index: 0,
          id: "a",
          global_id: U64_MAX - 1n,
          kind: "MOTORWAY",
          speed_limit: 120,
          offset: ABOVE_2_53,
          points: 2n
        },
        {
          partition: "tile-a",
          links_index: 1,
          id: "b",
          global_id: ABOVE_2_53,
          kind: "KIND_UNSPECIFIED",
          speed_limit: null,
          offset: -ABOVE_2_53,
          points: 0n
        },
        {
          partition: "tile-b",
          links_index: 0,
          id: "c",
          global_id: 2n ** 63n,
          kind: "RESIDENTIAL",
          speed_limit: 0,
          offset: 0n,
          points: 1n
        },
        // a deleted partition stays visible as a row of nulls
        {
          partition: "tile-deleted",
          links_index: null,
          id: null,
          global_id: null,
          kind: null,
          speed_limit: null,
          offset: null,
          points: null
        }
      ])
    })
  })

  it("decodes into memory of its own: the batch's buffer may be reused or transferred afterwards", async () => {
    const decoder = await decoderFor(bundle)
    const batch = batchOf(inputs)
    const decoded = decoder.decode(batch)
    batch.data.fill(0)
    const column = (name: string) => decoded.columns[decoder.columns.findIndex((c) => c.name === name)]!
    expect(column("blob")[0]).toEqual(new Uint8Array([0, 1, 2, 255]))
    expect(column("links")[0]).toMatchObject([{ id: "a" }, { id: "b" }])
  })

  it("renders the same columns as Parquet and Arrow schemas", async () => {
    const decoder = await decoderFor(bundle)
    const parquet = parquetSchema(decoder.columns)
    expect(parquet[0]).toEqual({ name: "root", num_children: decoder.columns.length })
    expect(parquet.find((e) => e.name === "tile_key")).toMatchObject({ type: "INT64", converted_type: "UINT_64" })
    expect(arrowSchema(decoder.columns).fields.map((f) => f.name)).toEqual(decoder.columns.map((c) => c.name))
  })
})
