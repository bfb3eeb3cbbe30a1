import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { decodeSegment, routeLayer } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import { BlobFiles } from "../BlobFiles.ts"
import { DATA_HANDLE } from "../Publishing.ts"
import { badRequest, conflict, forbidden, notFound, Reply } from "../Reply.ts"
import { type LayerRow, Store } from "../Store.ts"
import { contentEncodingOf, layerConfigOf } from "../Views.ts"

/** Versioned and index layers keep immutable blobs; volatile layers overwrite (the volatile-blob API). */
const isVolatile = (layer: LayerRow) => layer.layer_type === "volatile"

const handleParam = Effect.gen(function*() {
  const handle = decodeSegment((yield* HttpRouter.params).handle)
  if (!DATA_HANDLE.test(handle)) return yield* badRequest("dataHandle", "malformed data handle: use 1-600 characters of [0-9a-zA-Z.-]")
  return handle
})

const rangeNotSatisfiable = (size: number, raw: string) =>
  new Reply({
    response: HttpServerResponse.unsafeJson(
      { title: "Range Not Satisfiable", status: 416, detail: [{ name: "range", error: `cannot serve '${raw}' of a ${size}-byte blob` }] },
      { status: 416, headers: { "content-range": `bytes */${size}` } }
    )
  })

/** A single byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`), clipped to the blob; undefined for none. */
const parseRange = (raw: string | undefined, size: number) =>
  Effect.gen(function*() {
    if (raw === undefined) return undefined
    const m = /^bytes=(\d*)-(\d*)$/.exec(raw.trim())
    if (!m || (m[1] === "" && m[2] === "")) return yield* rangeNotSatisfiable(size, raw)
    let start: number
    let end: number
    if (m[1] === "") {
      start = Math.max(0, size - Number(m[2]))
      end = size - 1
    } else {
      start = Number(m[1])
      end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)
    }
    if (start >= size || end < start) return yield* rangeNotSatisfiable(size, raw)
    return { start, end }
  })

const read = (withBody: boolean) =>
  Effect.gen(function*() {
    const { layer } = yield* routeLayer("read")
    const handle = yield* handleParam
    const request = yield* HttpServerRequest.HttpServerRequest
    const store = yield* Store
    const blob = yield* store.blobLocation(layer.pk, handle).pipe(Effect.orDie)
    if (blob === undefined || blob.pack === null) return yield* notFound("dataHandle", `no blob with data handle '${handle}' in layer '${layer.id}'`)
    const bytes = (yield* BlobFiles).readAt({ pack: blob.pack, offset: blob.offset!, length: blob.length! })
    const etag = `"${blob.sha256}"`
    const headers: Record<string, string> = {
      "content-type": layerConfigOf(layer).contentType ?? "application/octet-stream",
      etag,
      "accept-ranges": "bytes",
      ...(blob.content_encoding ? { "content-encoding": blob.content_encoding } : {})
    }
    if (request.headers["if-none-match"] === etag) return HttpServerResponse.empty({ status: 304, headers: { etag } })
    if (bytes.byteLength === 0) return HttpServerResponse.empty({ status: 204, headers })
    const range = yield* parseRange(request.headers["range"] ?? new URL(request.url, "http://x").searchParams.get("range") ?? undefined, bytes.byteLength)
    const body = range === undefined ? bytes : bytes.subarray(range.start, range.end + 1)
    const status = range === undefined ? 200 : 206
    if (range !== undefined) headers["content-range"] = `bytes ${range.start}-${range.end}/${bytes.byteLength}`
    if (!withBody) return HttpServerResponse.empty({ status, headers: { ...headers, "content-length": String(body.byteLength) } })
    return HttpServerResponse.uint8Array(body, { status, headers, contentType: headers["content-type"]! })
  })

const write = Effect.gen(function*() {
  const { layer } = yield* routeLayer("write")
  const handle = yield* handleParam
  const request = yield* HttpServerRequest.HttpServerRequest
  const store = yield* Store
  const config = layerConfigOf(layer)
  const contentType = request.headers["content-type"]
  if (config.contentType && contentType?.split(";")[0]?.trim() !== config.contentType) {
    return yield* badRequest("Content-Type", `Content-Type must be the layer's content type '${config.contentType}', got '${contentType ?? ""}'`)
  }
  const encoding = request.headers["content-encoding"]
  if (encoding !== undefined && encoding !== (contentEncodingOf(layer) ?? "identity")) {
    return yield* badRequest("Content-Encoding", `Content-Encoding must match the layer's content encoding '${contentEncodingOf(layer) ?? "identity"}'`)
  }
  const existing = yield* store.blob(layer.pk, handle).pipe(Effect.orDie)
  if (existing !== undefined && !isVolatile(layer)) {
    return yield* conflict("dataHandle", `data handle '${handle}' already exists; blobs are immutable, upload under a new handle`)
  }
  const bytes = new Uint8Array(yield* request.arrayBuffer.pipe(Effect.catchAll(() => badRequest("body", "the request body could not be read"))))
  const digest = /^(MD5|SHA1|SHA256):([0-9a-f]+)$/i.exec(request.headers["x-here-digest"]?.trim() ?? "")
  if (digest && createHash(digest[1]!.toLowerCase()).update(bytes).digest("hex") !== digest[2]!.toLowerCase()) {
    return yield* badRequest("X-HERE-Digest", "the body does not match X-HERE-Digest")
  }
  const stored = yield* (yield* BlobFiles).put(bytes)
  yield* store.putBlob(layer.pk, handle, stored.sha256, stored.size, contentEncodingOf(layer)).pipe(Effect.orDie)
  return HttpServerResponse.empty({ status: existing !== undefined ? 204 : 200 })
})

const remove = Effect.gen(function*() {
  const { layer } = yield* routeLayer("write")
  const handle = yield* handleParam
  if (!isVolatile(layer) && layer.layer_type !== "index") return yield* Effect.fail(forbidden())
  const store = yield* Store
  const existing = yield* store.blob(layer.pk, handle).pipe(Effect.orDie)
  if (existing === undefined) {
    return isVolatile(layer) ? yield* notFound("dataHandle", `no blob with data handle '${handle}'`) : HttpServerResponse.empty({ status: 202 })
  }
  yield* store.deleteBlob(layer.pk, handle).pipe(Effect.orDie)
  if (!(yield* store.contentInUse(existing.sha256).pipe(Effect.orDie))) yield* (yield* BlobFiles).remove(existing.sha256)
  return HttpServerResponse.empty({ status: isVolatile(layer) ? 204 : 202 })
})

const path = "/blobstore/v1/catalogs/:catalog/layers/:layer/data/:handle"
const legacyPath = "/blob/v1/catalogs/:catalog/layers/:layer/data/:handle"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(path, withCaller(read(true))),
  HttpRouter.head(path, withCaller(read(false))),
  HttpRouter.put(path, withCaller(write)),
  HttpRouter.del(path, withCaller(remove)),
  HttpRouter.get(legacyPath, withCaller(read(true))),
  HttpRouter.head(legacyPath, withCaller(read(false)))
)
