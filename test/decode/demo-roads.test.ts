/**
 * The path the export's --decode takes, against the local service's demo layer `roads`: the layer's
 * schema HRN from the config API, its bundle from the artifact API, blobs from the blob API, decoded
 * and written to Parquet; DuckDB's reading compared with an independent decoder (@bufbuild/protobuf
 * reading the bundle's descriptor set).
 */
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf"
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt"
import { expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { unzipSync } from "fflate"
import * as path from "node:path"
import { ArtifactApi } from "../../src/client/ArtifactApi.ts"
import { BlobApi } from "../../src/client/BlobApi.ts"
import { ConfigApi } from "../../src/client/ConfigApi.ts"
import { MetadataApi } from "../../src/client/MetadataApi.ts"
import { DESCRIPTOR_SET_PATH } from "../../src/decode/Bundle.ts"
import { makeDecoder } from "../../src/decode/LayerContent.ts"
import { layerContent } from "../../src/export/Decoding.ts"
import { clientLayer } from "../support/client.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { DEMO, Service } from "../support/service.ts"
import { type PartitionInput, writeDecoded } from "./support.ts"

// Live clock: the client's retries wait real time.
layer(clientLayer().pipe(Layer.provideMerge(Service.layer({ seed: { partitions: 20, versions: 3 } }))), {
  excludeTestServices: true
})("the demo protobuf layer, decoded", (it) => {
  it.effect("decodes every field as an independent decoder reads it", () =>
    Effect.gen(function*() {
      const svc = yield* Service
      const catalog = yield* (yield* ConfigApi).getCatalog(DEMO)
      const roads = catalog.layers.find((l) => l.id === "roads")!
      // Nothing to fetch unless protobuf decoding may be wanted.
      expect((yield* layerContent(roads, "json")).schemaBundle).toBeUndefined()
      const content = yield* layerContent(roads, "auto")
      const metadata = yield* MetadataApi
      const version = yield* metadata.latestVersion(DEMO)
      const listed = Chunk.toArray(
        yield* Stream.runCollect(
          metadata.partitions(DEMO, "roads", { version, additionalFields: ["dataSize", "checksum"] })
        )
      )
      const blobs = yield* BlobApi
      const inputs = yield* Effect.forEach(listed, (p) =>
        Effect.map(blobs.get(DEMO, "roads", p.dataHandle), (data): PartitionInput => (
          {
            partition: p.partition,
            partitionVersion: p.version,
            dataHandle: p.dataHandle,
            dataSize: p.dataSize ?? null,
            checksum: p.checksum ?? null,
            data
          }
        )), { concurrency: 8 })
      const bundle = content.schemaBundle!
      expect(content).toMatchObject({ layerId: "roads", contentType: "application/x-protobuf", heretile: true })
      expect(bundle).toEqual(
        yield* (yield* ArtifactApi).getSchemaBundle("hrn:local:schema:::com.here.catalogexport.demo:road-tile_v1:1.0.0")
      )
      expect(inputs.length).toBeGreaterThan(50)
      const decoder = yield* makeDecoder(content, { mode: "auto", onError: "fail" })
      expect(decoder.kind).toBe("protobuf")
      const file = path.join(svc.dir, "roads.parquet")
      yield* Effect.promise(() =>
        writeDecoded(decoder, file, "parquet", inputs, 25)
      )

      const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, unzipSync(bundle)[DESCRIPTOR_SET_PATH]!))
      const RoadTile = registry.getMessage("catalog_export.demo.v1.RoadTile")!
      const RoadClass = registry.getEnum("catalog_export.demo.v1.RoadClass")!
      const className = (n: number) =>
        RoadClass.values.find((v) => v.number === n)!.name

      yield* Effect.promise(() =>
        withDuckDB(async (db) => {
          const rows = await query(
            db,
            `SELECT partition, tile_level, tile_id, level, road_link, info, fingerprint FROM read_parquet(${
              literal(file)
            }) ORDER BY partition`
          )
          expect(rows).toHaveLength(inputs.length)
          const byId = new Map(inputs.map((p) => [p.partition, p]))
          let aboveTwo53 = 0
          for (const row of rows) {
            const m = fromBinary(RoadTile, byId.get(row.partition as string)!.data!) as any
            expect(row.tile_id).toBe(m.tileId)
            expect(String(row.tile_id)).toBe(row.partition)
            expect(row.level).toBe(m.level)
            expect(row.tile_level).toBe(12)
            expect(Array.from(row.fingerprint as Uint8Array)).toEqual(Array.from(m.fingerprint))
            expect(row.info).toEqual({
              source: m.info.source,
              created_micros: m.info.createdMicros,
              revision: m.info.revision
            })
            const links = row.road_link as Array<Record<string, any>>
            expect(links.map((l) => ({ ...l, geometry: l.geometry }))).toEqual(m.roadLink.map((l: any) => ({
              link_id: l.linkId,
              global_id: l.globalId,
              road_class: className(l.roadClass),
              length_m: l.lengthM,
              geometry: l.geometry.map((p: any) => ({ lat: p.lat, lon: p.lon })),
              one_way: l.oneWay,
              speed_limit_kmh: l.speedLimitKmh,
              names: l.names
            })))
            for (const l of links) if ((l.global_id as bigint) > 2n ** 53n) aboveTwo53++
            expect((row.info as { revision: bigint }).revision).toBeGreaterThanOrEqual(2n ** 63n)
          }
          expect(aboveTwo53).toBeGreaterThan(100)
        })
      )
    }))
})
