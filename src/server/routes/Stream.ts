import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { randomInt, randomUUID } from "node:crypto"
import { routeLayer, ServedRegion } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import type { CatalogRow, LayerRow } from "../db/CatalogsRepo.ts"
import { type StreamConsumerRow, StreamsRepo } from "../db/StreamsRepo.ts"
import { regionPrefix } from "../Regions.ts"
import { json, Reply, streamError } from "../Reply.ts"
import * as SearchParams from "../SearchParams.ts"
import { originOf } from "../Views.ts"

/**
 * Stream API v2, enough to consume a stream layer: subscribe, read (`GET .../partitions`), commit
 * offsets, seek, unsubscribe. The local service keeps one stream partition (0) per layer, so the
 * offsets of a layer order all its messages; messages are always inlined as base64 `data`.
 * A subscription reads from its consumer group's committed offset, else from the earliest (or,
 * with `auto.offset.reset: latest`, the next) message.
 */

const NODE = "nodes/local-1"
const DEFAULT_MAX_RECORDS = 500
const MAX_RECORDS = 10_000
/** The only stream partition of a local stream layer. */
export const STREAM_PARTITION = 0

const streamLayer = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("read").pipe(
    Effect.catchIf(
      (e): e is Reply => e instanceof Reply && e.response.status === 400,
      () =>
        Effect.flatMap(
          HttpRouter.params,
          (p) =>
            streamError(
              404,
              "Stream layer not found",
              "E213027",
              `Stream layer ${p.layer} not found`,
              "Verify stream layer name and existence, and retry"
            )
        )
    )
  )
  if (layer.layer_type !== "stream") {
    return yield* streamError(
      404,
      "Stream layer not found",
      "E213027",
      `Layer ${layer.id} is a ${layer.layer_type} layer, not a stream layer`,
      "Verify stream layer name and existence, and retry"
    )
  }
  return { catalog, layer }
})

/** The query of subscribe and unsubscribe; `mode` is the only one that can be wrong. */
const SubscriptionParams = Schema.Struct({
  mode: Schema.optionalWith(SearchParams.Param.pipe(Schema.compose(Schema.Literal("serial", "parallel"))), {
    default: () => "serial" as const
  }),
  subscriptionId: Schema.optional(SearchParams.Param),
  consumerId: Schema.optional(SearchParams.Param)
})

const subscriptionParams = SearchParams.decode(SubscriptionParams, (_, params) => {
  const mode = Schema.decodeUnknownOption(SearchParams.Param)(params.mode).pipe(Option.getOrElse(() => ""))
  return streamError(
    400,
    "Subscription mode not supported",
    "E213002",
    `Subscription mode '${mode}' not supported`,
    "Retry with valid subscription mode 'serial' or 'parallel'"
  )
})

/** The node of a subscription, in the region it was made in: its consumer reads that region's replica. */
const nodeBaseUrl = (request: HttpServerRequest.HttpServerRequest, catalog: CatalogRow) =>
  Effect.map(
    ServedRegion,
    ({ region }) =>
      `${originOf(request.headers)}${
        region === undefined ? "" : regionPrefix(region)
      }/stream/v2/${NODE}/catalogs/${catalog.hrn}`
  )

const consumerProperties = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
  if (text.trim() === "") return {} as Record<string, unknown>
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return yield* streamError(
      400,
      "Invalid request body",
      "E213001",
      "The request body is not valid JSON",
      "Send {kafkaConsumerProperties: {...}} or no body"
    )
  }
  const props = (Predicate.hasProperty(body, "kafkaConsumerProperties") ? body.kafkaConsumerProperties : undefined) ??
    {}
  if (typeof props !== "object" || props === null) {
    return yield* streamError(
      400,
      "Invalid request body",
      "E213001",
      "kafkaConsumerProperties must be an object",
      "Send {kafkaConsumerProperties: {...}} or no body"
    )
  }
  return props as Record<string, unknown>
})

const subscribe = Effect.gen(function*() {
  const { catalog, layer } = yield* streamLayer
  const { appId } = yield* Caller
  const request = yield* HttpServerRequest.HttpServerRequest
  const params = yield* subscriptionParams
  const mode = params.mode
  const streams = yield* StreamsRepo
  const existingId = params.subscriptionId
  if (existingId !== undefined) {
    const consumer = yield* streams.consumer(existingId)
    if (consumer === undefined || consumer.layer_pk !== layer.pk || consumer.app_id !== appId) {
      return yield* subscriptionNotFound(existingId)
    }
    return json(201, { nodeBaseURL: yield* nodeBaseUrl(request, catalog), subscriptionId: consumer.id })
  }
  const props = yield* consumerProperties
  const reset = props["auto.offset.reset"] ?? "earliest"
  if (reset !== "earliest" && reset !== "latest") {
    return yield* streamError(
      400,
      "Invalid consumer property",
      "E213005",
      `auto.offset.reset '${String(reset)}' is not supported`,
      "Use earliest or latest"
    )
  }
  const maxRecords = props["max.poll.records"] ?? DEFAULT_MAX_RECORDS
  if (typeof maxRecords !== "number" || !Number.isInteger(maxRecords) || maxRecords < 1 || maxRecords > MAX_RECORDS) {
    return yield* streamError(
      400,
      "Invalid consumer property",
      "E213005",
      `max.poll.records must be an integer within 1..${MAX_RECORDS}`,
      "Correct max.poll.records and retry"
    )
  }
  const group = typeof props["group.id"] === "string" && props["group.id"] !== ""
    ? (props["group.id"] as string)
    : "default"
  const bounds = yield* streams.messageBounds(layer.pk)
  const committed = yield* streams.committedOffset(layer.pk, appId, group)
  const position = committed ?? (reset === "latest" ? bounds.next : bounds.low)
  const serial = `-${randomInt(1_000_000_000, 2_147_483_647)}`
  const id = mode === "serial" ? serial : `${serial}.${params.consumerId ?? randomUUID()}`
  const row: StreamConsumerRow = {
    id,
    layer_pk: layer.pk,
    app_id: appId,
    group_id: group,
    mode,
    position,
    max_records: maxRecords,
    created: Date.now()
  }
  yield* streams.insertConsumer(row)
  return json(201, { nodeBaseURL: yield* nodeBaseUrl(request, catalog), subscriptionId: id }, {
    "x-correlation-id": randomUUID()
  })
})

const subscriptionNotFound = (id: string) =>
  streamError(404, "Subscription not found", "E213003", `SubscriptionId ${id} not found`, "Subscribe again")

/** The consumer named by `subscriptionId` (required in parallel mode; in serial mode the caller's latest one). */
const routeConsumer = Effect.gen(function*() {
  const { catalog, layer } = yield* streamLayer
  const { appId } = yield* Caller
  const { mode, subscriptionId } = yield* subscriptionParams
  const streams = yield* StreamsRepo
  const id = subscriptionId
  if (id === undefined && mode === "parallel") {
    return yield* streamError(
      400,
      "SubscriptionId not provided",
      "E213013",
      "SubscriptionId is mandatory for 'parallel' mode",
      "Retry with valid subscriptionId"
    )
  }
  const consumer = id === undefined ? yield* streams.latestConsumer(layer.pk, appId, mode) : yield* streams.consumer(id)
  if (consumer === undefined || consumer.layer_pk !== layer.pk || consumer.app_id !== appId) {
    return yield* subscriptionNotFound(id ?? "(serial)")
  }
  return { catalog, layer, consumer }
})

const read = Effect.gen(function*() {
  const { consumer, layer } = yield* routeConsumer
  const streams = yield* StreamsRepo
  const rows = yield* streams.messagesFrom(layer.pk, consumer.position, consumer.max_records)
  if (rows.length > 0) yield* streams.setConsumerPosition(consumer.id, rows[rows.length - 1]!.offset + 1)
  const messages = rows.map((r) => ({
    metaData: {
      partition: r.partition,
      checksum: r.checksum,
      dataSize: r.data.byteLength,
      data: Buffer.from(r.data).toString("base64"),
      timestamp: r.timestamp
    },
    offset: { partition: STREAM_PARTITION, offset: r.offset }
  }))
  return json(200, { messages }, { "x-correlation-id": randomUUID() })
})

/** The offset in `{offsets: [{partition, offset}]}`: a message's offset, or (for seek) the end of the layer. */
const offsetsBody = (layer: LayerRow, allowEnd: boolean) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body: unknown = yield* request.json.pipe(Effect.orElseSucceed(() => undefined))
    const offsets: unknown = Predicate.hasProperty(body, "offsets") ? body.offsets : undefined
    const bad = (cause: string) =>
      streamError(
        400,
        "Invalid offsets",
        "E213006",
        cause,
        "Send {offsets: [{partition, offset}]} with offsets of messages read"
      )
    if (!Array.isArray(offsets) || offsets.length === 0) {
      return yield* bad("offsets must be a non-empty array of {partition, offset}")
    }
    const bounds = yield* (yield* StreamsRepo).messageBounds(layer.pk)
    let last = 0
    for (const o of offsets as ReadonlyArray<unknown>) {
      const partition = Predicate.hasProperty(o, "partition") ? o.partition : undefined
      const offset = Predicate.hasProperty(o, "offset") ? o.offset : undefined
      if (partition !== STREAM_PARTITION) {
        return yield* bad(
          `partition ${
            JSON.stringify(partition)
          } does not exist; layer ${layer.id} has stream partition ${STREAM_PARTITION}`
        )
      }
      if (
        typeof offset !== "number" || !Number.isInteger(offset) || offset < 0 || offset > bounds.next ||
        (offset === bounds.next && !allowEnd)
      ) {
        return yield* bad(
          `offset ${JSON.stringify(offset)} is not the offset of a message in partition ${STREAM_PARTITION} (0..${
            bounds.next - 1
          })`
        )
      }
      last = offset
    }
    return last
  })

const commit = Effect.gen(function*() {
  const { consumer, layer } = yield* routeConsumer
  const offset = yield* offsetsBody(layer, false)
  // As the platform: the offset given is the last message read; the service adds one.
  yield* (yield* StreamsRepo).commitOffset(layer.pk, consumer.app_id, consumer.group_id, offset + 1)
  return HttpServerResponse.empty({ status: 200, headers: { "x-correlation-id": randomUUID() } })
})

const seek = Effect.gen(function*() {
  const { consumer, layer } = yield* routeConsumer
  const offset = yield* offsetsBody(layer, true)
  yield* (yield* StreamsRepo).setConsumerPosition(consumer.id, offset)
  return HttpServerResponse.empty({ status: 200, headers: { "x-correlation-id": randomUUID() } })
})

const unsubscribe = Effect.gen(function*() {
  const { consumer } = yield* routeConsumer
  yield* (yield* StreamsRepo).deleteConsumer(consumer.id)
  return HttpServerResponse.empty({ status: 200 })
})

const base = "/stream/v2/catalogs/:catalog/layers/:layer"
const node = `/stream/v2/${NODE}/catalogs/:catalog/layers/:layer`

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post(`${base}/subscribe`, withCaller(subscribe)),
  HttpRouter.get(`${node}/partitions`, withCaller(read)),
  HttpRouter.put(`${node}/offsets`, withCaller(commit)),
  HttpRouter.put(`${node}/seek`, withCaller(seek)),
  HttpRouter.del(`${node}/subscribe`, withCaller(unsubscribe))
)
