/**
 * Multipart uploads of the blob API (facts §5) over HTTP: links, parts and ETags, completion (the
 * blob readable only then, byte for byte), the status link, cancellation and expiry (nothing
 * readable, parts gone from disk), the checks (parts >= 5 MiB but the last, numbering, ETags, 409 for
 * an existing handle), and the single PUT's limit (413 naming the multipart upload). The official
 * SDK's multipart requests: here-sdk-multipart.test.ts.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import { blob, expectDataError, expectJson, expectStatus, sha1, sleep } from "./helpers.ts"

const MiB = 1024 * 1024

interface Links {
  readonly links: Record<"complete" | "delete" | "status" | "uploadPart", { href: string; method: string }>
}

describe("multipart uploads", () => {
  let svc: TestService
  let data: string

  beforeAll(async () => {
    data = fs.mkdtempSync(path.join(os.tmpdir(), "multipart-test-"))
    svc = await startService({ seed: { partitions: 20, versions: 1 }, dataDir: data })
  })
  afterAll(async () => {
    await svc?.close()
    fs.rmSync(data, { recursive: true, force: true })
  })

  const start = (layer: string, handle: string, body: unknown = { contentType: "application/json" }) =>
    svc.get(`${blob(layer, handle)}/multiparts`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  const started = async (handle: string) => expectJson<Links>(await start("places", handle), 200)
  const part = (links: Links, number: number | string, bytes: Uint8Array, contentType = "application/json") =>
    svc.get(`${links.links.uploadPart.href}?partNumber=${number}`, {
      method: "POST",
      headers: { "content-type": contentType },
      body: bytes
    })
  const etagOf = async (res: Response) => {
    await expectStatus(res, 200)
    return res.headers.get("etag")!
  }
  const complete = (links: Links, parts: ReadonlyArray<{ etag: string; number: number }>) =>
    svc.get(links.links.complete.href, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ parts })
    })
  const status = async (links: Links) =>
    (await expectJson<{ status: string }>(await svc.get(links.links.status.href), 200)).status
  const head = async (handle: string) => (await svc.get(blob("places", handle), { method: "HEAD" })).status

  it("starts with opaque links, takes parts with ETags, and stores the blob only when completed", async () => {
    const links = await started("mp-1")
    const base = `${svc.url}${blob("places", "mp-1")}/multiparts/`
    expect(links.links.complete).toEqual({
      href: expect.stringMatching(new RegExp(`^${escape(base)}[0-9a-f]{32}$`)),
      method: "PUT"
    })
    expect(links.links.delete).toEqual({ href: links.links.complete.href, method: "DELETE" })
    expect(links.links.status).toEqual({ href: links.links.complete.href, method: "GET" })
    expect(links.links.uploadPart).toEqual({ href: `${links.links.complete.href}/parts`, method: "POST" })

    const first = randomBytes(5 * MiB)
    const second = randomBytes(5 * MiB + 17)
    const last = randomBytes(1234)
    // Out of order, and part 2 uploaded twice (the second replaces the first).
    const e3 = await etagOf(await part(links, 3, last))
    const stale = await etagOf(await part(links, 2, randomBytes(5 * MiB)))
    const e2 = await etagOf(await part(links, 2, second))
    const e1 = await etagOf(await part(links, 1, first))
    expect(e1).toMatch(/^"[0-9a-f]{32}"$/)
    expect(new Set([e1, e2, e3, stale]).size).toBe(4)
    expect(await status(links)).toBe("processing")
    expect(await head("mp-1")).toBe(404)

    await expectDataError(
      await complete(links, [{ etag: stale, number: 2 }, { etag: e1, number: 1 }, { etag: e3, number: 3 }]),
      400,
      "parts",
      /part 2 .* replaced/
    )
    // A refused completion fails the upload: it takes nothing more, and its blob never appears.
    expect(await status(links)).toBe("failed")
    await expectDataError(await part(links, 4, last), 409, "multipart")
    expect(await head("mp-1")).toBe(404)

    const again = await started("mp-1")
    const parts = [
      { etag: await etagOf(await part(again, 3, last)), number: 3 },
      { etag: await etagOf(await part(again, 1, first)), number: 1 },
      { etag: await etagOf(await part(again, 2, second)), number: 2 }
    ]
    await expectStatus(await complete(again, parts), 204)
    expect(await status(again)).toBe("completed")
    const stored = new Uint8Array(await (await svc.get(blob("places", "mp-1"))).arrayBuffer())
    expect(stored.byteLength).toBe(first.length + second.length + last.length)
    expect(sha1(stored)).toBe(sha1(Buffer.concat([first, second, last])))
    // Completing again with the same parts (a retry whose answer was lost) succeeds again; other parts do not.
    await expectStatus(await complete(again, [...parts].reverse()), 204)
    await expectDataError(await complete(again, parts.slice(0, 2)), 409, "parts")
    await expectDataError(await svc.get(again.links.delete.href, { method: "DELETE" }), 409, "multipart")
    // The parts are gone from disk; the blob is in the packs.
    expect(uploadDirs()).toEqual([])
  })

  it("refuses parts below 5 MiB except the last, gaps in the numbering, and unknown ETags", async () => {
    const small = await started("mp-small")
    const parts = [
      { etag: await etagOf(await part(small, 1, randomBytes(5 * MiB - 1))), number: 1 },
      { etag: await etagOf(await part(small, 2, randomBytes(10))), number: 2 }
    ]
    await expectDataError(
      await complete(small, parts),
      400,
      "parts",
      /part 1 has 5242879 bytes; every part but the last needs at least 5242880/
    )
    expect(await head("mp-small")).toBe(404)

    const gap = await started("mp-gap")
    const e1 = await etagOf(await part(gap, 1, randomBytes(5 * MiB)))
    const e3 = await etagOf(await part(gap, 3, randomBytes(10)))
    await expectDataError(
      await complete(gap, [{ etag: e1, number: 1 }, { etag: e3, number: 3 }]),
      400,
      "parts",
      /numbered 1 to 2/
    )

    const unknown = await started("mp-etag")
    await etagOf(await part(unknown, 1, randomBytes(10)))
    await expectDataError(
      await complete(unknown, [{ etag: `"${"0".repeat(32)}"`, number: 1 }]),
      400,
      "parts",
      /no part 1/
    )
    await expectDataError(await complete(await started("mp-empty"), []), 400, "parts", /empty/)

    // A single part may be small: it is the last.
    const one = await started("mp-one")
    const bytes = randomBytes(100)
    await expectStatus(await complete(one, [{ etag: await etagOf(await part(one, 1, bytes)), number: 1 }]), 204)
    expect(sha1(new Uint8Array(await (await svc.get(blob("places", "mp-one"))).arrayBuffer()))).toBe(sha1(bytes))
  })

  it("cancels: nothing readable, the links answer 404, the parts are gone from disk", async () => {
    const links = await started("mp-cancel")
    await etagOf(await part(links, 1, randomBytes(5 * MiB)))
    expect(uploadDirs()).toHaveLength(1)
    await expectStatus(await svc.get(links.links.delete.href, { method: "DELETE" }), 204)
    expect(await head("mp-cancel")).toBe(404)
    await expectDataError(await svc.get(links.links.status.href), 404, "multiPartToken")
    await expectDataError(await part(links, 2, randomBytes(10)), 404, "multiPartToken")
    await expectDataError(await complete(links, [{ etag: `"${"1".repeat(32)}"`, number: 1 }]), 404, "multiPartToken")
    expect(uploadDirs()).toEqual([])
  })

  it("refuses what cannot become a blob of the layer", async () => {
    await expectStatus(
      await svc.get(blob("places", "mp-taken"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: "{}"
      }),
      200
    )
    await expectDataError(await start("places", "mp-taken"), 409, "dataHandle", /already exists/)
    await expectDataError(await start("places", "mp-x", { contentType: "text/plain" }), 400, "Content-Type")
    await expectDataError(
      await start("places", "mp-x", { contentType: "application/json", contentEncoding: "gzip" }),
      400,
      "Content-Encoding"
    )
    await expectDataError(await start("places", "mp-x", { contentEncoding: "gzip" }), 400, "body")
    await expectDataError(await start("traffic", "mp-x"), 400, "layer", /volatile/)
    await expectDataError(await start("places", "bad/handle"), 404)
    const links = await started("mp-x")
    for (const number of ["0", "10001", "x", ""]) {
      await expectDataError(await part(links, number, randomBytes(1)), 400, "partNumber")
    }
    await expectDataError(await part(links, 1, randomBytes(1), "text/plain"), 400, "Content-Type")
    // Another layer's path or a made-up token does not reach the upload.
    await expectDataError(await svc.get(links.links.status.href.replace("/layers/places/", "/layers/roads/")), 404)
    await expectDataError(
      await svc.get(links.links.status.href.replace(/[0-9a-f]{32}$/, "f".repeat(32))),
      404,
      "multiPartToken"
    )
    await expectDataError(
      await svc.get(links.links.status.href.replace(/[0-9a-f]{32}$/, "not-a-token")),
      404,
      "multiPartToken"
    )
    // Only an application that may write the catalog may use the links.
    expect((await svc.get(links.links.status.href, { appId: "other-app" })).status).toBe(403)
  })

  it("answers a single PUT over the body limit with 413 naming the multipart upload", async () => {
    const token = await svc.token()
    const answer = await announce(`${svc.url}${blob("places", "too-big")}`, 64 * MiB + 1, token)
    expect(answer.status).toBe(413)
    expect(JSON.parse(answer.body)).toEqual({
      title: "Payload Too Large",
      status: 413,
      detail: [{
        name: "body",
        error: `request bodies are limited to ${
          64 * MiB
        } bytes; upload a larger blob with a multipart upload (POST .../data/{dataHandle}/multiparts)`
      }]
    })
    expect(await head("too-big")).toBe(404)
  })

  /** The upload directories (one per upload still holding parts) under the service's data directory. */
  const uploadDirs = () =>
    fs.readdirSync(path.join(data, "uploads"), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) =>
      e.name
    )
})

describe("abandoned multipart uploads", () => {
  it("are forgotten with their parts once untouched for the expiry, when the next upload starts", async () => {
    const svc = await startService({ seed: { partitions: 5, versions: 1 }, uploadExpiryMs: 300 })
    try {
      const start = async (handle: string) =>
        expectJson<Links>(
          await svc.get(`${blob("places", handle)}/multiparts`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ contentType: "application/json" })
          }),
          200
        )
      const abandoned = await start("abandoned")
      const res = await svc.get(`${abandoned.links.uploadPart.href}?partNumber=1`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: randomBytes(1000)
      })
      await expectStatus(res, 200)
      expect((await svc.get(abandoned.links.status.href)).status).toBe(200)
      await sleep(600)
      await start("next")
      await expectDataError(await svc.get(abandoned.links.status.href), 404, "multiPartToken")
      expect((await svc.get(blob("places", "abandoned"), { method: "HEAD" })).status).toBe(404)
    } finally {
      await svc.close()
    }
  })
})

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Sends the head of a PUT announcing `length` bytes (and none of them) and reads the answer. */
const announce = (url: string, length: number, token: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(url, {
      method: "PUT",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "content-length": String(length)
      }
    }, (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString("utf8")))
      res.on("end", () => {
        req.destroy()
        resolve({ status: res.statusCode!, body })
      })
    })
    req.on("error", reject)
    req.flushHeaders()
  })
