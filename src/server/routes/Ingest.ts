import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import { createHash, randomUUID } from "node:crypto"
import { routeLayer, servedIn } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import { transaction } from "../db/Database.ts"
import { StreamsRepo } from "../db/StreamsRepo.ts"
import { Replicas } from "../Replicas.ts"
import { badRequest, json } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"

/**
 * Ingest API v1, its generic endpoint: `POST /layers/{layerId}` with one message as the body writes it
 * to a stream layer (the platform's way to write stream layers). `X-HERE-Message-Key` becomes the
 * message's partition key, `X-HERE-TraceID` its id (a UUID when absent); the answer is
 * `200 {"TraceID": id}`. In a multi-region catalog the message lands in the region the request is
 * sent to and reaches the other region asynchronously (Replicas.ts).
 */

const ingest = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("write")
  if (layer.layer_type !== "stream") {
    return yield* badRequest(
      "layer",
      `Layer '${layer.id}' is a ${layer.layer_type} layer; the ingest API writes stream layers.`
    )
  }
  const request = yield* HttpServerRequest.HttpServerRequest
  const data = yield* RequestBody.bytes
  if (data.byteLength === 0) return yield* badRequest("body", "a message needs a non-empty body")
  const traceId = request.headers["x-here-traceid"] ?? randomUUID()
  const message = {
    partition: request.headers["x-here-message-key"] ?? traceId,
    data,
    checksum: createHash("sha1").update(data).digest("hex"),
    timestamp: Date.now()
  }
  const streams = yield* StreamsRepo
  yield* transaction(streams.appendMessages(layer.pk, [message]))
  const { placement, region } = yield* servedIn(catalog)
  yield* (yield* Replicas).streamWritten({ placement, region, key: layer.pk, messages: [message] })
  return json(200, { TraceID: traceId })
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post("/ingest/v1/catalogs/:catalog/layers/:layer", withCaller(ingest))
)
