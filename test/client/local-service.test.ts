/**
 * Every call of the Data API client against the real local service (real HTTP, SQLite, pack files),
 * with expected values taken from the service through plain HTTP, not through the client.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BlobApi, VolatileBlobApi } from "../../src/client/BlobApi.ts"
import { ConfigApi } from "../../src/client/ConfigApi.ts"
import type * as DataClient from "../../src/client/DataClient.ts"
import { Lookup } from "../../src/client/Lookup.ts"
import { MetadataApi } from "../../src/client/MetadataApi.ts"
import { PublishApi } from "../../src/client/PublishApi.ts"
import { QueryApi } from "../../src/client/QueryApi.ts"
import { clientLayerFor } from "../support/client.ts"
import { listingHeapGrowth } from "../support/listing.ts"
import { startService, type TestService } from "../support/service.ts"

const DEMO = "hrn:local:data:::demo"
const sha1 = (bytes: Uint8Array) => createHash("sha1").update(bytes).digest("hex")

let svc: TestService
let client: Layer.Layer<DataClient.DataClient, unknown>
const run = <A, E>(effect: Effect.Effect<A, E, DataClient.DataClient>) =>
  Effect.runPromise(effect.pipe(Effect.provide(client)) as Effect.Effect<A, unknown>)
const http = async <A>(path: string): Promise<A> => (await (await svc.get(path)).json()) as A

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 250, versions: 6 } })
  client = await clientLayerFor(svc)
})
afterAll(() => svc.close())

describe("the client against the local service", () => {
  it("lookup: platform and resource base URLs", async () => {
    const direct = await http<Array<{ api: string; version: string; baseURL: string }>>(
      `/lookup/v1/resources/${DEMO}/apis`
    )
    const [config, metadata, apis] = await run(Effect.gen(function*() {
      const lookup = yield* Lookup
      return [
        yield* lookup.baseUrl({ api: "config", version: "v1" }),
        yield* lookup.baseUrl({ api: "metadata", version: "v1", hrn: DEMO }),
        yield* lookup.apis(DEMO)
      ] as const
    }))
    expect(config).toBe(`${svc.url}/config/v1`)
    expect(metadata).toBe(direct.find((e) => e.api === "metadata")!.baseURL)
    expect(apis.map((e) => `${e.api}/${e.version}`).sort()).toEqual(direct.map((e) => `${e.api}/${e.version}`).sort())
  })

  it("config: catalog list (summary and verbose) and catalog get", async () => {
    const direct = await http<{ layers: Array<{ id: string; layerType: string }> }>(`/config/v1/catalogs/${DEMO}`)
    const [summary, verbose, catalog] = await run(Effect.gen(function*() {
      const config = yield* ConfigApi
      return [
        yield* config.listCatalogs(),
        yield* config.listCatalogsVerbose(),
        yield* config.getCatalog(DEMO)
      ] as const
    }))
    expect(summary.map((c) => c.hrn)).toEqual([DEMO])
    expect(verbose.map((c) => c.hrn)).toEqual([DEMO])
    expect(catalog.layers.map((l) => [l.id, l.layerType])).toEqual(direct.layers.map((l) => [l.id, l.layerType]))
    const refused = await run(
      Effect.flip(Effect.flatMap(ConfigApi, (c) => c.getCatalog("hrn:local:data:::restricted")))
    )
    expect(refused._tag).toBe("CatalogNotFound")
  })

  it("metadata: versions, latest, minimum, layerVersions, partitions, parts and changes", async () => {
    const latest = (await http<{ version: number }>(`/metadata/v1/catalogs/${DEMO}/versions/latest`)).version
    const at3 = await http<{ partitions: Array<{ partition: string; dataHandle: string; checksum: string }> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=3&additionalFields=checksum`
    )
    const changes = await http<{ partitions: Array<{ partition: string; dataHandle: string }> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/changes?startVersion=2&endVersion=4`
    )
    const layerVersions = await http<unknown>(`/metadata/v1/catalogs/${DEMO}/layerVersions?version=4`)
    const result = await run(Effect.gen(function*() {
      const m = yield* MetadataApi
      const parts = yield* m.partitionParts(DEMO, "places", { numRequestedParts: 3 })
      const perPart = yield* Effect.forEach(
        parts,
        (part) => Stream.runCollect(m.partitions(DEMO, "places", { version: 3, part }))
      )
      return {
        latest: yield* m.latestVersion(DEMO),
        minimum: yield* m.minimumVersion(DEMO),
        versions: Chunk.toReadonlyArray(
          yield* Stream.runCollect(m.versions(DEMO, { startVersion: -1, endVersion: latest }))
        ),
        layerVersions: yield* m.layerVersions(DEMO, 4),
        at3: Chunk.toReadonlyArray(
          yield* Stream.runCollect(m.partitions(DEMO, "places", { version: 3, additionalFields: ["checksum"] }))
        ),
        parts,
        perPart: perPart.flatMap(Chunk.toReadonlyArray),
        changes: Chunk.toReadonlyArray(
          yield* Stream.runCollect(m.changes(DEMO, "places", { startVersion: 2, endVersion: 4 }))
        ),
        changesParts: yield* m.changesParts(DEMO, "places", { numRequestedParts: 2 })
      }
    }))
    expect(result.latest).toBe(latest)
    expect(result.minimum).toBe(0)
    expect(result.versions.map((v) => v.version)).toEqual(Array.from({ length: latest + 1 }, (_, i) => i))
    expect(result.layerVersions).toEqual(layerVersions)
    expect(result.at3.map((p) => [p.partition, p.dataHandle, p.checksum])).toEqual(
      at3.partitions.map((p) => [p.partition, p.dataHandle, p.checksum])
    )
    expect(result.parts.length).toBe(3)
    expect(result.perPart.map((p) => p.partition)).toEqual(at3.partitions.map((p) => p.partition))
    expect(result.changes.map((p) => [p.partition, p.dataHandle])).toEqual(
      changes.partitions.map((p) => [p.partition, p.dataHandle])
    )
    expect(result.changes.some((p) => p.dataHandle === "")).toBe(changes.partitions.some((p) => p.dataHandle === ""))
    expect(result.changesParts.length).toBeGreaterThanOrEqual(1)
  })

  it("query: partitions by id in batches of at most 100", async () => {
    const all = await http<{ partitions: Array<{ partition: string; dataHandle: string }> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=5`
    )
    const ids = all.partitions.map((p) => p.partition).slice(0, 230)
    const found = await run(
      Effect.flatMap(QueryApi, (q) => q.partitionsById(DEMO, "places", [...ids, "no-such-partition"], { version: 5 }))
    )
    expect(found.map((p) => p.partition).sort()).toEqual([...ids].sort())
    expect(new Map(found.map((p) => [p.partition, p.dataHandle]))).toEqual(
      new Map(all.partitions.slice(0, 230).map((p) => [p.partition, p.dataHandle]))
    )
  })

  it("blob: get, range, stream and head; gzip bytes as stored", async () => {
    const [tile] =
      (await http<{ partitions: Array<{ dataHandle: string; checksum: string; compressedDataSize: number }> }>(
        `/metadata/v1/catalogs/${DEMO}/layers/tiles/partitions?version=5&additionalFields=checksum,compressedDataSize`
      )).partitions
    const result = await run(Effect.gen(function*() {
      const blob = yield* BlobApi
      return {
        bytes: yield* blob.get(DEMO, "tiles", tile!.dataHandle),
        range: yield* blob.get(DEMO, "tiles", tile!.dataHandle, { start: 2, end: 9 }),
        streamed: Chunk.toReadonlyArray(yield* Stream.runCollect(blob.getStream(DEMO, "tiles", tile!.dataHandle))),
        head: yield* blob.head(DEMO, "tiles", tile!.dataHandle),
        missing: yield* blob.head(DEMO, "tiles", "no-such-handle")
      }
    }))
    expect(result.bytes.byteLength).toBe(tile!.compressedDataSize)
    expect(sha1(gunzipSync(result.bytes))).toBe(tile!.checksum)
    expect([...result.range]).toEqual([...result.bytes.subarray(2, 10)])
    expect(Buffer.concat(result.streamed)).toEqual(Buffer.from(result.bytes))
    expect(result.head).toMatchObject({ exists: true, contentLength: result.bytes.byteLength, contentEncoding: "gzip" })
    expect(result.missing.exists).toBe(false)
  })

  it("publish and volatile blob: a new version and an overwrite, as the service then serves them", async () => {
    const before = (await http<{ version: number }>(`/metadata/v1/catalogs/${DEMO}/versions/latest`)).version
    const payload = new TextEncoder().encode(`{"published":"by the client"}`)
    const published = await run(Effect.gen(function*() {
      const blob = yield* BlobApi
      const publish = yield* PublishApi
      yield* blob.put(DEMO, "places", "client-published-1", payload, { contentType: "application/json" })
      const publication = yield* publish.initPublication(DEMO, ["places"])
      yield* publish.uploadPartitions(DEMO, "places", publication.id, [{
        partition: "client-1",
        dataHandle: "client-published-1",
        dataSize: payload.byteLength,
        checksum: sha1(payload)
      }])
      yield* publish.submitPublication(DEMO, publication.id)
      return yield* publish.getPublication(DEMO, publication.id)
    }))
    expect(published.details.state).toBe("succeeded")
    expect(published.catalogVersion).toBe(before + 1)
    const listed = await http<{ partitions: Array<{ partition: string; dataHandle: string; version: number }> }>(
      `/query/v1/catalogs/${DEMO}/layers/places/partitions?partition=client-1&version=${before + 1}`
    )
    expect(listed.partitions).toMatchObject([{
      partition: "client-1",
      dataHandle: "client-published-1",
      version: before + 1
    }])

    const replaced = new TextEncoder().encode(`{"speedKmh":1}`)
    const afterPut = await run(Effect.gen(function*() {
      const volatile = yield* VolatileBlobApi
      yield* volatile.put(DEMO, "traffic", "traffic-0-1", replaced, { contentType: "application/json" })
      const read = yield* volatile.get(DEMO, "traffic", "traffic-0-1")
      yield* volatile.delete(DEMO, "traffic", "traffic-0-1")
      return { read, after: yield* volatile.head(DEMO, "traffic", "traffic-0-1") }
    }))
    expect(new TextDecoder().decode(afterPut.read)).toBe(`{"speedKmh":1}`)
    expect(afterPut.after.exists).toBe(false)
    expect((await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-0-1`)).status).toBe(404)
  })
})

describe("a large listing", () => {
  it("streams 200,000 partitions through the client with a flat heap (1,000,000: npm run bench)", async () => {
    const { count, ordered, growthMb } = await listingHeapGrowth(200_000)
    expect(count).toBe(200_000)
    expect(ordered).toBe(true)
    // The document is about 18 MB of JSON and 200,000 objects; holding either would retain far more.
    expect(growthMb).toBeLessThan(10)
  }, 120_000)
})
