import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { type Addressed, decodeSegment, layerAccess, routeLayer, servedIn, ServedRegion } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { BlobFiles, type BlobFilesShape } from "../BlobFiles.ts"
import { BlobsRepo } from "../db/BlobsRepo.ts"
import type { CatalogRow, LayerRow } from "../db/CatalogsRepo.ts"
import { DATA_HANDLE } from "../Publishing.ts"
import { Reads, type ReadsShape } from "../Reads.ts"
import { versionedWritesBlockedBy, versionedWritesRefused } from "../Regions.ts"
import { Replicas } from "../Replicas.ts"
import {
  badRequest,
  conflict,
  forbidden,
  notFound,
  orFail,
  type PlainResponse,
  rangeNotSatisfiable,
  Reply,
  type Result,
  toServerResponse
} from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import { Uploads } from "../Uploads.ts"
import { contentEncodingOf, layerConfigOf } from "../Views.ts"

/** Versioned and index layers keep immutable blobs; volatile layers overwrite (the volatile-blob API). */
export const isVolatile = (layer: LayerRow) => layer.layer_type === "volatile"

const handleOf = (raw: string): Result<string> =>
  DATA_HANDLE.test(raw) ? raw : badRequest("dataHandle", "malformed data handle: use 1-600 characters of [0-9a-zA-Z.-]")

export const handleParam = Effect.flatMap(HttpRouter.params, (params) => orFail(handleOf(decodeSegment(params.handle))))

const blobRangeNotSatisfiable = (size: number, raw: string) =>
  rangeNotSatisfiable(`cannot serve '${raw}' of a ${size}-byte blob`, { "content-range": `bytes */${size}` })

/** A single byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`), clipped to the blob; undefined for none. */
const parseRange = (
  raw: string | undefined,
  size: number
): Result<{ readonly start: number; readonly end: number } | undefined> => {
  if (raw === undefined) return undefined
  const m = /^bytes=(\d*)-(\d*)$/.exec(raw.trim())
  if (!m || (m[1] === "" && m[2] === "")) return blobRangeNotSatisfiable(size, raw)
  let start: number
  let end: number
  if (m[1] === "") {
    start = Math.max(0, size - Number(m[2]))
    end = size - 1
  } else {
    start = Number(m[1])
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)
  }
  if (start >= size || end < start) return blobRangeNotSatisfiable(size, raw)
  return { start, end }
}

/** The content type a layer's blobs are served with; its configuration is parsed once per distinct text. */
const contentTypes = new Map<string, string>()
const contentTypeOf = (layer: LayerRow): string => {
  let type = contentTypes.get(layer.config)
  if (type === undefined) {
    type = layerConfigOf(layer).contentType ?? "application/octet-stream"
    if (contentTypes.size >= 1000) contentTypes.clear()
    contentTypes.set(layer.config, type!)
  }
  return type!
}

/**
 * GET (`withBody`) or HEAD of a blob in a layer the caller may read: 200 or 206 with the bytes (HEAD:
 * their length), 204 for empty content, 304 for a matching If-None-Match, or the Reply (400, 404,
 * 416). `url` is the request URL; a `range` query parameter stands in for the Range header.
 */
const readBlob = (
  reads: ReadsShape,
  files: BlobFilesShape,
  layer: LayerRow,
  rawHandle: string,
  withBody: boolean,
  url: string,
  requestHeaders: Readonly<Record<string, string | undefined>>
): Result<PlainResponse> => {
  const handle = handleOf(rawHandle)
  if (handle instanceof Reply) return handle
  const blob = reads.blobLocation(layer.pk, handle)
  if (blob === undefined || blob.pack === null) {
    return notFound("dataHandle", `no blob with data handle '${handle}' in layer '${layer.id}'`)
  }
  const bytes = files.readAt({ pack: blob.pack, offset: blob.offset!, length: blob.length! })
  const etag = `"${blob.sha256}"`
  const headers: Record<string, string> = { "content-type": contentTypeOf(layer), etag, "accept-ranges": "bytes" }
  if (blob.content_encoding) headers["content-encoding"] = blob.content_encoding
  if (requestHeaders["if-none-match"] === etag) return { status: 304, headers: { etag }, body: undefined }
  if (bytes.byteLength === 0) return { status: 204, headers, body: undefined }
  const rangeQuery = url.includes("?") ? new URL(url, "http://x").searchParams.get("range") ?? undefined : undefined
  const range = parseRange(requestHeaders["range"] ?? rangeQuery, bytes.byteLength)
  if (range instanceof Reply) return range
  const body = range === undefined ? bytes : bytes.subarray(range.start, range.end + 1)
  if (range !== undefined) headers["content-range"] = `bytes ${range.start}-${range.end}/${bytes.byteLength}`
  headers["content-length"] = String(body.byteLength)
  return { status: range === undefined ? 200 : 206, headers, body: withBody ? body : undefined }
}

/** A blob read as the caller: the layer's access check, then readBlob, on one consistent view of the database. */
export const blobRead = (
  reads: ReadsShape,
  files: BlobFilesShape,
  appId: string,
  params: { readonly catalog: string; readonly layer: string; readonly handle: string },
  at: Addressed,
  withBody: boolean,
  url: string,
  headers: Readonly<Record<string, string | undefined>>
): Result<PlainResponse> =>
  reads.consistent(() => {
    const access = layerAccess(reads, params.catalog, params.layer, appId, "read", at)
    return access instanceof Reply
      ? access
      : readBlob(reads, files, access.layer, params.handle, withBody, url, headers)
  })

const read = (withBody: boolean) =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    const params = yield* HttpRouter.params
    const request = yield* HttpServerRequest.HttpServerRequest
    const files = yield* BlobFiles
    const decoded = {
      catalog: decodeSegment(params.catalog),
      layer: decodeSegment(params.layer),
      handle: decodeSegment(params.handle)
    }
    const at = { region: (yield* ServedRegion).region, down: (yield* Replicas).down }
    return toServerResponse(
      yield* orFail(blobRead(yield* Reads, files, appId, decoded, at, withBody, request.url, request.headers))
    )
  })

/** After a volatile blob changed in one region: the other region of a multi-region catalog gets it later. */
const replicate = (catalog: CatalogRow, layer: LayerRow, handle: string) =>
  Effect.gen(function*() {
    const { placement, region } = yield* servedIn(catalog)
    yield* (yield* Replicas).volatileWritten({ placement, region, key: layer.pk, handles: [handle] })
  })

/** Why a blob of this Content-Type and Content-Encoding does not belong in the layer (400), if it does not. */
export const contentRefused = (layer: LayerRow, contentType: string | undefined, encoding: string | undefined) => {
  const config = layerConfigOf(layer)
  if (config.contentType && contentType?.split(";")[0]?.trim() !== config.contentType) {
    return badRequest(
      "Content-Type",
      `Content-Type must be the layer's content type '${config.contentType}', got '${contentType ?? ""}'`
    )
  }
  if (encoding !== undefined && encoding !== (contentEncodingOf(layer) ?? "identity")) {
    return badRequest(
      "Content-Encoding",
      `Content-Encoding must match the layer's content encoding '${contentEncodingOf(layer) ?? "identity"}'`
    )
  }
  return undefined
}

export const handleExists = (handle: string) =>
  conflict("dataHandle", `data handle '${handle}' already exists; blobs are immutable, upload under a new handle`)

/** `X-HERE-Digest: <ALG>:<hex>` as a node:crypto algorithm and digest; CRC-32C and malformed values are not checked. */
const DIGEST = /^(MD5|SHA1|SHA256):([0-9a-f]+)$/i

const write = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("write")
  const handle = yield* handleParam
  if (!isVolatile(layer)) {
    const blockedBy = versionedWritesBlockedBy((yield* servedIn(catalog)).placement, (yield* Replicas).down)
    if (blockedBy !== undefined) return yield* versionedWritesRefused(blockedBy)
  }
  const request = yield* HttpServerRequest.HttpServerRequest
  const blobs = yield* BlobsRepo
  const refused = contentRefused(layer, request.headers["content-type"], request.headers["content-encoding"])
  if (refused !== undefined) return yield* refused
  const immutable = !isVolatile(layer)
  if (immutable && (yield* blobs.blob(layer.pk, handle)) !== undefined) return yield* handleExists(handle)
  const digest = DIGEST.exec(request.headers["x-here-digest"]?.trim() ?? "")
  const algorithm = digest?.[1]!.toLowerCase()
  // The body goes to a file, then into a pack: memory stays flat whatever its size.
  const file = (yield* Uploads).scratchFile()
  return yield* Effect.gen(function*() {
    const received = yield* RequestBody.toFile(
      file,
      algorithm === undefined || algorithm === "sha256" ? ["sha256"] : ["sha256", algorithm],
      true
    )
    if (digest && received.digests[algorithm!] !== digest[2]!.toLowerCase()) {
      return yield* badRequest("X-HERE-Digest", "the body does not match X-HERE-Digest")
    }
    const stored = yield* (yield* BlobFiles).putFiles([file], received.digests["sha256"])
    // Checked again: another upload of the handle may have finished while this body came in.
    const existing = yield* blobs.blob(layer.pk, handle)
    if (immutable && existing !== undefined) return yield* handleExists(handle)
    yield* blobs.putBlob(layer.pk, handle, stored.sha256, stored.size, contentEncodingOf(layer))
    if (isVolatile(layer)) yield* replicate(catalog, layer, handle)
    return HttpServerResponse.empty({ status: existing !== undefined ? 204 : 200 })
  }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(file, { force: true }))))
})

const remove = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("write")
  const handle = yield* handleParam
  if (!isVolatile(layer) && layer.layer_type !== "index") return yield* Effect.fail(forbidden())
  const blobs = yield* BlobsRepo
  const existing = yield* blobs.blob(layer.pk, handle)
  if (existing === undefined) {
    return isVolatile(layer)
      ? yield* notFound("dataHandle", `no blob with data handle '${handle}'`)
      : HttpServerResponse.empty({ status: 202 })
  }
  yield* blobs.deleteBlob(layer.pk, handle)
  if (!(yield* blobs.contentInUse(existing.sha256))) yield* (yield* BlobFiles).remove(existing.sha256)
  if (isVolatile(layer)) yield* replicate(catalog, layer, handle)
  return HttpServerResponse.empty({ status: isVolatile(layer) ? 204 : 202 })
})

// FastPath.ts serves GET and HEAD of both paths for plain URLs ahead of the router, through readBlob.
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
