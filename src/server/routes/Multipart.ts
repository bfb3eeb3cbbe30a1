import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { MAX_PARTS, MultipartComplete, MultipartStart, type MultipartStatus } from "../../domain/Multipart.ts"
import { routeLayer, servedIn } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import { BlobsRepo } from "../db/BlobsRepo.ts"
import type { LayerRow } from "../db/CatalogsRepo.ts"
import { versionedWritesBlockedBy, versionedWritesRefused } from "../Regions.ts"
import { Replicas } from "../Replicas.ts"
import { badRequest, json, notFound } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import { UPLOAD_TOKEN, Uploads } from "../Uploads.ts"
import { contentEncodingOf, originOf } from "../Views.ts"
import { contentRefused, handleExists, handleParam, isVolatile } from "./Blob.ts"

/**
 * Multipart uploads of blob API v1 (facts §5), for blobs too large for one PUT: start one for a data
 * handle, upload its parts (`?partNumber=N`, each answered with an ETag), then complete it with the
 * list of part numbers and ETags, which stores the blob; or cancel it. The start answers opaque links
 * for the other four; the service keeps the parts on disk (Uploads.ts).
 */

/** The layer of the route, for writing blobs: versioned or index, and taking data in every region of its catalog. */
const writableLayer = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("write")
  if (isVolatile(layer)) {
    return yield* badRequest(
      "layer",
      `layer '${layer.id}' is volatile: its blobs are written whole with PUT (multipart uploads are for versioned and index layers)`
    )
  }
  const blockedBy = versionedWritesBlockedBy((yield* servedIn(catalog)).placement, (yield* Replicas).down)
  if (blockedBy !== undefined) return yield* versionedWritesRefused(blockedBy)
  return layer
})

const start = Effect.gen(function*() {
  const layer = yield* writableLayer
  const handle = yield* handleParam
  const body = yield* RequestBody.decodeJson(MultipartStart)
  const refused = contentRefused(layer, body.contentType, body.contentEncoding)
  if (refused !== undefined) return yield* refused
  if ((yield* (yield* BlobsRepo).blob(layer.pk, handle)) !== undefined) return yield* handleExists(handle)
  const token = yield* (yield* Uploads).start(layer.pk, handle, body.contentType, contentEncodingOf(layer))
  // The links keep the URL's region prefix (originalUrl) and carry no query, so a client can append its own.
  const request = yield* HttpServerRequest.HttpServerRequest
  const href = `${originOf(request.headers)}${request.originalUrl.split("?")[0]}/${token}`
  return json(200, {
    links: {
      complete: { href, method: "PUT" },
      delete: { href, method: "DELETE" },
      status: { href, method: "GET" },
      uploadPart: { href: `${href}/parts`, method: "POST" }
    }
  })
})

/** The upload of the route's token, layer and data handle; 404 when there is none (never was, cancelled, expired). */
const routeUpload = (layer: LayerRow) =>
  Effect.gen(function*() {
    const handle = yield* handleParam
    const { token } = yield* HttpRouter.params
    const upload = token !== undefined && UPLOAD_TOKEN.test(token)
      ? yield* (yield* Uploads).find(token, layer.pk, handle)
      : undefined
    if (upload === undefined) {
      return yield* notFound(
        "multiPartToken",
        `no multipart upload '${
          token ?? ""
        }' for data handle '${handle}': it was never started, or was cancelled, completed long ago or abandoned`
      )
    }
    return upload
  })

const uploadPart = Effect.gen(function*() {
  const layer = yield* writableLayer
  const upload = yield* routeUpload(layer)
  const request = yield* HttpServerRequest.HttpServerRequest
  const raw = new URL(request.url, "http://x").searchParams.get("partNumber") ?? ""
  const number = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN
  if (!(number >= 1 && number <= MAX_PARTS)) {
    return yield* badRequest("partNumber", `partNumber must be an integer from 1 to ${MAX_PARTS}, got '${raw}'`)
  }
  const contentType = request.headers["content-type"]
  if (contentType !== undefined && contentType.split(";")[0]?.trim() !== upload.content_type) {
    return yield* badRequest(
      "Content-Type",
      `Content-Type must be the upload's content type '${upload.content_type}', got '${contentType}'`
    )
  }
  const etag = yield* (yield* Uploads).putPart(upload, number)
  return HttpServerResponse.empty({ status: 200, headers: { etag: `"${etag}"` } })
})

const complete = Effect.gen(function*() {
  const layer = yield* writableLayer
  const upload = yield* routeUpload(layer)
  const { parts } = yield* RequestBody.decodeJson(MultipartComplete)
  yield* (yield* Uploads).complete(upload, parts)
  return HttpServerResponse.empty({ status: 204 })
})

const status = Effect.gen(function*() {
  const { layer } = yield* routeLayer("write")
  const upload = yield* routeUpload(layer)
  return json(200, { status: (yield* Uploads).status(upload) } satisfies typeof MultipartStatus.Type)
})

const cancel = Effect.gen(function*() {
  const { layer } = yield* routeLayer("write")
  const upload = yield* routeUpload(layer)
  yield* (yield* Uploads).cancel(upload)
  return HttpServerResponse.empty({ status: 204 })
})

const path = "/blobstore/v1/catalogs/:catalog/layers/:layer/data/:handle/multiparts"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post(path, withCaller(start)),
  HttpRouter.post(`${path}/:token/parts`, withCaller(uploadPart)),
  HttpRouter.put(`${path}/:token`, withCaller(complete)),
  HttpRouter.get(`${path}/:token`, withCaller(status)),
  HttpRouter.del(`${path}/:token`, withCaller(cancel))
)
