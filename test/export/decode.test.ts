/**
 * `export --decode` end to end, through the real CLI against the local service: a schema bundle built
 * here from .proto text and published with `schemas publish`, blobs encoded here from known values
 * and published with `publish`, then exported decoded and read back by DuckDB (and apache-arrow),
 * every field compared with the values the blobs were made from. Also GeoJSON to GeoParquet, each
 * `--on-decode-error`, decoding in job configs and backfill, a decoded export killed and resumed, and
 * the decoding writers behind RollingWriter on both encoders (row groups, rolling, a failure).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import protobuf from "protobufjs"
import { buildBundle } from "../../src/decode/Bundle.ts"
import { DecodeError } from "../../src/decode/Errors.ts"
import * as HereTile from "../../src/domain/HereTile.ts"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import { readWkb } from "../decode/support.ts"
import { cli, type CliResult } from "../support/cli.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { startService, type TestService } from "../support/service.ts"

const CATALOG = "hrn:local:data:::decoding"
const SCHEMA = "hrn:local:schema:::com.example.decoding:tile_v1:1.0.0"

const COMMON = `syntax = "proto3";
package test.export.v1;

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
package test.export.v1;

import "test/export/v1/common.proto";

message Link {
  string id = 1;
  uint64 global_id = 2;
  Kind kind = 3;
  repeated Point shape = 4;
  sint64 offset = 5;
  optional uint32 speed = 6;
}

message Tile {
  fixed64 tile_key = 1;
  int64 created = 2;
  repeated Link links = 3;
  Point center = 4;
  bytes fingerprint = 5;
  repeated int64 samples = 6;
  map<string, int32> counts = 7;
  optional string note = 8;
  bool active = 9;
  float ratio = 10;
}
`
const PROTO_FILES = { "test/export/v1/common.proto": COMMON, "test/export/v1/tile.proto": TILE }

const TILES = 36
const origin = HereTile.toAddress(HereTile.fromCoordinates(52.52, 13.405, 12))
const tileIds = Array.from(
  { length: TILES },
  (_, i) =>
    String(HereTile.fromAddress({ level: 12, column: origin.column + (i % 6), row: origin.row + Math.floor(i / 6) }))
)

/** The values tile `i` is made of, as DuckDB reads them back. */
const tileValues = (i: number) => ({
  tile_key: 2n ** 64n - 1n - BigInt(i),
  created: -(2n ** 62n) + BigInt(i),
  links: Array.from({ length: i % 4 }, (_, k) => ({
    id: `${i}-${k}`,
    global_id: 2n ** 53n + BigInt(i * 10 + k) + 1n,
    kind: ["KIND_UNSPECIFIED", "MOTORWAY", "RESIDENTIAL"][(i + k) % 3]!,
    shape: Array.from({ length: k }, (_, p) => ({ lat: 52.5 + i / 1000 + p / 10, lon: 13.4 - p / 100 })),
    offset: -(2n ** 60n) - BigInt(k),
    speed: k % 2 === 0 ? 30 + k : null
  })),
  center: i % 3 === 0 ? null : { lat: 52 + i / 100, lon: 13 + i / 100 },
  fingerprint: [i, 255, 0, 7],
  samples: [BigInt(i), -(2n ** 53n) - 3n],
  counts: [{ key: "a", value: i }, { key: "b", value: -1 - i }],
  note: i % 2 === 1 ? `note ${i}` : null,
  active: i % 2 === 0,
  ratio: 0.5
})

/** The same values encoded, with protobuf.js straight from the .proto text (not from the bundle). */
const encodeTile = (() => {
  const root = new protobuf.Root()
  protobuf.parse(COMMON, root, { keepCase: true })
  protobuf.parse(TILE.replace(/^import .*$/m, ""), root, { keepCase: true })
  const type = root.lookupType("test.export.v1.Tile")
  return (i: number): Uint8Array => {
    const v = tileValues(i)
    return type.encode(type.fromObject({
      ...v,
      tile_key: String(v.tile_key),
      created: String(v.created),
      links: v.links.map((l) => ({
        ...l,
        global_id: String(l.global_id),
        offset: String(l.offset),
        ...(l.speed === null ? { speed: undefined } : {})
      })),
      center: v.center ?? undefined,
      fingerprint: Uint8Array.from(v.fingerprint),
      samples: v.samples.map(String),
      counts: Object.fromEntries(v.counts.map((c) => [c.key, c.value])),
      note: v.note ?? undefined
    })).finish()
  }
})()

/** Two blobs that are no Tile: a length running past the end, and wire type 7. */
const BAD = { "bad-length": Uint8Array.from([0x0a, 0x7f, 0x41]), "bad-wire-type": Uint8Array.from([0x0f, 0x01]) }

const features = (i: number) => ({
  type: "FeatureCollection",
  features: [
    {
      type: "Feature",
      id: `p-${i}`,
      geometry: { type: "Point", coordinates: [13 + i / 10, 52 + i / 100] },
      properties: { kind: "cafe", rank: i }
    },
    ...(i % 2 === 0
      ? [{
        type: "Feature",
        id: i,
        geometry: { type: "LineString", coordinates: [[12.5, 51.5], [13 + i, 52.25]] },
        properties: null
      }]
      : []),
    ...(i === 3
      ? [{ type: "Feature", geometry: { type: "Point", coordinates: [-5.5, 60.25, 1343] }, properties: {} }]
      : []),
    ...(i === 4 ? [{ type: "Feature", geometry: null, properties: { note: "no geometry" } }] : [])
  ]
})
const GEO = Array.from({ length: 6 }, (_, i) => ({ id: `g-${i}`, doc: features(i) }))

let svc: TestService
let credentials: string
let work: string

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CliResult> =>
  cli([...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials], { env })
const ok = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const result = await run(args, env)
  expect(result.code, result.stderr).toBe(0)
  return result
}
const exportArgs = (
  out: string,
  layer: string,
  ...more: Array<string>
) => ["export", "--catalog", CATALOG, "--layer", layer, "--out", out, "--quiet", ...more]
const versionDir = (out: string, layer: string, version: number) =>
  path.join(out, "decoding", layer, `version=${version}`)
const manifestOf = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "_manifest.json"), "utf8"))
const parquet = (dir: string) => literal(path.join(dir, "*.parquet"))

const plain = (value: unknown): unknown =>
  value instanceof Uint8Array
    ? Array.from(value)
    : Array.isArray(value)
    ? value.map(plain)
    : value !== null && typeof value === "object"
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
    : value

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 10, versions: 1 } })
  credentials = await svc.credentialsFile()
  work = svc.dir
  const bundle = path.join(work, "tile.zip")
  fs.writeFileSync(bundle, buildBundle({ protoFiles: PROTO_FILES, mainMessage: "test.export.v1.Tile" }))
  await ok(["schemas", "publish", "--file", bundle, "--schema", SCHEMA])
  const layer = (id: string, contentType: string, extra: object = {}) => ({
    id,
    name: id,
    summary: id,
    description: id,
    layerType: "versioned",
    contentType,
    volume: { volumeType: "durable" },
    partitioning: { scheme: "generic" },
    ...extra
  })
  const catalog = path.join(work, "catalog.json")
  fs.writeFileSync(
    catalog,
    JSON.stringify({
      id: "decoding",
      name: "Decoding",
      summary: "decoding",
      description: "decoding",
      layers: [
        layer("tiles", "application/x-protobuf", {
          schema: { hrn: SCHEMA },
          partitioning: { scheme: "heretile", tileLevels: [12] }
        }),
        layer("geo", "application/geo+json")
      ]
    })
  )
  await ok(["catalogs", "create", "--file", catalog, "--wait"])
  const publishDir = (name: string, files: Record<string, Uint8Array | string>) => {
    const dir = path.join(work, name)
    fs.mkdirSync(dir)
    for (const [id, bytes] of Object.entries(files)) fs.writeFileSync(path.join(dir, id), bytes)
    return dir
  }
  // version 0: the tiles; version 1: the geometries; version 2: two tiles that do not decode.
  await ok([
    "publish",
    "--catalog",
    CATALOG,
    "--layer",
    "tiles",
    "--from-dir",
    publishDir("tiles-0", Object.fromEntries(tileIds.map((id, i) => [id, encodeTile(i)])))
  ])
  await ok([
    "publish",
    "--catalog",
    CATALOG,
    "--layer",
    "geo",
    "--from-dir",
    publishDir("geo-1", Object.fromEntries(GEO.map((g) => [g.id, JSON.stringify(g.doc)])))
  ])
  await ok(["publish", "--catalog", CATALOG, "--layer", "tiles", "--from-dir", publishDir("tiles-2", BAD)])
}, 120_000)
afterAll(() => svc?.close())

/** Every decoded tile row of a directory, with the fields compared below. */
const tileRows = (dir: string) =>
  withDuckDB((db) =>
    query(
      db,
      `SELECT partition, tile_level, tile_x, tile_y, tile_key, created, links, center, fingerprint, samples, counts, note, active, ratio FROM read_parquet(${
        parquet(dir)
      }) ORDER BY partition`
    )
  )

const expectedTileRows = () =>
  tileIds.map((id, i) => ({ id, i })).sort((a, b) => (a.id < b.id ? -1 : 1)).map(({ id, i }) => {
    const address = HereTile.toAddress(Number(id))
    return { partition: id, tile_level: 12, tile_x: address.column, tile_y: address.row, ...tileValues(i) }
  })

describe("export --decode: protobuf", () => {
  it("decodes every field of every tile as it was encoded, in Parquet and Arrow alike", async () => {
    const out = path.join(work, "protobuf")
    const result = await ok(
      exportArgs(out, "tiles", "--version", "0", "--decode", "auto", "--format", "both", "--json")
    )
    expect(JSON.parse(result.stdout)).toMatchObject({
      status: "exported",
      partitions: TILES,
      decode: { kind: "protobuf", rows: TILES, decoded: TILES, failed: 0 }
    })
    const dir = versionDir(out, "tiles", 0)
    const manifest = manifestOf(dir)
    expect(manifest.decode).toMatchObject({
      kind: "protobuf",
      onError: "fail",
      schema: SCHEMA,
      decoded: TILES,
      failed: 0,
      rows: TILES,
      failures: []
    })
    expect(manifest.decode.bundleSha256).toMatch(/^[0-9a-f]{64}$/)

    const rows = await tileRows(dir)
    expect(plain(rows)).toEqual(plain(expectedTileRows()))
    // 64-bit values beyond 2^53 (and 2^63) exact, typed as the .proto says
    const types = await withDuckDB((db) => query(db, `DESCRIBE SELECT * FROM read_parquet(${parquet(dir)})`))
    expect(Object.fromEntries(types.map((t) => [t.column_name, t.column_type]))).toMatchObject({
      tile_key: "UBIGINT",
      created: "BIGINT",
      links:
        "STRUCT(id VARCHAR, global_id UBIGINT, kind VARCHAR, shape STRUCT(lat DOUBLE, lon DOUBLE)[], \"offset\" BIGINT, speed UINTEGER)[]",
      fingerprint: "BLOB",
      counts: "STRUCT(\"key\" VARCHAR, \"value\" INTEGER)[]"
    })

    const arrowFiles = manifest.files.filter((f: { format: string }) => f.format === "arrow")
    const arrowRows = arrowFiles.flatMap((f: { path: string }) =>
      tableFromIPC(fs.readFileSync(path.join(dir, f.path))).toArray().map((r) => r.toJSON())
    )
    expect(arrowRows).toHaveLength(TILES)
    const byId = new Map(expectedTileRows().map((r) => [r.partition, r]))
    for (const row of arrowRows) {
      const want = byId.get(row.partition)!
      expect(row.tile_key).toBe(want.tile_key)
      expect(row.created).toBe(want.created)
      expect(
        row.links.toArray().map((l: any) => ({ ...l.toJSON(), shape: l.shape.toArray().map((p: any) => p.toJSON()) }))
      ).toEqual(want.links)
      expect(row.center?.toJSON() ?? null).toEqual(want.center)
      expect(Array.from(row.samples.toArray())).toEqual(want.samples)
      expect(Array.from(row.fingerprint)).toEqual(want.fingerprint)
    }
  })

  it("--explode links writes one row per link, keeping the partition columns", async () => {
    const out = path.join(work, "explode")
    const result = await ok(
      exportArgs(out, "tiles", "--version", "0", "--decode", "protobuf", "--explode", "links", "--json")
    )
    const links = expectedTileRows().flatMap((t) =>
      t.links.map((l, k) => ({ partition: t.partition, tile_x: t.tile_x, links_index: k, ...l }))
    )
    expect(JSON.parse(result.stdout).decode).toEqual({
      kind: "protobuf",
      rows: links.length,
      decoded: TILES,
      failed: 0
    })
    const rows = await withDuckDB((db) =>
      query(
        db,
        `SELECT partition, tile_x, links_index, id, global_id, kind, shape, "offset", speed FROM read_parquet(${
          parquet(versionDir(out, "tiles", 0))
        }) ORDER BY partition, links_index`
      )
    )
    expect(plain(rows)).toEqual(plain(links))
    expect(manifestOf(versionDir(out, "tiles", 0)).decode).toMatchObject({ explode: "links", rows: links.length })
  })

  it("refuses settings that cannot work before fetching anything (exit 2)", async () => {
    const out = path.join(work, "refused")
    const noField = await run(exportArgs(out, "tiles", "--version", "0", "--decode", "auto", "--explode", "nope"))
    expect(noField.code).toBe(2)
    expect(noField.stderr).toMatch(
      /Cannot decode layer tiles: --explode nope: test\.export\.v1\.Tile has no repeated field of that name \(repeated fields: links, samples, counts\)/
    )
    const noBundle = await run(
      exportArgs(out, "tiles", "--version", "0", "--decode", "auto", "--schema-bundle", path.join(work, "missing.zip"))
    )
    expect(noBundle.code).toBe(2)
    expect(noBundle.stderr).toMatch(/--schema-bundle .*missing\.zip cannot be read/)
    const geoBundle = await run(
      exportArgs(out, "geo", "--decode", "auto", "--schema-bundle", path.join(work, "tile.zip"))
    )
    expect(geoBundle.code).toBe(2)
    expect(geoBundle.stderr).toMatch(
      /--schema-bundle is for protobuf, and this layer \(content type application\/geo\+json\) decodes as geojson/
    )
    const withoutDecode = await run(exportArgs(out, "tiles", "--explode", "links"))
    expect(withoutDecode.code).toBe(2)
    expect(withoutDecode.stderr).toMatch(/--explode decodes protobuf: add --decode auto or --decode protobuf/)
    expect(fs.existsSync(out)).toBe(false)
  })

  it("decodes with --schema-bundle alone, and rolls decoded files at --max-file-bytes", async () => {
    const out = path.join(work, "bundle-file")
    await ok(
      exportArgs(
        out,
        "tiles",
        "--version",
        "0",
        "--decode",
        "protobuf",
        "--schema-bundle",
        path.join(work, "tile.zip"),
        "--parts",
        "1",
        "--max-file-bytes",
        "3000"
      )
    )
    const dir = versionDir(out, "tiles", 0)
    const manifest = manifestOf(dir)
    expect(manifest.files.length).toBeGreaterThan(2)
    expect(manifest.decode).toMatchObject({ schemaBundle: path.join(work, "tile.zip"), decoded: TILES })
    expect(manifest.decode.schema).toBeUndefined()
    expect(manifest.files.reduce((n: number, f: { rows: number }) => n + f.rows, 0)).toBe(TILES)
    expect(plain(await tileRows(dir))).toEqual(plain(expectedTileRows()))
  })
})

describe("export --decode: GeoJSON", () => {
  it("writes GeoParquet 1.1: the geo metadata, and every geometry as the source GeoJSON has it", async () => {
    const out = path.join(work, "geojson")
    const result = await ok(exportArgs(out, "geo", "--version", "1", "--decode", "auto", "--parts", "1", "--json"))
    const all = GEO.flatMap((g) => g.doc.features.map((f) => ({ partition: g.id, feature: f })))
    expect(JSON.parse(result.stdout).decode).toEqual({
      kind: "geojson",
      rows: all.length,
      decoded: GEO.length,
      failed: 0
    })
    const dir = versionDir(out, "geo", 1)
    const [file] = manifestOf(dir).files
    await withDuckDB(async (db) => {
      const [kv] = await query(
        db,
        `SELECT decode(value) AS value FROM parquet_kv_metadata(${
          literal(path.join(dir, file.path))
        }) WHERE decode(key) = 'geo'`
      )
      const coordinates = all.flatMap(({ feature }) => {
        const g = feature.geometry as { type: string; coordinates: any } | null
        return g === null ? [] : g.type === "Point" ? [g.coordinates] : g.coordinates
      })
      const xs = coordinates.map((c: Array<number>) => c[0]!)
      const ys = coordinates.map((c: Array<number>) => c[1]!)
      expect(JSON.parse(kv!.value as string)).toEqual({
        version: "1.1.0",
        primary_column: "geometry",
        columns: {
          geometry: {
            encoding: "WKB",
            geometry_types: ["LineString", "Point", "Point Z"],
            bbox: [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]
          }
        }
      })
      const types = await query(db, `DESCRIBE SELECT * FROM read_parquet(${parquet(dir)})`)
      expect(Object.fromEntries(types.map((t) => [t.column_name, t.column_type]))).toMatchObject({
        geometry: "GEOMETRY('OGC:CRS84')",
        properties: "JSON",
        feature_id: "VARCHAR"
      })
      await query(db, "SET enable_geoparquet_conversion = false")
      // Blobs arrive in any order; a partition's features are written in the order the blob has them.
      const rows = await query(
        db,
        `SELECT partition, feature_id, geometry, properties FROM read_parquet(${
          parquet(dir)
        }, file_row_number = true) ORDER BY partition, file_row_number`
      )
      expect(rows.map((r) => ({
        partition: r.partition,
        feature_id: r.feature_id,
        geometry: r.geometry === null ? null : readWkb(r.geometry as Uint8Array),
        properties: r.properties === null ? null : JSON.parse(r.properties as string)
      }))).toEqual(
        [...all].sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0)).map((
          { partition, feature }
        ) => ({
          partition,
          feature_id: "id" in feature ? String(feature.id) : null,
          geometry: feature.geometry,
          properties: feature.properties
        }))
      )
    })
  })
})

describe("export --on-decode-error", () => {
  const badIds = Object.keys(BAD).sort()

  it("fail: exit 6 naming the partition and its data handle; nothing committed", async () => {
    const out = path.join(work, "fail")
    const result = await run(exportArgs(out, "tiles", "--version", "2", "--decode", "auto"))
    expect(result.code).toBe(6)
    expect(result.stderr).toMatch(
      /catalog-export: Partition bad-(length|wire-type) of layer tiles \(data handle [^)]+\) does not decode as the layer's content: .*--on-decode-error skip or raw/
    )
    expect(fs.existsSync(path.join(versionDir(out, "tiles", 2), "_manifest.json"))).toBe(false)
  })

  it("skip: the others are exported, and the summary and manifest count and name the two", async () => {
    const out = path.join(work, "skip")
    const result = await ok(
      exportArgs(out, "tiles", "--version", "2", "--decode", "auto", "--on-decode-error", "skip", "--json")
    )
    expect(JSON.parse(result.stdout)).toMatchObject({
      partitions: TILES + 2,
      decode: { kind: "protobuf", rows: TILES, decoded: TILES, failed: 2 }
    })
    const dir = versionDir(out, "tiles", 2)
    const decode = manifestOf(dir).decode
    expect(decode).toMatchObject({ onError: "skip", decoded: TILES, failed: 2, rows: TILES })
    expect(decode.failures.map((f: { partition: string }) => f.partition).sort()).toEqual(badIds)
    expect(decode.failures[0].dataHandle).not.toBe("")
    expect(decode.failures[0].reason).not.toBe("")
    expect(plain(await tileRows(dir))).toEqual(plain(expectedTileRows()))
    const text = await ok(
      exportArgs(
        path.join(work, "skip-text"),
        "tiles",
        "--version",
        "2",
        "--decode",
        "auto",
        "--on-decode-error",
        "skip"
      )
    )
    expect(text.stdout).toMatch(/38 partitions \(0 deleted\), decoded as protobuf into 36 rows, 2 did not decode,/)
  })

  it("raw: the two are rows with their bytes and why, the others decoded", async () => {
    const out = path.join(work, "raw")
    const result = await ok(
      exportArgs(out, "tiles", "--version", "2", "--decode", "auto", "--on-decode-error", "raw", "--json")
    )
    expect(JSON.parse(result.stdout).decode).toEqual({ kind: "protobuf", rows: TILES + 2, decoded: TILES, failed: 2 })
    const dir = versionDir(out, "tiles", 2)
    const rows = await withDuckDB((db) =>
      query(
        db,
        `SELECT partition, tile_key, links, data, decode_error FROM read_parquet(${
          parquet(dir)
        }) WHERE data IS NOT NULL OR decode_error IS NOT NULL ORDER BY partition`
      )
    )
    expect(rows.map((r) => [r.partition, r.tile_key, Array.from(r.data as Uint8Array)])).toEqual(
      badIds.map((id) => [id, null, Array.from(BAD[id as keyof typeof BAD])])
    )
    for (const r of rows) expect(r.decode_error).toMatch(/.+/)
    const decoded = await withDuckDB((db) =>
      query(
        db,
        `SELECT count(*) AS n FROM read_parquet(${
          parquet(dir)
        }) WHERE data IS NULL AND decode_error IS NULL AND tile_key IS NOT NULL`
      )
    )
    expect(Number(decoded[0]!.n)).toBe(TILES)
    expect(manifestOf(dir).decode).toMatchObject({ onError: "raw", failed: 2, rows: TILES + 2 })
  })
})

describe("decoding in job configs and backfill", () => {
  it("a nightly job decodes the layers its config says, as each layer says", async () => {
    const out = path.join(work, "nightly")
    const config = path.join(work, "nightly.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        job: "nightly-export",
        out,
        onDecodeError: "skip",
        layers: [{ catalog: CATALOG, layer: "tiles", decode: "auto", explode: "links" }, {
          catalog: CATALOG,
          layer: "geo"
        }]
      })
    )
    const result = await ok(["run", config, "--json", "--quiet"])
    const [tiles, geo] = JSON.parse(result.stdout).layers
    expect(tiles).toMatchObject({ layer: "tiles", version: 2, decode: { kind: "protobuf", decoded: TILES, failed: 2 } })
    expect(geo.decode).toBeUndefined()
    expect(manifestOf(versionDir(out, "tiles", 2)).decode).toMatchObject({ explode: "links", onError: "skip" })
    expect(manifestOf(versionDir(out, "geo", 2)).decode).toBeUndefined()
  })

  it("backfill decodes every version it exports", async () => {
    const out = path.join(work, "backfill")
    const result = await ok([
      "backfill",
      "--catalog",
      CATALOG,
      "--layer",
      "tiles",
      "--from",
      "0",
      "--to",
      "2",
      "--every-version",
      "--decode",
      "auto",
      "--on-decode-error",
      "skip",
      "--out",
      out,
      "--quiet"
    ])
    expect(result.stdout).toMatch(/version 0: exported 36 partitions, decoded as protobuf into 36 rows, /)
    expect(result.stdout).toMatch(
      /version 2: exported 38 partitions, decoded as protobuf into 36 rows, 2 did not decode, /
    )
    for (const version of [0, 1, 2]) expect(manifestOf(versionDir(out, "tiles", version)).decode.kind).toBe("protobuf")
  })
})

describe("a decoded export killed and resumed", () => {
  const args = (out: string, ...more: Array<string>) =>
    exportArgs(out, "tiles", "--version", "0", "--decode", "auto", "--parts", "3", "--format", "both", ...more)

  it.each(["written:2", "checkpoint:1", "renamed:3"])(
    "killed at %s: the re-run reuses what was finished and equals an undisturbed run",
    async (at) => {
      const out = path.join(work, `killed-${at.replace(":", "-")}`)
      const killed = await run(args(out), { CATALOG_EXPORT_CRASH_AT: at })
      expect(killed.signal, killed.stderr).toBe("SIGKILL")
      const dir = versionDir(out, "tiles", 0)
      expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)
      const resumed = await ok(args(out))
      if (at === "checkpoint:1") expect(resumed.stdout).toMatch(/1 part reused from an interrupted run/)
      expect(plain(await tileRows(dir))).toEqual(plain(expectedTileRows()))
      const manifest = manifestOf(dir)
      expect(manifest.decode).toMatchObject({ decoded: TILES, rows: TILES })
      expect(fs.readdirSync(dir).sort()).toEqual(
        ["_manifest.json", ...manifest.files.map((f: { path: string }) => f.path)].sort()
      )
    }
  )

  it("parts decoded otherwise are exported again, so the files never mix columns", async () => {
    const out = path.join(work, "killed-then-explode")
    const killed = await run(args(out), { CATALOG_EXPORT_CRASH_AT: "checkpoint:2" })
    expect(killed.signal).toBe("SIGKILL")
    const resumed = await ok(args(out, "--explode", "links"))
    expect(resumed.stdout).not.toMatch(/reused/)
    const dir = versionDir(out, "tiles", 0)
    const rows = await withDuckDB((db) =>
      query(
        db,
        `SELECT count(*) AS n, count(DISTINCT partition) AS tiles FROM read_parquet(${
          parquet(dir)
        }, union_by_name = false)`
      )
    )
    const links = expectedTileRows().reduce((n, t) => n + t.links.length, 0)
    expect(rows[0]).toEqual({
      n: BigInt(links),
      tiles: BigInt(expectedTileRows().filter((t) => t.links.length > 0).length)
    })
  })
})

describe("a sharded decoding export", () => {
  it("commits shards decoded alike, and refuses (exit 7, naming it) a shard decoded otherwise", async () => {
    const out = path.join(work, "sharded")
    const planned = await ok([
      "plan",
      "--catalog",
      CATALOG,
      "--layer",
      "tiles",
      "--version",
      "0",
      "--shards",
      "2",
      "--parts",
      "4",
      "--out",
      out
    ])
    const location = JSON.parse(planned.stdout).plan as string
    const shard = (
      i: number,
      ...more: Array<string>
    ) => ["export", "--plan", location, "--shard", String(i), "--quiet", ...more]
    await ok(shard(0, "--decode", "auto"))
    await ok(shard(1))
    const dir = versionDir(out, "tiles", 0)
    const refused = await run(["commit", "--plan", location])
    expect(refused.code).toBe(7)
    expect(refused.stderr).toContain(
      "shard 1 is damaged (decoded otherwise than shard 0: give every shard the same --decode flags)"
    )
    expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)

    // Run again as the others were, shard 1 decodes its parts anew; commit keeps only the named files.
    await ok(shard(1, "--decode", "auto"))
    await ok(["commit", "--plan", location])
    expect(plain(await tileRows(dir))).toEqual(plain(expectedTileRows()))
    const manifest = manifestOf(dir)
    expect(manifest.decode).toMatchObject({ kind: "protobuf", decoded: TILES, rows: TILES, failed: 0 })
    expect(fs.readdirSync(dir).sort()).toEqual(
      ["_manifest.json", ...manifest.files.map((f: { path: string }) => f.path)].sort()
    )
  })
})

describe("the decoding writers behind RollingWriter", () => {
  const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
  const rows = Array.from({ length: 60 }, (_, i) => ({
    partition: `p-${String(i).padStart(3, "0")}`,
    partitionVersion: 1,
    dataHandle: `h-${i}`,
    dataSize: null,
    checksum: null,
    data: json({ type: "Feature", id: i, geometry: { type: "Point", coordinates: [i, i / 2 - 30] }, properties: { i } })
  }))
  const decode = (onError: "fail" | "skip") => ({
    content: { layerId: "geo", contentType: "application/geo+json", heretile: false },
    options: { mode: "geojson" as const, onError }
  })

  it.effect.each([["inline", Encoder.inline], ["thread", Encoder.thread]] as const)(
    "%s: row groups and rolled files of decoded rows; each file's GeoParquet bbox covers all its row groups",
    ([name, encoder]) =>
      Effect.gen(function*() {
        const dir = path.join(work, `writers-${name}`)
        const { decoded, files } = yield* Effect.scoped(Effect.gen(function*() {
          const writer = yield* RollingWriter.make({
            dir,
            format: "parquet",
            metadata: {},
            rowGroupBytes: 2000,
            maxFileBytes: 3000,
            decode: decode("fail")
          })
          for (let i = 0; i < rows.length; i += 7) yield* writer.write(batchOf(rows.slice(i, i + 7)))
          const files = yield* writer.finish
          return { files, decoded: writer.decoded() }
        }))
        expect(decoded).toEqual({ rows: 60, failed: 0, failures: [] })
        expect(files.length).toBeGreaterThan(1)
        let seen = 0
        const rowGroups: Array<number> = []
        yield* Effect.promise(() =>
          withDuckDB(async (db) => {
            for (const f of files) {
              const file = literal(path.join(dir, f.path))
              const [groups] = await query(
                db,
                `SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata(${file})`
              )
              rowGroups.push(Number(groups!.n))
              const [kv] = await query(
                db,
                `SELECT decode(value) AS value FROM parquet_kv_metadata(${file}) WHERE decode(key) = 'geo'`
              )
              const ids = (await query(db, `SELECT feature_id FROM read_parquet(${file})`)).map((r) =>
                Number(r.feature_id)
              )
              expect(ids.length).toBe(f.rows)
              seen += ids.length
              expect(JSON.parse(kv!.value as string).columns.geometry.bbox).toEqual([
                Math.min(...ids),
                Math.min(...ids) / 2 - 30,
                Math.max(...ids),
                Math.max(...ids) / 2 - 30
              ])
            }
          })
        )
        expect(seen).toBe(60)
        expect(Math.max(...rowGroups)).toBeGreaterThan(1)
      }).pipe(Effect.provide(encoder))
  )

  it.effect.each([["inline", Encoder.inline], ["thread", Encoder.thread]] as const)(
    "%s: a blob that does not decode fails the writer with a DecodeError; files stay .partial",
    ([name, encoder]) =>
      Effect.gen(function*() {
        const dir = path.join(work, `writers-fail-${name}`)
        const bad = [...rows.slice(0, 5), {
          ...rows[5]!,
          partition: "broken",
          dataHandle: "h-broken",
          data: json({ type: "Nothing" })
        }]
        const error = yield* Effect.flip(Effect.scoped(Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "both", metadata: {}, decode: decode("fail") })
          yield* writer.write(batchOf(bad))
          return yield* writer.finish
        })))
        expect(error).toBeInstanceOf(DecodeError)
        expect(error).toMatchObject({ layer: "geo", partition: "broken", dataHandle: "h-broken" })
        expect(fs.readdirSync(dir).every((f) => f.endsWith(".partial"))).toBe(true)
      }).pipe(Effect.provide(encoder))
  )
})
