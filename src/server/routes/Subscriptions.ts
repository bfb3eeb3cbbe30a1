import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { randomBytes, randomUUID } from "node:crypto"
import * as Hrn from "../../domain/Hrn.ts"
import { SUBSCRIPTION_TYPES } from "../../domain/Subscription.ts"
import { decodeSegment } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { transaction } from "../db/Database.ts"
import { type SubscriptionRow, SubscriptionsRepo } from "../db/SubscriptionsRepo.ts"
import { Reads } from "../Reads.ts"
import { badRequest, conflict, forbidden, json, notFound } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import * as SearchParams from "../SearchParams.ts"

/**
 * Config API v1 notification subscriptions on interactive map layers. Create and delete answer 202
 * with a `statusToken` (as the config API does); the create answer also carries the subscription,
 * whose `subscriptionHrn` names it in paths. `x-idempotency-key` makes both safe to repeat.
 */

const NAME = /^[a-z0-9][a-z0-9-]{1,44}[a-z0-9]$/
const ORGANISATION = "olp-local"
const DEFAULT_LIMIT = 100
const MAX_LIMIT = 1000

type Json = Record<string, any>

export const subscriptionView = (row: SubscriptionRow) => ({
  subscriptionHrn: row.hrn,
  subscriptionName: row.name,
  ...(row.description === null ? {} : { description: row.description }),
  sourceCatalog: row.source_catalog,
  sourceLayer: row.source_layer,
  destinationCatalog: row.destination_catalog,
  destinationLayer: row.destination_layer,
  interactiveMapSubscription: { type: row.type },
  owner: { creator: { id: row.owner_app }, organisation: { id: ORGANISATION } },
  version: 1,
  created: row.created,
  updated: row.updated,
  status: { state: row.state, ...(row.message === null ? {} : { message: row.message }) }
})

const idempotencyKey = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = request.headers["x-idempotency-key"]
  if (key === undefined || key.trim() === "") {
    return yield* badRequest(
      "x-idempotency-key",
      "the header x-idempotency-key is required: a unique value per request, e.g. a UUID v4; send the same value when you retry"
    )
  }
  if (key.length < 10 || key.length > 255) {
    return yield* badRequest("x-idempotency-key", "x-idempotency-key must be 10 to 255 characters long")
  }
  return key
})

const requiredText = (body: Json, field: string) =>
  typeof body[field] === "string" && body[field].trim() !== ""
    ? Effect.succeed(body[field] as string)
    : badRequest(field, `${field} is required`)

/** The fields of a create request, checked, in a canonical form (also what idempotency compares). */
const createRequest = (body: Json) =>
  Effect.gen(function*() {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* badRequest("body", "a JSON subscription object is required")
    }
    const subscriptionName = yield* requiredText(body, "subscriptionName")
    if (!NAME.test(subscriptionName)) {
      return yield* badRequest(
        "subscriptionName",
        "subscriptionName must be 3-46 characters of a-z, 0-9 and '-', starting and ending with a letter or digit"
      )
    }
    if (body.description !== undefined && (typeof body.description !== "string" || body.description.length > 10_000)) {
      return yield* badRequest("description", "description must be a string of at most 10000 characters")
    }
    const sourceCatalog = yield* requiredText(body, "sourceCatalog")
    const sourceLayer = yield* requiredText(body, "sourceLayer")
    const destinationCatalog = yield* requiredText(body, "destinationCatalog")
    const destinationLayer = yield* requiredText(body, "destinationLayer")
    const type = body.interactiveMapSubscription?.type
    if (type === undefined) {
      return yield* badRequest("interactiveMapSubscription.type", "interactiveMapSubscription.type is required")
    }
    if (!(SUBSCRIPTION_TYPES as ReadonlyArray<unknown>).includes(type)) {
      return yield* badRequest(
        "interactiveMapSubscription.type",
        `interactiveMapSubscription.type must be one of ${SUBSCRIPTION_TYPES.join(", ")}`
      )
    }
    return {
      subscriptionName,
      description: (body.description as string | undefined) ?? null,
      sourceCatalog,
      sourceLayer,
      destinationCatalog,
      destinationLayer,
      type: type as string
    }
  })

const inaccessible = (field: string, hrn: string) =>
  badRequest(field, `catalog ${hrn} does not exist or is not accessible with these credentials`)

/** A catalog and layer named in the body, as the caller may see them (a catalog that is not the caller's answers like a missing one). */
const referencedLayer = (catalogField: string, layerField: string, nameOrHrn: string, layerId: string) =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    const row = (yield* Reads).catalogAccess(nameOrHrn, appId, layerId)
    if (row === undefined || !(row.owns === 1 || row.can_read === 1)) {
      return yield* inaccessible(catalogField, nameOrHrn)
    }
    if (row.layer_pk === null) return yield* badRequest(layerField, `catalog ${row.hrn} has no layer '${layerId}'`)
    return row
  })

const subscriptionHrnFor = (sourceCatalog: string, name: string) => {
  const parsed = Hrn.parse(sourceCatalog)
  const partition = Either.isRight(parsed) ? parsed.right.partition : "local"
  return `hrn:${partition}:data-subscription:::${name}-${randomBytes(8).toString("hex")}`
}

const create = Effect.gen(function*() {
  const { appId } = yield* Caller
  const key = yield* idempotencyKey
  const body = (yield* RequestBody.json) as Json
  const wanted = yield* createRequest(body)
  const fingerprint = JSON.stringify(wanted)
  const subscriptions = yield* SubscriptionsRepo
  const result = yield* transaction(Effect.gen(function*() {
    const remembered = yield* subscriptions.idempotencyKey(appId, "create", key)
    if (remembered !== undefined) {
      if (remembered.request !== fingerprint) {
        return yield* conflict(
          "x-idempotency-key",
          "this x-idempotency-key was used for a different subscription request; use a new key for a new request"
        )
      }
      return (yield* subscriptions.byHrn(remembered.subscription_hrn))!
    }
    const source = yield* referencedLayer("sourceCatalog", "sourceLayer", wanted.sourceCatalog, wanted.sourceLayer)
    if (source.layer_type !== "interactivemap") {
      return yield* badRequest(
        "sourceLayer",
        `layer '${wanted.sourceLayer}' is a ${source.layer_type} layer; notifications come from interactive map layers`
      )
    }
    const destination = yield* referencedLayer(
      "destinationCatalog",
      "destinationLayer",
      wanted.destinationCatalog,
      wanted.destinationLayer
    )
    if (destination.layer_type !== "stream") {
      return yield* badRequest(
        "destinationLayer",
        `layer '${wanted.destinationLayer}' is a ${destination.layer_type} layer; the destination must be a stream layer`
      )
    }
    if (!(destination.owns === 1 || (destination.can_read === 1 && destination.can_write === 1))) {
      return yield* forbidden(
        `The destination layer ${destination.hrn}:${wanted.destinationLayer} needs READ and WRITE permission for these credentials, or must have been created by them.`
      )
    }
    const duplicate = yield* subscriptions.activeDuplicate(
      appId,
      source.hrn,
      wanted.sourceLayer,
      destination.hrn,
      wanted.destinationLayer,
      wanted.type
    )
    if (duplicate !== undefined) {
      return yield* conflict(
        "subscription",
        `a ${wanted.type} subscription from ${source.hrn}:${wanted.sourceLayer} to ${destination.hrn}:${wanted.destinationLayer} already exists (${duplicate.hrn})`
      )
    }
    const now = new Date().toISOString()
    const hrn = subscriptionHrnFor(source.hrn, wanted.subscriptionName)
    yield* subscriptions.insert({
      hrn,
      owner_app: appId,
      name: wanted.subscriptionName,
      description: wanted.description,
      source_catalog: source.hrn,
      source_layer: wanted.sourceLayer,
      destination_catalog: destination.hrn,
      destination_layer: wanted.destinationLayer,
      type: wanted.type,
      state: "active",
      message: null,
      create_token: randomUUID(),
      delete_token: null,
      created: now,
      updated: now
    })
    yield* subscriptions.rememberIdempotencyKey(appId, "create", key, fingerprint, hrn)
    return (yield* subscriptions.byHrn(hrn))!
  }))
  return json(202, { statusToken: result.create_token, ...subscriptionView(result) })
})

const subscriptionMissing = (hrn: string) =>
  notFound("subscriptionHrn", `subscription ${hrn} does not exist or is not accessible with these credentials`)

/** The caller's subscription named in the path (deleted ones included when asked). */
const ownSubscription = (includeDeleted: boolean) =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    const hrn = decodeSegment((yield* HttpRouter.params).subscription)
    const row = yield* (yield* SubscriptionsRepo).byHrn(hrn)
    if (
      row === undefined || row.owner_app !== appId || (!includeDeleted && row.state === "deleted")
    ) return yield* subscriptionMissing(hrn)
    return row
  })

const get = Effect.map(ownSubscription(false), (row) => json(200, subscriptionView(row)))

/** A page token is the last row's `seq`, base64url-encoded. */
const PageToken = Schema.transformOrFail(SearchParams.Param, Schema.Number, {
  strict: true,
  decode: (token, _, ast) => {
    const seq = Number(Buffer.from(token, "base64url").toString("utf8"))
    return Number.isInteger(seq) && seq >= 0
      ? ParseResult.succeed(seq)
      : ParseResult.fail(new ParseResult.Type(ast, token))
  },
  encode: (seq) => ParseResult.succeed(Buffer.from(String(seq)).toString("base64url"))
})

const ListParams = Schema.Struct({
  limit: Schema.optionalWith(SearchParams.IntegerParam.pipe(Schema.between(1, MAX_LIMIT)), {
    default: () => DEFAULT_LIMIT
  }),
  pageToken: Schema.optionalWith(PageToken, { default: () => 0 })
})

const list = Effect.gen(function*() {
  const { appId } = yield* Caller
  const { limit, pageToken: after } = yield* SearchParams.decode(
    ListParams,
    (name) =>
      name === "limit"
        ? badRequest("limit", `limit must be an integer within 1..${MAX_LIMIT}`)
        : badRequest("pageToken", "unknown or malformed pageToken")
  )
  const rows = yield* (yield* SubscriptionsRepo).ownedBy(appId, after, limit + 1)
  const page = rows.slice(0, limit)
  const next = rows.length > limit ? { nextPageToken: Schema.encodeSync(PageToken)(page[page.length - 1]!.seq) } : {}
  return json(200, { limit, items: page.map(subscriptionView), ...next })
})

const remove = Effect.gen(function*() {
  const { appId } = yield* Caller
  const key = yield* idempotencyKey
  const row = yield* ownSubscription(true)
  const subscriptions = yield* SubscriptionsRepo
  const token = yield* transaction(Effect.gen(function*() {
    const remembered = yield* subscriptions.idempotencyKey(appId, "delete", key)
    if (remembered !== undefined && remembered.subscription_hrn !== row.hrn) {
      return yield* conflict(
        "x-idempotency-key",
        "this x-idempotency-key was used to delete a different subscription; use a new key for a new request"
      )
    }
    const current = (yield* subscriptions.byHrn(row.hrn))!
    if (current.state === "deleted") return current.delete_token!
    const deleteToken = randomUUID()
    yield* subscriptions.markDeleted(row.hrn, deleteToken, new Date().toISOString())
    if (remembered === undefined) yield* subscriptions.rememberIdempotencyKey(appId, "delete", key, row.hrn, row.hrn)
    return deleteToken
  }))
  return json(202, { statusToken: token })
})

const status = Effect.gen(function*() {
  const { appId } = yield* Caller
  const token = decodeSegment((yield* HttpRouter.params).token)
  const row = yield* (yield* SubscriptionsRepo).byToken(token)
  if (row === undefined || row.owner_app !== appId) {
    return yield* notFound("statusToken", "no operation is associated with this status token")
  }
  const state = row.delete_token === token ? "deleted" : row.state
  return json(200, { status: state, subscriptionHrn: row.hrn })
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post("/config/v1/subscriptions", withCaller(create)),
  HttpRouter.get("/config/v1/subscriptions", withCaller(list)),
  HttpRouter.get("/config/v1/subscriptions/status/:token", withCaller(status)),
  HttpRouter.get("/config/v1/subscriptions/:subscription", withCaller(get)),
  HttpRouter.del("/config/v1/subscriptions/:subscription", withCaller(remove))
)
