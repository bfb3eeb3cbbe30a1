/**
 * The blob and volatile-blob APIs over HTTP: bytes that match the listed checksums (also for the
 * gzip layer), ranges, errors, HEAD, immutable versioned uploads, and mutable volatile blobs.
 */
import { gunzipSync, gzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import {
  blob,
  DEMO,
  type Entry,
  expectDataError,
  expectJson,
  expectStatus,
  listing,
  rawRequest,
  sha1
} from "./helpers.ts"

/** HERE tile id -> bounding box, computed here from the Morton code (facts §12), not by the service's code. */
const tileBox = (id: number) => {
  const bits = id.toString(2)
  const level = (bits.length - 1) / 2
  let column = 0
  let row = 0
  for (let i = 0; i < level; i++) {
    column |= Number((BigInt(id) >> BigInt(2 * i)) & 1n) << i
    row |= Number((BigInt(id) >> BigInt(2 * i + 1)) & 1n) << i
  }
  const size = 360 / 2 ** level
  return {
    level,
    west: -180 + column * size,
    south: -90 + row * size,
    east: -180 + (column + 1) * size,
    north: -90 + (row + 1) * size
  }
}

describe("blob API", () => {
  let svc: TestService
  let token: string
  let places: ReadonlyArray<Entry>
  let tiles: ReadonlyArray<Entry>

  const put = (layer: string, handle: string, body: Uint8Array | string, headers: Record<string, string>) =>
    svc.get(blob(layer, handle), { method: "PUT", headers, body })
  const bytesOf = async (res: Response) => new Uint8Array(await res.arrayBuffer())

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 120, versions: 3 } })
    token = await svc.token()
    places = (await listing(svc, "places", "version=2&additionalFields=dataSize,checksum")).partitions
    tiles = (await listing(svc, "tiles", "version=2&additionalFields=dataSize,checksum,compressedDataSize")).partitions
  })
  afterAll(() => svc?.close())

  describe("reading", () => {
    it("serves bytes whose sha1 and size are the listed checksum and dataSize", async () => {
      expect(places.length).toBeGreaterThan(100)
      for (const e of places) {
        const res = await svc.get(blob("places", e.dataHandle))
        const bytes = await bytesOf(res)
        expect(res.status).toBe(200)
        expect(res.headers.get("content-type")).toBe("application/json")
        expect(Number(res.headers.get("content-length"))).toBe(e.dataSize)
        expect(bytes.byteLength).toBe(e.dataSize)
        expect(sha1(bytes), e.partition).toBe(e.checksum)
      }
    })

    it("serves the gzip layer compressed with Content-Encoding: gzip; the checksum is over the uncompressed bytes", async () => {
      expect(tiles.length).toBeGreaterThan(100)
      for (const e of tiles) {
        // node:http does not decompress: these are the stored bytes.
        const raw = await rawRequest(`${svc.url}${blob("tiles", e.dataHandle)}`, {
          authorization: `Bearer ${token}`,
          "accept-encoding": "gzip"
        })
        expect(raw.error).toBeUndefined()
        expect(raw.status).toBe(200)
        expect(raw.headers["content-encoding"]).toBe("gzip")
        expect(raw.headers["content-type"]).toBe("application/geo+json")
        expect([raw.body[0], raw.body[1]]).toEqual([0x1f, 0x8b])
        expect(raw.body.byteLength).toBe(e.compressedDataSize)
        expect(Number(raw.headers["content-length"])).toBe(e.compressedDataSize)
        const plain = gunzipSync(raw.body)
        expect(plain.byteLength).toBe(e.dataSize)
        expect(sha1(plain), e.partition).toBe(e.checksum)

        // The content is GeoJSON of this very tile: its points lie in the tile's bounding box.
        const doc = JSON.parse(plain.toString("utf8")) as {
          type: string
          tile: number
          features: Array<{ geometry: { coordinates: [number, number] } }>
        }
        expect(doc.type).toBe("FeatureCollection")
        expect(String(doc.tile)).toBe(e.partition)
        const box = tileBox(Number(e.partition))
        expect(box.level).toBe(12)
        expect(doc.features.length).toBeGreaterThan(0)
        for (const f of doc.features) {
          const [lon, lat] = f.geometry.coordinates
          expect(lon).toBeGreaterThanOrEqual(box.west)
          expect(lon).toBeLessThanOrEqual(box.east)
          expect(lat).toBeGreaterThanOrEqual(box.south)
          expect(lat).toBeLessThanOrEqual(box.north)
        }
      }
    })

    it("is decompressed transparently by fetch, which still reports Content-Encoding: gzip", async () => {
      for (const e of tiles.slice(0, 10)) {
        const res = await svc.get(blob("tiles", e.dataHandle))
        const bytes = await bytesOf(res)
        expect(res.status).toBe(200)
        expect(res.headers.get("content-encoding")).toBe("gzip")
        // What fetch hands over is the uncompressed document.
        expect(bytes.byteLength).toBe(e.dataSize)
        expect(sha1(bytes)).toBe(e.checksum)
      }
    })

    it("has the level-12 tile of Berlin (52.52 N, 13.405 E = 23618402, facts §12) in the Berlin tile layer", async () => {
      const box = tileBox(23618402)
      expect(box.west).toBeLessThanOrEqual(13.405)
      expect(box.east).toBeGreaterThan(13.405)
      expect(box.south).toBeLessThanOrEqual(52.52)
      expect(box.north).toBeGreaterThan(52.52)
      const first = (await listing(svc, "tiles", "version=0")).partitions.map((t) => t.partition)
      expect(first).toContain("23618402")
    })

    it("serves single byte ranges with 206 and Content-Range", async () => {
      const e = places[3]!
      const full = await bytesOf(await svc.get(blob("places", e.dataHandle)))
      const size = full.byteLength
      for (
        const [range, start, end] of [
          ["bytes=10-99", 10, 99],
          ["bytes=100-", 100, size - 1],
          ["bytes=-50", size - 50, size - 1],
          [`bytes=0-${size + 500}`, 0, size - 1],
          [`bytes=${size - 1}-${size - 1}`, size - 1, size - 1]
        ] as const
      ) {
        const res = await svc.get(blob("places", e.dataHandle), { headers: { range } })
        const part = await bytesOf(res)
        expect(res.status, range).toBe(206)
        expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/${size}`)
        expect(Buffer.compare(Buffer.from(part), Buffer.from(full.subarray(start, end + 1))), range).toBe(0)
      }
      // The query form works as the header does.
      const viaQuery = await svc.get(`${blob("places", e.dataHandle)}?range=${encodeURIComponent("bytes=20-29")}`)
      expect(viaQuery.status).toBe(206)
      expect(Buffer.from(await bytesOf(viaQuery)).toString()).toBe(Buffer.from(full.subarray(20, 30)).toString())
    })

    it("serves ranges of a gzip blob over the stored (compressed) bytes", async () => {
      const e = tiles[0]!
      const auth = { authorization: `Bearer ${token}` }
      const whole = await rawRequest(`${svc.url}${blob("tiles", e.dataHandle)}`, auth)
      const part = await rawRequest(`${svc.url}${blob("tiles", e.dataHandle)}`, { ...auth, range: "bytes=5-40" })
      expect(part.status).toBe(206)
      expect(part.headers["content-range"]).toBe(`bytes 5-40/${whole.body.byteLength}`)
      expect(Buffer.compare(part.body, whole.body.subarray(5, 41))).toBe(0)
    })

    it("answers unsatisfiable or malformed ranges with 416 and Content-Range bytes */size", async () => {
      const e = places[4]!
      for (
        const range of [
          `bytes=${e.dataSize}-`,
          `bytes=${e.dataSize! + 10}-${e.dataSize! + 20}`,
          "bytes=abc",
          "bytes=9-3",
          "bytes=-",
          "items=0-3"
        ]
      ) {
        const res = await svc.get(blob("places", e.dataHandle), { headers: { range } })
        const body = await expectJson<{ status: number }>(res, 416)
        expect(body.status, range).toBe(416)
        expect(res.headers.get("content-range")).toBe(`bytes */${e.dataSize}`)
      }
    })

    it("answers an unknown handle with 404 and a malformed one with 400", async () => {
      await expectDataError(await svc.get(blob("places", "0000-no-such-handle")), 404, "dataHandle")
      // A handle of another layer does not exist in this one.
      await expectDataError(await svc.get(blob("tiles", places[0]!.dataHandle)), 404, "dataHandle")
      for (const bad of ["bad_handle", "a%2Fb", "x%00y", "h%20h", "x".repeat(601), "%C3%A9t%C3%A9"]) {
        await expectDataError(await svc.get(blob("places", bad)), 400, "dataHandle")
      }
    })

    it("accepts data handles of up to 600 characters in the path", async () => {
      const long = `long-${"0123456789abcdef".repeat(40)}`.slice(0, 600)
      expect(long).toHaveLength(600)
      await expectDataError(await svc.get(blob("places", long)), 404, "dataHandle")
      const body = new TextEncoder().encode(`{"long":true}`)
      await expectStatus(await put("places", long, body, { "content-type": "application/json" }), 200)
      expect(sha1(await bytesOf(await svc.get(blob("places", long))))).toBe(sha1(body))
      await expectDataError(
        await put("places", `${long}x`, body, { "content-type": "application/json" }),
        400,
        "dataHandle"
      )
    })

    it("answers HEAD with the status and length of GET and no body", async () => {
      const e = places[5]!
      const res = await svc.get(blob("places", e.dataHandle), { method: "HEAD" })
      expect(res.status).toBe(200)
      expect(Number(res.headers.get("content-length"))).toBe(e.dataSize)
      expect((await bytesOf(res)).byteLength).toBe(0)
      const ranged = await svc.get(blob("places", e.dataHandle), { method: "HEAD", headers: { range: "bytes=0-9" } })
      expect(ranged.status).toBe(206)
      expect(ranged.headers.get("content-length")).toBe("10")
      expect((await svc.get(blob("places", "no-such-handle-1"), { method: "HEAD" })).status).toBe(404)
    })

    it("answers If-None-Match with the ETag with 304", async () => {
      const e = places[6]!
      const first = await svc.get(blob("places", e.dataHandle))
      await first.arrayBuffer()
      const etag = first.headers.get("etag")
      expect(etag).toMatch(/^".+"$/)
      const again = await svc.get(blob("places", e.dataHandle), { headers: { "if-none-match": etag! } })
      expect(again.status).toBe(304)
      expect((await bytesOf(again)).byteLength).toBe(0)
    })

    it("serves the same bytes under the /blob/v1 path", async () => {
      const e = places[7]!
      const res = await svc.get(`/blob/v1/catalogs/${DEMO}/layers/places/data/${e.dataHandle}`)
      expect(sha1(await bytesOf(res))).toBe(e.checksum)
    })
  })

  describe("writing versioned blobs", () => {
    it("stores a new handle with 200, serves it back, and refuses the same handle again with 409", async () => {
      const body = new TextEncoder().encode(JSON.stringify({ id: "uploaded-1", n: 1 }))
      const res = await put("places", "uploaded-1", body, { "content-type": "application/json" })
      await expectStatus(res, 200)
      const back = await bytesOf(await svc.get(blob("places", "uploaded-1")))
      expect(sha1(back)).toBe(sha1(body))
      expect((await svc.get(blob("places", "uploaded-1"), { method: "HEAD" })).status).toBe(200)

      const again = await put("places", "uploaded-1", new TextEncoder().encode(`{"other":true}`), {
        "content-type": "application/json"
      })
      await expectDataError(again, 409, "dataHandle")
      // Blobs are immutable: the first bytes stay.
      expect(sha1(await bytesOf(await svc.get(blob("places", "uploaded-1"))))).toBe(sha1(body))
    })

    it("refuses a Content-Type other than the layer's, and a Content-Encoding the layer does not use, with 400", async () => {
      await expectDataError(
        await put("places", "uploaded-2", `{"a":1}`, { "content-type": "text/plain" }),
        400,
        "Content-Type"
      )
      await expectDataError(await put("places", "uploaded-2", new Uint8Array([123, 125]), {}), 400, "Content-Type")
      await expectDataError(
        await put("places", "uploaded-2", `{"a":1}`, {
          "content-type": "application/json",
          "content-encoding": "gzip"
        }),
        400,
        "Content-Encoding"
      )
      await expectDataError(
        await put("tiles", "uploaded-2", gzipSync(`{"a":1}`), {
          "content-type": "application/json",
          "content-encoding": "gzip"
        }),
        400,
        "Content-Type"
      )
      expect((await svc.get(blob("places", "uploaded-2"), { method: "HEAD" })).status).toBe(404)
      expect((await svc.get(blob("tiles", "uploaded-2"), { method: "HEAD" })).status).toBe(404)
    })

    it("checks X-HERE-Digest against the body", async () => {
      const body = new TextEncoder().encode(`{"digest":"checked"}`)
      await expectDataError(
        await put("places", "uploaded-3", body, {
          "content-type": "application/json",
          "x-here-digest": `SHA1:${sha1("something else")}`
        }),
        400,
        "X-HERE-Digest"
      )
      expect((await svc.get(blob("places", "uploaded-3"), { method: "HEAD" })).status).toBe(404)
      await expectStatus(
        await put("places", "uploaded-3", body, {
          "content-type": "application/json",
          "x-here-digest": `SHA1:${sha1(body)}`
        }),
        200
      )
      expect(sha1(await bytesOf(await svc.get(blob("places", "uploaded-3"))))).toBe(sha1(body))
    })

    it("stores a gzip upload to the gzip layer as sent and serves it with Content-Encoding: gzip", async () => {
      const plain = new TextEncoder().encode(JSON.stringify({ type: "FeatureCollection", features: [] }))
      const compressed = gzipSync(plain)
      await expectStatus(
        await put("tiles", "uploaded-tile-1", compressed, {
          "content-type": "application/geo+json",
          "content-encoding": "gzip"
        }),
        200
      )
      const raw = await rawRequest(`${svc.url}${blob("tiles", "uploaded-tile-1")}`, {
        authorization: `Bearer ${token}`
      })
      expect(raw.headers["content-encoding"]).toBe("gzip")
      expect(Buffer.compare(raw.body, compressed)).toBe(0)
      expect(sha1(await bytesOf(await svc.get(blob("tiles", "uploaded-tile-1"))))).toBe(sha1(plain))
    })

    it("does not delete versioned blobs (403)", async () => {
      const res = await svc.get(blob("places", places[0]!.dataHandle), { method: "DELETE" })
      await expectStatus(res, 403)
      expect(sha1(await bytesOf(await svc.get(blob("places", places[0]!.dataHandle))))).toBe(places[0]!.checksum)
    })

    it("answers an empty blob with 204 and no body", async () => {
      await expectStatus(await put("places", "empty-1", new Uint8Array(0), { "content-type": "application/json" }), 200)
      const res = await svc.get(blob("places", "empty-1"))
      expect(res.status).toBe(204)
      expect((await bytesOf(res)).byteLength).toBe(0)
    })
  })

  describe("volatile blobs", () => {
    it("overwrites with 204, deletes with 204, and then answers 404", async () => {
      const first = new TextEncoder().encode(`{"segment":"x","speedKmh":10}`)
      const second = new TextEncoder().encode(`{"segment":"x","speedKmh":80,"more":"bytes"}`)
      await expectStatus(await put("traffic", "live-1", first, { "content-type": "application/json" }), 200)
      expect(sha1(await bytesOf(await svc.get(blob("traffic", "live-1"))))).toBe(sha1(first))
      await expectStatus(await put("traffic", "live-1", second, { "content-type": "application/json" }), 204)
      const back = await svc.get(blob("traffic", "live-1"))
      expect(Number(back.headers.get("content-length"))).toBe(second.byteLength)
      expect(sha1(await bytesOf(back))).toBe(sha1(second))

      await expectStatus(await svc.get(blob("traffic", "live-1"), { method: "DELETE" }), 204)
      await expectDataError(await svc.get(blob("traffic", "live-1")), 404, "dataHandle")
      expect((await svc.get(blob("traffic", "live-1"), { method: "HEAD" })).status).toBe(404)
      await expectDataError(await svc.get(blob("traffic", "live-1"), { method: "DELETE" }), 404, "dataHandle")
    })

    it("overwrites a seeded volatile blob that the listing points at", async () => {
      const traffic = (await listing(svc, "traffic", "additionalFields=checksum")).partitions
      const e = traffic[42]!
      expect(sha1(await bytesOf(await svc.get(blob("traffic", e.dataHandle))))).toBe(e.checksum)
      const replacement = new TextEncoder().encode(`{"segment":"segment-42","speedKmh":5}`)
      await expectStatus(await put("traffic", e.dataHandle, replacement, { "content-type": "application/json" }), 204)
      expect(sha1(await bytesOf(await svc.get(blob("traffic", e.dataHandle))))).toBe(sha1(replacement))
    })

    it("answers an empty volatile blob with 204 on GET and HEAD", async () => {
      await expectStatus(
        await put("traffic", "empty-live", new Uint8Array(0), { "content-type": "application/json" }),
        200
      )
      const res = await svc.get(blob("traffic", "empty-live"))
      expect(res.status).toBe(204)
      expect((await bytesOf(res)).byteLength).toBe(0)
      expect((await svc.get(blob("traffic", "empty-live"), { method: "HEAD" })).status).toBe(204)
    })
  })
})
