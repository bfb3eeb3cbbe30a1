import * as Effect from "effect/Effect"
import { buildBundle, mainMessageOf, readBundle } from "../decode/Bundle.ts"
import { formatCoordinates, SCHEMA_BUNDLE_VARIANT, variantUrl } from "../domain/Artifact.ts"
import * as HereTile from "../domain/HereTile.ts"
import { createSchema, putArtifactFile, registerArtifact } from "./Artifacts.ts"

/**
 * The demo catalog's protobuf layer `roads`: road links per HERE tile, encoded with a schema bundle
 * built here at seed time (no protoc), published through the artifact API's rules like any schema.
 * The message has what decoding must get right: nested messages, repeated fields, an enum, 64-bit
 * integers above 2^53, and bytes.
 */

export const ROAD_TILE_PROTO = `syntax = "proto3";

package catalog_export.demo.v1;

// Functional road class.
enum RoadClass {
  ROAD_CLASS_UNSPECIFIED = 0;
  MOTORWAY = 1;
  PRIMARY = 2;
  SECONDARY = 3;
  RESIDENTIAL = 4;
}

message Point {
  double lat = 1;
  double lon = 2;
}

message RoadLink {
  string link_id = 1;
  // Globally unique id; values are above 2^53.
  uint64 global_id = 2;
  RoadClass road_class = 3;
  double length_m = 4;
  repeated Point geometry = 5;
  bool one_way = 6;
  sint32 speed_limit_kmh = 7;
  repeated string names = 8;
}

message TileInfo {
  string source = 1;
  int64 created_micros = 2;
  fixed64 revision = 3;
}

// One partition of the roads layer.
message RoadTile {
  uint64 tile_id = 1;
  int32 level = 2;
  repeated RoadLink road_link = 3;
  TileInfo info = 4;
  bytes fingerprint = 5;
}
`

export const ROAD_TILE_SOURCE = "catalog_export/demo/v1/road_tile.proto"
export const ROAD_TILE_MESSAGE = "catalog_export.demo.v1.RoadTile"

const GROUP = "com.here.catalogexport.demo"
const SCHEMA = { partition: "local", groupId: GROUP, artifactId: "road-tile_v1", version: "1.0.0" }
const ARTIFACT = { ...SCHEMA, artifactId: "road-tile_v1_ds" }
const BUNDLE_FILE = "road-tile_v1_ds-1.0.0.zip"

export const ROADS_SCHEMA_HRN = formatCoordinates(SCHEMA, "schema")

export const roadTileBundle = (): Uint8Array =>
  buildBundle({ protoFiles: { [ROAD_TILE_SOURCE]: ROAD_TILE_PROTO }, mainMessage: ROAD_TILE_MESSAGE })

/** Registers the artifact, uploads the bundle and creates the schema, owned by `appId`. */
export const publishRoadsSchema = (bundle: Uint8Array, appId: string) =>
  Effect.gen(function*() {
    yield* registerArtifact(ARTIFACT.groupId, ARTIFACT.artifactId, appId, "local")
    yield* putArtifactFile(ARTIFACT, BUNDLE_FILE, bundle, appId)
    yield* createSchema(SCHEMA, {
      name: "Demo road tile",
      summary: "Road links per HERE tile (catalog-export demo).",
      variants: [{ id: SCHEMA_BUNDLE_VARIANT, url: variantUrl(formatCoordinates(ARTIFACT, "artifact"), BUNDLE_FILE) }]
    }, appId)
  }).pipe(Effect.orDie)

const CLASSES = ["MOTORWAY", "PRIMARY", "SECONDARY", "RESIDENTIAL"]
const STREETS = [
  "Unter den Linden",
  "Friedrichstraße",
  "Karl-Marx-Allee",
  "Kurfürstendamm",
  "Torstraße",
  "Invalidenstraße"
]
const BASE_ID = 2n ** 60n

/** Encodes road tiles with the bundle's descriptor set, as a producer with the schema would. */
export const roadTileEncoder = (bundle: Uint8Array) => {
  const type = mainMessageOf(readBundle(bundle))
  return (random: () => number, tileId: number, version: number): Uint8Array => {
    const box = HereTile.boundingBox(tileId)
    const links = Array.from({ length: 2 + Math.floor(random() * 7) }, (_, i) => ({
      link_id: `${tileId}-${i}`,
      global_id: String(BASE_ID + BigInt(tileId) * 64n + BigInt(i)),
      road_class: CLASSES[Math.floor(random() * CLASSES.length)],
      length_m: Math.round(random() * 500_000) / 100,
      geometry: Array.from({ length: 2 + Math.floor(random() * 5) }, () => ({
        lat: Number((box.south + random() * (box.north - box.south)).toFixed(7)),
        lon: Number((box.west + random() * (box.east - box.west)).toFixed(7))
      })),
      one_way: random() < 0.3,
      speed_limit_kmh: [30, 50, 80, 100, 130][Math.floor(random() * 5)]!,
      names: random() < 0.8 ? [STREETS[Math.floor(random() * STREETS.length)]!] : []
    }))
    const message = type.fromObject({
      tile_id: String(tileId),
      level: HereTile.toAddress(tileId).level,
      road_link: links,
      info: {
        source: "catalog-export demo",
        created_micros: String(1_700_000_000_000_000n + BigInt(version) * 86_400_000_000n),
        revision: String(BASE_ID * 8n + BigInt(version))
      },
      fingerprint: Uint8Array.from({ length: 8 }, () => Math.floor(random() * 256))
    })
    return type.encode(message).finish()
  }
}
