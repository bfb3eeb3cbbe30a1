import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import type { ServerResponse } from "node:http"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { ResponseDecodeError, RetryBudgetExhausted, TransportError } from "../../src/client/Errors.ts"
import { MetadataApi } from "../../src/client/MetadataApi.ts"
import type { Partition } from "../../src/domain/Partition.ts"
import { CATALOG, CATALOG_ID, json, listingDocument, withPlatform } from "./support.ts"

const METADATA = `/metadata/v1/catalogs/${CATALOG_ID}`

const makePartitions = (n: number, prefix = "p") =>
  Array.from({ length: n }, (_, i) => ({ partition: `${prefix}${i}`, version: 7, dataHandle: `handle-${prefix}${i}` }))

const collect = <A, E, R>(stream: Stream.Stream<A, E, R>) =>
  Effect.map(Stream.runCollect(stream), Chunk.toReadonlyArray)

const list = (options?: Parameters<MetadataApi["Type"]["partitions"]>[2]) =>
  Effect.flatMap(MetadataApi, (metadata) => collect(metadata.partitions(CATALOG, "roads", options)))

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

/** Serves `doc` honouring `Range: bytes=N-` with 206. */
const serveRange = (res: ServerResponse, doc: string, range: string | undefined) => {
  const start = range === undefined ? 0 : Number(/bytes=(\d+)-/.exec(range)![1])
  if (start === 0) {
    res.writeHead(200, { "content-type": "application/json", "content-length": doc.length })
  } else {
    res.writeHead(206, {
      "content-type": "application/json",
      "content-range": `bytes ${start}-${doc.length - 1}/${doc.length}`,
      "content-length": doc.length - start
    })
  }
  res.end(doc.slice(start))
}

/** Sends `text`, then cuts the connection once it had time to arrive. */
const sendThenCut = (res: ServerResponse, status: number, headers: Record<string, string | number>, text: string) => {
  res.writeHead(status, headers)
  res.write(text)
  setTimeout(() => res.socket?.destroy(), 50)
}

describe("MetadataApi.partitions", () => {
  it.scopedLive("lists through a base URL with a bare catalog id and sends version, part and additionalFields", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname !== `${METADATA}/layers/roads/partitions`) return false
        json(res, 200, {
          partitions: [
            {
              partition: "1",
              version: 7,
              dataHandle: "h1",
              dataSize: 10,
              checksum: "c1",
              unknownField: { nested: [1, "]"] }
            },
            { partition: "2", version: 6, dataHandle: "", layer: "roads", crc: "c3f276d7", compressedDataSize: 5 }
          ],
          somethingNew: true
        })
      },
      (server) =>
        Effect.gen(function*() {
          const partitions = yield* list({ version: 7, part: "PART-1", additionalFields: ["dataSize", "checksum"] })
          expect(partitions).toEqual([
            { partition: "1", version: 7, dataHandle: "h1", dataSize: 10, checksum: "c1" },
            { partition: "2", version: 6, dataHandle: "", layer: "roads", crc: "c3f276d7", compressedDataSize: 5 }
          ])
          const lookup = server.requests.find((r) => r.url.startsWith("/lookup/"))!
          expect(lookup.url).toBe(`/lookup/v1/resources/${CATALOG}/apis`)
          const listing = new URL(server.requests.find((r) => r.url.startsWith("/metadata/"))!.url, server.origin)
          expect(listing.pathname).toBe(`${METADATA}/layers/roads/partitions`)
          expect([...listing.searchParams]).toEqual([
            ["version", "7"],
            ["part", "PART-1"],
            ["additionalFields", "dataSize,checksum"]
          ])
        })
    ))

  it.scopedLive("works with base URLs that carry the full HRN and omits version for volatile layers", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname !== `/metadata/v1/catalogs/${CATALOG}/layers/live/partitions`) return false
        json(res, 200, { partitions: [{ partition: "a", version: -1, dataHandle: "h" }] })
      },
      (server) =>
        Effect.gen(function*() {
          const metadata = yield* MetadataApi
          expect(yield* collect(metadata.partitions(CATALOG, "live"))).toEqual([{
            partition: "a",
            version: -1,
            dataHandle: "h"
          }])
          const listing = new URL(server.requests.find((r) => r.url.startsWith("/metadata/"))!.url, server.origin)
          expect(listing.search).toBe("")
        }),
      { catalogInBaseUrl: "hrn" }
    ))

  it.scopedLive("a connection cut mid-element resumes with Range from the end of the last complete partition (206)", () => {
    const doc = listingDocument(makePartitions(100))
    const cutAt = doc.indexOf(`"handle-p50"`) + 4
    const resumeAt = doc.indexOf(`,{"partition":"p50"`)
    return withPlatform(
      (url, req, res) => {
        if (!url.pathname.endsWith("/layers/roads/partitions")) return false
        if (req.headers.range === undefined) {
          return sendThenCut(
            res,
            200,
            { "content-type": "application/json", "content-length": doc.length },
            doc.slice(0, cutAt)
          )
        }
        serveRange(res, doc, req.headers.range)
      },
      (server) =>
        Effect.gen(function*() {
          const partitions = yield* list({ version: 7 })
          expect(partitions.map((p) => p.partition)).toEqual(makePartitions(100).map((p) => p.partition))
          const ranges = server.requests.filter((r) => r.url.startsWith("/metadata/")).map((r) => r.headers.range)
          expect(ranges).toEqual([undefined, `bytes=${resumeAt}-`])
        })
    )
  })

  it.scopedLive("a server that answers 200 to the Range request is skipped to the offset", () => {
    const doc = listingDocument(makePartitions(100))
    const cutAt = doc.indexOf(`"handle-p70"`)
    return withPlatform(
      (url, req, res) => {
        if (!url.pathname.endsWith("/layers/roads/partitions")) return false
        if (req.headers.range === undefined) {
          return sendThenCut(res, 200, { "content-length": doc.length }, doc.slice(0, cutAt))
        }
        res.writeHead(200, { "content-type": "application/json", "content-length": doc.length })
        res.end(doc)
      },
      (server) =>
        Effect.gen(function*() {
          const partitions = yield* list({ version: 7 })
          expect(partitions.map((p) => p.partition)).toEqual(makePartitions(100).map((p) => p.partition))
          expect(server.requests.filter((r) => r.url.startsWith("/metadata/"))).toHaveLength(2)
        })
    )
  })

  it.scopedLive("a body that ends early without an error (no Content-Length) is resumed too", () => {
    const doc = listingDocument(makePartitions(50))
    const cutAt = doc.indexOf(`"p31"`)
    return withPlatform(
      (url, req, res) => {
        if (!url.pathname.endsWith("/layers/roads/partitions")) return false
        if (req.headers.range === undefined) {
          res.writeHead(200, { "content-type": "application/json" })
          return void res.end(doc.slice(0, cutAt))
        }
        serveRange(res, doc, req.headers.range)
      },
      (server) =>
        Effect.gen(function*() {
          const partitions = yield* list({ version: 7 })
          expect(partitions).toHaveLength(50)
          expect(new Set(partitions.map((p) => p.partition)).size).toBe(50)
          expect(server.requests.filter((r) => r.url.startsWith("/metadata/")).map((r) => r.headers.range)).toEqual([
            undefined,
            `bytes=${doc.indexOf(`,{"partition":"p31"`)}-`
          ])
        })
    )
  })

  it.scopedLive("a listing cut every 4 kB still yields every partition exactly once (progress renews the retry budget)", () => {
    const doc = listingDocument(makePartitions(1000))
    return withPlatform(
      (url, req, res) => {
        if (!url.pathname.endsWith("/layers/roads/partitions")) return false
        const start = req.headers.range === undefined ? 0 : Number(/bytes=(\d+)-/.exec(req.headers.range)![1])
        const end = Math.min(doc.length, start + 4096)
        const headers = start === 0
          ? { "content-length": doc.length }
          : { "content-range": `bytes ${start}-${doc.length - 1}/${doc.length}`, "content-length": doc.length - start }
        if (end === doc.length) {
          res.writeHead(start === 0 ? 200 : 206, headers)
          return void res.end(doc.slice(start))
        }
        sendThenCut(res, start === 0 ? 200 : 206, headers, doc.slice(start, end))
      },
      (server) =>
        Effect.gen(function*() {
          const partitions = yield* list({ version: 7 })
          expect(partitions.map((p) => p.partition)).toEqual(makePartitions(1000).map((p) => p.partition))
          expect(server.requests.filter((r) => r.url.startsWith("/metadata/")).length).toBeGreaterThan(10)
        })
    )
  })

  it.scopedLive("a listing cut again and again before the next partition is complete gives up with RetryBudgetExhausted (bytes are no progress)", () => {
    const doc = listingDocument(makePartitions(100))
    const stuckAt = doc.indexOf(`,{"partition":"p3"`)
    return withPlatform(
      (url, req, res) => {
        if (!url.pathname.endsWith("/layers/roads/partitions")) return false
        const start = req.headers.range === undefined ? 0 : Number(/bytes=(\d+)-/.exec(req.headers.range)![1])
        const headers = start === 0
          ? { "content-length": doc.length }
          : { "content-range": `bytes ${start}-${doc.length - 1}/${doc.length}`, "content-length": doc.length - start }
        // The first answer breaks off inside p3, every later one 10 bytes after where it resumes.
        sendThenCut(res, start === 0 ? 200 : 206, headers, doc.slice(start, start === 0 ? stuckAt + 10 : start + 10))
      },
      (server) =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          const metadata = yield* MetadataApi
          const error = failureOf(
            yield* Effect.exit(Stream.runForEach(metadata.partitions(CATALOG, "roads", { version: 7 }), (p) =>
              Effect.sync(() =>
                void seen.push(p.partition)
              )))
          )
          expect(seen).toEqual(["p0", "p1", "p2"])
          expect(error).toBeInstanceOf(RetryBudgetExhausted)
          expect((error as RetryBudgetExhausted).retries).toBe(5)
          expect((error as RetryBudgetExhausted).lastError).toBeInstanceOf(TransportError)
          const ranges = server.requests.filter((r) =>
            r.url.startsWith("/metadata/")
          ).map((r) => r.headers.range)
          expect(ranges).toEqual([undefined, ...Array.from({ length: 5 }, () => `bytes=${stuckAt}-`)])
        })
    )
  })

  it.scopedLive("follows volatile next links (relative to the base URL, then absolute)", () =>
    withPlatform(
      (url, _req, res) => {
        if (!url.pathname.endsWith("/layers/live/partitions")) return false
        const page = url.searchParams.get("page") ?? "1"
        const origin = `http://${_req.headers.host}`
        if (page === "1") {
          return json(res, 200, {
            partitions: makePartitions(2, "a"),
            next: "/layers/live/partitions?page=2"
          })
        }
        if (page === "2") {
          return json(res, 200, {
            next: `${origin}${METADATA}/layers/live/partitions?page=3`,
            partitions: makePartitions(2, "b")
          })
        }
        json(res, 200, { partitions: makePartitions(1, "c") })
      },
      (server) =>
        Effect.gen(function*() {
          const metadata = yield* MetadataApi
          const partitions = yield* collect(metadata.partitions(CATALOG, "live"))
          expect(partitions.map((p) => p.partition)).toEqual(["a0", "a1", "b0", "b1", "c0"])
          expect(server.requests.filter((r) => r.url.startsWith("/metadata/")).map((r) => r.url)).toEqual([
            `${METADATA}/layers/live/partitions`,
            `${METADATA}/layers/live/partitions?page=2`,
            `${METADATA}/layers/live/partitions?page=3`
          ])
        })
    ))

  it.scopedLive("a malformed listing fails with ResponseDecodeError", () =>
    withPlatform(
      (url, _req, res) => {
        if (!url.pathname.endsWith("/partitions")) return false
        res.writeHead(200, { "content-type": "application/json" })
        res.end(`{"partitions":[{"partition":"1","version":1,"dataHandle":"h"},{"partition":"2"}]}`)
      },
      () =>
        Effect.gen(function*() {
          const error = failureOf(yield* Effect.exit(list({ version: 1 })))
          expect(error).toBeInstanceOf(ResponseDecodeError)
          expect((error as ResponseDecodeError).reason).toContain(`partition 2 has no integer "version"`)
        })
    ))

  it.scopedLive("parses incrementally: the first partitions arrive before the server sends the rest", () =>
    Effect.gen(function*() {
      const firstSeen = yield* Deferred.make<void>()
      let release: () => void = () => {}
      const released = new Promise<void>((resolve) => (release = resolve))
      const head = `{"partitions":[` + makePartitions(1000).map((p) => JSON.stringify(p)).join(",")
      const tail = "," + makePartitions(1000, "q").map((p) => JSON.stringify(p)).join(",") + "]}"
      yield* withPlatform(
        (url, _req, res) => {
          if (!url.pathname.endsWith("/partitions")) return false
          res.writeHead(200, { "content-type": "application/json" })
          res.write(head)
          void released.then(() => res.end(tail))
        },
        () =>
          Effect.gen(function*() {
            const metadata = yield* MetadataApi
            let count = 0
            yield* metadata.partitions(CATALOG, "roads", { version: 7 }).pipe(
              Stream.runForEach(() =>
                Effect.sync(() => {
                  if (++count === 1) {
                    Deferred.unsafeDone(firstSeen, Exit.void)
                    release()
                  }
                })
              ),
              Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error("the listing was not streamed") })
            )
            expect(count).toBe(2000)
          })
      )
      expect(yield* Deferred.isDone(firstSeen)).toBe(true)
    }))

  it.scopedLive("streams a 200k-partition listing with little heap growth", () => {
    setFlagsFromString("--expose-gc")
    const gc = runInNewContext("gc") as () => void
    const total = 200_000
    const perChunk = 1000
    const element = (i: number) =>
      JSON.stringify({
        partition: `${i}`,
        version: 42,
        dataHandle: `c0ffee00-${i}-4a1b-9c2d-000000000000`,
        dataSize: i,
        checksum: "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        extra: { note: "padding to make the document larger" }
      })
    let documentBytes = 0
    return withPlatform(
      (url, _req, res) => {
        if (!url.pathname.endsWith("/partitions")) return false
        res.writeHead(200, { "content-type": "application/json" })
        let i = 0
        const pump = () => {
          while (i < total) {
            const parts: Array<string> = []
            for (const end = Math.min(total, i + perChunk); i < end; i++) {
              parts.push((i === 0 ? `{"partitions":[` : ",") + element(i))
            }
            const text = parts.join("") + (i === total ? "]}" : "")
            documentBytes += text.length
            if (!res.write(text)) return void res.once("drain", pump)
          }
          res.end()
        }
        pump()
      },
      () =>
        Effect.gen(function*() {
          const metadata = yield* MetadataApi
          gc()
          const before = process.memoryUsage().heapUsed
          let peak = 0
          let count = 0
          let last: Partition | undefined
          yield* metadata.partitions(CATALOG, "roads", { version: 42 }).pipe(
            Stream.runForEach((p) =>
              Effect.sync(() => {
                last = p
                if (++count % 50_000 === 0) {
                  gc()
                  peak = Math.max(peak, process.memoryUsage().heapUsed - before)
                }
              })
            )
          )
          expect(count).toBe(total)
          expect(last).toEqual({
            partition: `${total - 1}`,
            version: 42,
            dataHandle: `c0ffee00-${total - 1}-4a1b-9c2d-000000000000`,
            dataSize: total - 1,
            checksum: "da39a3ee5e6b4b0d3255bfef95601890afd80709"
          })
          expect(documentBytes).toBeGreaterThan(40_000_000)
          // The whole document (or the parsed array) would be tens of MB; a stream holds a few chunks.
          expect(peak).toBeLessThan(documentBytes / 10)
        })
    )
  })
})

describe("MetadataApi versions and parts", () => {
  it.scopedLive("pages versions 1000 at a time over (startVersion, endVersion]", () =>
    withPlatform(
      (url, _req, res) => {
        if (url.pathname !== `${METADATA}/versions`) return false
        const start = Number(url.searchParams.get("startVersion"))
        const end = Number(url.searchParams.get("endVersion"))
        if (end - start > 1000) return json(res, 400, { title: "Bad Request", status: 400 })
        const versions = []
        for (let v = start + 1; v <= end; v++) {
          versions.push({
            version: v,
            timestamp: 1000 + v,
            dependencies: [],
            extra: "x"
          })
        }
        json(res, 200, { versions })
      },
      (server) =>
        Effect.gen(function*() {
          const metadata = yield* MetadataApi
          const versions = yield* collect(metadata.versions(CATALOG, { startVersion: -1, endVersion: 2500 }))
          expect(versions.map((v) => v.version)).toEqual(Array.from({ length: 2501 }, (_, i) => i))
          expect(versions[0]).toEqual({ version: 0, timestamp: 1000, dependencies: [] })
          const calls = server.requests
            .filter((r) => r.url.startsWith(`${METADATA}/versions`))
            .map((r) => Object.fromEntries(new URL(r.url, server.origin).searchParams))
          expect(calls).toEqual([
            { startVersion: "-1", endVersion: "999" },
            { startVersion: "999", endVersion: "1999" },
            { startVersion: "1999", endVersion: "2500" }
          ])
          expect(yield* collect(metadata.versions(CATALOG, { startVersion: 5, endVersion: 5 }))).toEqual([])
        })
    ))

  it.scopedLive("latest, minimum, set minimum, layerVersions, parts and changes", () =>
    withPlatform(
      (url, req, res, recorded) => {
        const path = url.pathname.slice(METADATA.length)
        if (path === "/versions/latest") return json(res, 200, { version: 12 })
        if (path === "/versions/minimum" && req.method === "GET") return json(res, 200, { version: 3 })
        if (path === "/versions/minimum" && req.method === "POST") {
          if (JSON.parse(recorded.body).version !== 9) return json(res, 400, { title: "Bad Request", status: 400 })
          res.writeHead(204)
          return void res.end()
        }
        if (path === "/layerVersions") {
          return json(res, 200, {
            version: Number(url.searchParams.get("version")),
            layerVersions: [{ layer: "roads", version: 11, timestamp: 5 }]
          })
        }
        if (path === "/layers/roads/partitions/parts") return json(res, 200, { parts: ["P1", "P2"] })
        if (path === "/layers/roads/changes/parts") return json(res, 200, { parts: ["C1"] })
        if (path === "/layers/roads/changes") {
          return json(res, 200, {
            partitions: [{ partition: "x", version: 12, dataHandle: "" }]
          })
        }
        return false
      },
      (server) =>
        Effect.gen(function*() {
          const metadata = yield* MetadataApi
          expect(yield* metadata.latestVersion(CATALOG)).toBe(12)
          expect(yield* metadata.minimumVersion(CATALOG)).toBe(3)
          yield* metadata.setMinimumVersion(CATALOG, 9)
          expect(yield* metadata.layerVersions(CATALOG, 12)).toEqual({
            version: 12,
            layerVersions: [{ layer: "roads", version: 11, timestamp: 5 }]
          })
          expect(yield* metadata.partitionParts(CATALOG, "roads", { numRequestedParts: 4, version: 12 })).toEqual([
            "P1",
            "P2"
          ])
          expect(
            yield* metadata.changesParts(CATALOG, "roads", { numRequestedParts: 2, startVersion: 10, endVersion: 12 })
          ).toEqual(["C1"])
          const changes = yield* collect(
            metadata.changes(CATALOG, "roads", { startVersion: 10, endVersion: 12, part: "C1" })
          )
          expect(changes).toEqual([{ partition: "x", version: 12, dataHandle: "" }])
          const urls = server.requests.filter((r) => r.url.startsWith(METADATA)).map((r) =>
            `${r.method} ${r.url.slice(METADATA.length)}`
          )
          expect(urls).toEqual([
            "GET /versions/latest?startVersion=-1",
            "GET /versions/minimum",
            "POST /versions/minimum",
            "GET /layerVersions?version=12",
            "GET /layers/roads/partitions/parts?numRequestedParts=4&version=12",
            "GET /layers/roads/changes/parts?numRequestedParts=2&startVersion=10&endVersion=12",
            "GET /layers/roads/changes?part=C1&startVersion=10&endVersion=12"
          ])
        })
    ))
})
