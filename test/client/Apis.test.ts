import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import { BlobApi, VolatileBlobApi } from "../../src/client/BlobApi.ts"
import { ConcurrencyLimit } from "../../src/client/Concurrency.ts"
import { ConfigApi } from "../../src/client/ConfigApi.ts"
import { ApiError, CatalogNotFound, RegionUnavailable } from "../../src/client/Errors.ts"
import { PublishApi } from "../../src/client/PublishApi.ts"
import { QueryApi } from "../../src/client/QueryApi.ts"
import { outageLimit } from "../../src/client/Retry.ts"
import { CATALOG, CATALOG_ID, json, withPlatform } from "./support.ts"

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

const layer = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  layerType: "versioned",
  partitioning: { scheme: "generic" },
  ...extra
})
const catalog = (id: string) => ({
  id,
  hrn: `hrn:here:data::org:${id}`,
  name: id,
  layers: [layer("roads", { unknownLayerField: 1 })],
  version: 3,
  brandNewField: {}
})

describe("ConfigApi", () => {
  it.scopedLive("lists catalogs (summary and verbose) following results.next", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname === "/config/v1/catalogs") {
          const verbose = url.searchParams.get("verbose") === "true"
          const item = verbose
            ? catalog("a")
            : { href: "x/a", hrn: "hrn:here:data::org:a", title: "A", type: "urn:olp-types:catalog" }
          return json(res, 200, {
            results: { items: [item], next: `/config/v1/catalogs/context/page2?verbose=${verbose}` }
          })
        }
        if (url.pathname === "/config/v1/catalogs/context/page2") {
          const verbose = url.searchParams.get("verbose") === "true"
          const item = verbose ? catalog("b") : { href: "x/b", hrn: "hrn:here:data::org:b", title: "B" }
          return json(res, 200, { results: { items: [item] } })
        }
        return false
      },
      (server) =>
        Effect.gen(function*() {
          const config = yield* ConfigApi
          const summary = yield* config.listCatalogs({ params: { layerType: "versioned" } })
          expect(summary.map((c) => c.hrn)).toEqual(["hrn:here:data::org:a", "hrn:here:data::org:b"])
          const verbose = yield* config.listCatalogsVerbose()
          expect(verbose.map((c) => c.id)).toEqual(["a", "b"])
          expect(verbose[0]!.layers[0]!.id).toBe("roads")
          const urls = server.requests.filter((r) => r.url.startsWith("/config/")).map((r) => r.url)
          expect(urls).toEqual([
            "/config/v1/catalogs?layerType=versioned",
            "/config/v1/catalogs/context/page2?verbose=false",
            "/config/v1/catalogs?verbose=true",
            "/config/v1/catalogs/context/page2?verbose=true"
          ])
        })
    ))

  it.scopedLive("gets a catalog by raw HRN; 403 (plain text) and 404 become CatalogNotFound", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname === `/config/v1/catalogs/${CATALOG}`) return json(res, 200, catalog(CATALOG_ID))
        if (url.pathname === "/config/v1/catalogs/hrn:here:data::org:forbidden") {
          res.writeHead(403, { "content-type": "text/plain" })
          return void res.end(
            "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden"
          )
        }
        return false
      },
      () =>
        Effect.gen(function*() {
          const config = yield* ConfigApi
          const got = yield* config.getCatalog(CATALOG)
          expect(got.hrn).toBe(`hrn:here:data::org:${CATALOG_ID}`)
          expect(got.layers.map((l) => l.id)).toEqual(["roads"])
          const forbidden = failureOf(yield* Effect.exit(config.getCatalog("hrn:here:data::org:forbidden")))
          expect(forbidden).toBeInstanceOf(CatalogNotFound)
          expect((forbidden as CatalogNotFound).status).toBe(403)
          expect(forbidden.message).toContain("doesn't exist or access to this catalog is forbidden")
          const missing = failureOf(yield* Effect.exit(config.getCatalog("hrn:here:data::org:missing")))
          expect(missing).toBeInstanceOf(CatalogNotFound)
          expect((missing as CatalogNotFound).status).toBe(404)
        })
    ))
})

describe("QueryApi", () => {
  it.scopedLive("asks for ids in batches of 100 with repeated partition= parameters", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname !== `/query/v1/catalogs/${CATALOG_ID}/layers/roads/partitions`) return false
        const ids = url.searchParams.getAll("partition")
        if (ids.length > 100) return json(res, 400, { title: "Bad Request", status: 400 })
        json(res, 200, {
          partitions: ids.filter((id) => id !== "unknown").map((id) => ({
            partition: id,
            version: 4,
            dataHandle: `h-${id}`,
            x: 1
          }))
        })
      },
      (server) =>
        Effect.gen(function*() {
          const query = yield* QueryApi
          const ids = [...Array.from({ length: 249 }, (_, i) => `id:${i}`), "unknown"]
          const found = yield* query.partitionsById(CATALOG, "roads", ids, {
            version: 4,
            additionalFields: ["checksum"]
          })
          expect(found.map((p) => p.partition)).toEqual(ids.slice(0, 249))
          expect(found[0]).toEqual({ partition: "id:0", version: 4, dataHandle: "h-id:0" })
          const calls = server.requests.filter((r) => r.url.startsWith("/query/")).map((r) =>
            new URL(r.url, server.origin).searchParams
          )
          expect(calls.map((p) => p.getAll("partition").length)).toEqual([100, 100, 50])
          expect(calls.every((p) => p.get("version") === "4" && p.get("additionalFields") === "checksum")).toBe(true)
          expect(yield* query.partitionsById(CATALOG, "roads", [])).toEqual([])
        })
    ))
})

describe("BlobApi", () => {
  const content = Buffer.from(Array.from({ length: 100_000 }, (_, i) => i % 251))
  const BLOB = `/blobstore/v1/catalogs/${CATALOG_ID}/layers/roads/data`

  it.scopedLive("gets bytes, ranges, empty 204 blobs and HEAD info", () =>
    withPlatform(
      (url, req, res) => {
        if (url.pathname === `${BLOB}/empty`) return void res.writeHead(204).end()
        if (url.pathname === `${BLOB}/missing`) return json(res, 404, { title: "Not Found", status: 404 })
        if (url.pathname === `${BLOB}/ignores-range`) {
          return void res.writeHead(200, {
            "content-length": content.length
          }).end(content)
        }
        if (url.pathname !== `${BLOB}/h1`) return false
        const headers = { "content-type": "application/x-protobuf", "content-encoding": "gzip", etag: `"e1"` }
        if (req.method === "HEAD") {
          return void res.writeHead(200, { ...headers, "content-length": content.length }).end()
        }
        const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "")
        if (range) {
          const start = Number(range[1])
          const end = range[2] === "" ? content.length - 1 : Number(range[2])
          res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${content.length}` })
          return void res.end(content.subarray(start, end + 1))
        }
        res.writeHead(200, headers)
        res.end(content)
      },
      (server) =>
        Effect.gen(function*() {
          const blob = yield* BlobApi
          expect(Buffer.from(yield* blob.get(CATALOG, "roads", "h1")).equals(content)).toBe(true)
          expect(
            Buffer.from(yield* blob.get(CATALOG, "roads", "h1", { start: 10, end: 19 })).equals(
              content.subarray(10, 20)
            )
          ).toBe(true)
          expect(
            Buffer.from(yield* blob.get(CATALOG, "roads", "ignores-range", { start: 5, end: 9 })).equals(
              content.subarray(5, 10)
            )
          ).toBe(true)
          expect((yield* blob.get(CATALOG, "roads", "empty")).length).toBe(0)
          expect(yield* blob.head(CATALOG, "roads", "h1")).toEqual({
            exists: true,
            contentLength: content.length,
            contentType: "application/x-protobuf",
            contentEncoding: "gzip",
            etag: `"e1"`
          })
          expect((yield* blob.head(CATALOG, "roads", "missing")).exists).toBe(false)
          const error = failureOf(yield* Effect.exit(blob.get(CATALOG, "roads", "missing")))
          expect((error as ApiError).status).toBe(404)
          expect(server.requests.find((r) => r.url === `${BLOB}/h1` && r.headers.range === "bytes=10-19")).toBeDefined()
        })
    ))

  it.scopedLive("a blob stream cut mid-way resumes with Range and yields the exact bytes", () =>
    withPlatform(
      (url, req, res) => {
        if (url.pathname !== `${BLOB}/big`) return false
        const start = Number(/bytes=(\d+)-/.exec(req.headers.range ?? "")?.[1] ?? 0)
        const headers = start === 0
          ? { "content-length": content.length }
          : {
            "content-length": content.length - start,
            "content-range": `bytes ${start}-${content.length - 1}/${content.length}`
          }
        res.writeHead(start === 0 ? 200 : 206, headers)
        if (start === 0) {
          res.write(content.subarray(0, 30_000))
          return void setTimeout(() => res.socket?.destroy(), 50)
        }
        res.end(content.subarray(start))
      },
      (server) =>
        Effect.gen(function*() {
          const blob = yield* BlobApi
          const chunks = yield* Stream.runCollect(blob.getStream(CATALOG, "roads", "big"))
          const bytes = Buffer.concat(Chunk.toReadonlyArray(chunks))
          expect(createHash("sha1").update(bytes).digest("hex")).toBe(createHash("sha1").update(content).digest("hex"))
          expect(server.requests.filter((r) => r.url.startsWith(BLOB)).map((r) => r.headers.range)).toEqual([
            undefined,
            "bytes=30000-"
          ])
        })
    ))

  it.scopedLive("the fetcher of a multi-region export gives a blob up after the outage limit of 503s in a row, with RegionUnavailable", () =>
    withPlatform(
      (url, _req, res) => {
        if (!url.pathname.startsWith(BLOB)) return false
        if (url.pathname.endsWith("/up")) return void res.writeHead(200).end("up")
        json(res, 503, { title: "Service Unavailable", status: 503 })
      },
      (server) =>
        Effect.gen(function*() {
          const failed = yield* Deferred.make<unknown>()
          const fetched: Array<string> = []
          const { fetcher } = yield* Effect.locally(
            (yield* BlobApi).fetcher<{ dataHandle: string }>(CATALOG, "roads", {
              limit: ConcurrencyLimit.fixed(1),
              onBlob: (item) => void fetched.push(item.dataHandle),
              onFailure: (error) => Deferred.unsafeDone(failed, Exit.succeed(error))
            }),
            outageLimit,
            4
          )
          fetcher.push([{ dataHandle: "up" }, { dataHandle: "down" }], 0)
          const error = yield* Deferred.await(failed)
          expect(error).toBeInstanceOf(RegionUnavailable)
          expect((error as RegionUnavailable).failures).toBe(4)
          expect(fetched).toEqual(["up"])
          expect(server.requests.filter((r) => r.url === `${BLOB}/down`)).toHaveLength(4)
        })
    ))

  it.scopedLive("puts with Content-Type and Content-Encoding; volatile blobs use their own base URL and can be deleted", () =>
    withPlatform(
      (url, req, res, recorded) => {
        if (url.pathname.startsWith("/blobstore/") && req.method === "PUT") {
          return json(res, 200, {
            type: req.headers["content-type"],
            encoding: req.headers["content-encoding"] ?? null,
            size: recorded.body.length
          })
        }
        if (url.pathname.startsWith(`/volatile-blobstore/v1/catalogs/${CATALOG_ID}/layers/live/data/v1`)) {
          if (req.method === "PUT") return void res.writeHead(204).end()
          if (req.method === "DELETE") return void res.writeHead(204).end()
          return void res.writeHead(200).end("volatile!")
        }
        return false
      },
      (server) =>
        Effect.gen(function*() {
          const blob = yield* BlobApi
          const volatile = yield* VolatileBlobApi
          yield* blob.put(CATALOG, "roads", "new-handle", new TextEncoder().encode("hello"), {
            contentType: "text/plain",
            contentEncoding: "gzip"
          })
          yield* volatile.put(CATALOG, "live", "v1", new Uint8Array([1, 2, 3]), {
            contentType: "application/octet-stream"
          })
          expect(new TextDecoder().decode(yield* volatile.get(CATALOG, "live", "v1"))).toBe("volatile!")
          yield* volatile.delete(CATALOG, "live", "v1")
          const put = server.requests.find((r) => r.method === "PUT" && r.url.startsWith("/blobstore/"))!
          expect(put.url).toBe(`/blobstore/v1/catalogs/${CATALOG_ID}/layers/roads/data/new-handle`)
          expect(put.headers["content-type"]).toBe("text/plain")
          expect(put.headers["content-encoding"]).toBe("gzip")
          expect(put.headers["content-length"]).toBe("5")
          expect(put.body).toBe("hello")
          expect(server.requests.filter((r) => r.url.startsWith("/volatile-blobstore/")).map((r) => r.method)).toEqual([
            "PUT",
            "GET",
            "DELETE"
          ])
        })
    ))
})

describe("PublishApi", () => {
  it.scopedLive("init, upload partitions in batches, get, submit and cancel", () => {
    const uploaded: Array<number> = []
    const publication = {
      id: "v2-abc",
      catalogId: CATALOG_ID,
      catalogVersion: -1,
      layerIds: ["roads"],
      details: {
        state: "initialized",
        message: "Publication has been initialized",
        started: 1,
        modified: 1,
        expires: 2
      }
    }
    const PUBLISH = `/publish/v2/catalogs/${CATALOG_ID}`
    return withPlatform(
      (url, req, res, recorded) => {
        if (url.pathname === `${PUBLISH}/publications` && req.method === "POST") {
          return json(res, 200, publication, { location: "x" })
        }
        if (url.pathname === `${PUBLISH}/layers/roads/publications/v2-abc/partitions` && req.method === "POST") {
          uploaded.push(JSON.parse(recorded.body).partitions.length)
          return void res.writeHead(204).end()
        }
        if (url.pathname === `${PUBLISH}/publications/v2-abc`) {
          if (req.method === "GET") {
            return json(res, 200, { ...publication, details: { ...publication.details, state: "submitted" } })
          }
          return void res.writeHead(204).end()
        }
        return false
      },
      (server) =>
        Effect.gen(function*() {
          const publish = yield* PublishApi
          const created = yield* publish.initPublication(CATALOG, ["roads"])
          expect(created.id).toBe("v2-abc")
          const partitions = Array.from({ length: 25 }, (_, i) => ({ partition: `${i}`, dataHandle: `h${i}` }))
          yield* publish.uploadPartitions(CATALOG, "roads", created.id, partitions, { batchSize: 10 })
          expect(uploaded).toEqual([10, 10, 5])
          yield* publish.submitPublication(CATALOG, created.id)
          expect((yield* publish.getPublication(CATALOG, created.id)).details.state).toBe("submitted")
          yield* publish.cancelPublication(CATALOG, created.id)
          const calls = server.requests.filter((r) => r.url.startsWith(PUBLISH)).map((r) =>
            `${r.method} ${r.url.slice(PUBLISH.length)}`
          )
          expect(calls).toEqual([
            "POST /publications",
            "POST /layers/roads/publications/v2-abc/partitions",
            "POST /layers/roads/publications/v2-abc/partitions",
            "POST /layers/roads/publications/v2-abc/partitions",
            "PUT /publications/v2-abc",
            "GET /publications/v2-abc",
            "DELETE /publications/v2-abc"
          ])
          expect(JSON.parse(server.requests.find((r) => r.url === `${PUBLISH}/publications`)!.body)).toEqual({
            layerIds: ["roads"]
          })
        })
    )
  })
})
