import * as HttpRouter from "@effect/platform/HttpRouter"
import * as Effect from "effect/Effect"
import { type Feature, featureCollection } from "../../domain/Notification.ts"
import { decodeSegment, routeLayer } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import type { LayerRow } from "../db/CatalogsRepo.ts"
import { transaction } from "../db/Database.ts"
import { FeaturesRepo } from "../db/FeaturesRepo.ts"
import { deliver } from "../Notifications.ts"
import { badRequest, conflict, json, notFound } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"

/**
 * The local service's own feature API for interactive map layers (the platform's interactive API is
 * outside the interface). A layer is a feature collection; changes come in transactions, each one
 * a new layer version, and every transaction notifies the layer's subscriptions.
 *
 *   GET  /features/v1/catalogs/{hrn}/layers/{layer}/features          -> FeatureCollection
 *   GET  /features/v1/catalogs/{hrn}/layers/{layer}/features/{id}     -> Feature
 *   POST /features/v1/catalogs/{hrn}/layers/{layer}/transactions      {insert?, update?, delete?}
 */

const MAX_CHANGES = 10_000

type Json = Record<string, any>

const interactiveLayer = (permission: "read" | "write") =>
  Effect.gen(function*() {
    const { catalog, layer } = yield* routeLayer(permission)
    if (layer.layer_type !== "interactivemap") {
      return yield* badRequest(
        "layer",
        `layer '${layer.id}' is a ${layer.layer_type} layer; the feature API serves interactive map layers`
      )
    }
    return { catalog, layer }
  })

const list = Effect.gen(function*() {
  const { layer } = yield* interactiveLayer("read")
  const rows = yield* (yield* FeaturesRepo).features(layer.pk)
  return json(200, featureCollection(rows.map((r) => JSON.parse(r.feature) as Feature)))
})

const getOne = Effect.gen(function*() {
  const { layer } = yield* interactiveLayer("read")
  const id = decodeSegment((yield* HttpRouter.params).feature)
  const [row] = yield* (yield* FeaturesRepo).featuresByIds(layer.pk, [id])
  if (row === undefined) return yield* notFound("featureId", `layer '${layer.id}' has no feature '${id}'`)
  return json(200, JSON.parse(row.feature))
})

/** A GeoJSON feature as stored: `type`, a string `id`, `geometry` (or null) and `properties` (or null), plus any other members. */
const checkFeature = (value: unknown, at: string, needsId: boolean) =>
  Effect.gen(function*() {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return yield* badRequest(at, "a GeoJSON Feature object is required")
    }
    const f = value as Json
    if (f.type !== "Feature") {
      return yield* badRequest(`${at}.type`, `type must be "Feature"`)
    }
    if (
      f.geometry !== undefined && f.geometry !== null &&
      (typeof f.geometry !== "object" || typeof f.geometry.type !== "string")
    ) {
      return yield* badRequest(`${at}.geometry`, "geometry must be a GeoJSON geometry object or null")
    }
    if (
      f.properties !== undefined && f.properties !== null &&
      (typeof f.properties !== "object" || Array.isArray(f.properties))
    ) {
      return yield* badRequest(`${at}.properties`, "properties must be an object or null")
    }
    let id = f.id
    if (id === undefined && !needsId) id = crypto.randomUUID()
    if (typeof id === "number" && Number.isFinite(id)) id = String(id)
    if (typeof id !== "string" || id === "" || id.length > 500) {
      return yield* badRequest(`${at}.id`, "a feature id (a non-empty string or a number) is required")
    }
    return { ...f, type: "Feature", id, geometry: f.geometry ?? null, properties: f.properties ?? null } as Feature & {
      id: string
    }
  })

const arrayField = (body: Json, name: string) =>
  body[name] === undefined
    ? Effect.succeed([] as Array<unknown>)
    : Array.isArray(body[name])
    ? Effect.succeed(body[name] as Array<unknown>)
    : badRequest(name, `${name} must be an array`)

const featureTransaction = Effect.gen(function*() {
  const { catalog, layer } = yield* interactiveLayer("write")
  const { appId } = yield* Caller
  const body = (yield* RequestBody.json) as Json
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return yield* badRequest("body", "a JSON object {insert, update, delete} is required")
  }
  const insertRaw = yield* arrayField(body, "insert")
  const updateRaw = yield* arrayField(body, "update")
  const deleteRaw = yield* arrayField(body, "delete")
  const total = insertRaw.length + updateRaw.length + deleteRaw.length
  if (total === 0) {
    return yield* badRequest("body", "a transaction needs at least one feature to insert, update or delete")
  }
  if (total > MAX_CHANGES) return yield* badRequest("body", `at most ${MAX_CHANGES} changes per transaction`)
  const inserts = yield* Effect.forEach(insertRaw, (f, i) => checkFeature(f, `insert[${i}]`, false))
  const updates = yield* Effect.forEach(updateRaw, (f, i) => checkFeature(f, `update[${i}]`, true))
  const deletes: Array<string> = []
  for (const [i, id] of deleteRaw.entries()) {
    if ((typeof id !== "string" || id === "") && typeof id !== "number") {
      return yield* badRequest(`delete[${i}]`, "delete lists feature ids (strings or numbers)")
    }
    deletes.push(String(id))
  }
  const ids = [...inserts.map((f) => f.id), ...updates.map((f) => f.id), ...deletes]
  const twice = ids.find((id, i) => ids.indexOf(id) !== i)
  if (twice !== undefined) {
    return yield* badRequest("body", `feature '${twice}' appears more than once in the transaction`)
  }
  return yield* commit(catalog.hrn, layer, appId, inserts, updates, deletes)
})

const commit = (
  catalogHrn: string,
  layer: LayerRow,
  author: string,
  inserts: ReadonlyArray<Feature & { id: string }>,
  updates: ReadonlyArray<Feature & { id: string }>,
  deletes: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const features = yield* FeaturesRepo
    const result = yield* transaction(Effect.gen(function*() {
      const existing = new Map(
        (yield* features.featuresByIds(layer.pk, [
          ...inserts.map((f) => f.id),
          ...updates.map((f) => f.id),
          ...deletes
        ])).map((r) => [r.id, r])
      )
      const taken = inserts.find((f) => existing.has(f.id))
      if (taken !== undefined) {
        return yield* conflict("insert", `feature '${taken.id}' already exists; update it instead`)
      }
      const missing = [...updates.map((f) => f.id), ...deletes].find((id) => !existing.has(id))
      if (missing !== undefined) {
        return yield* notFound("featureId", `layer '${layer.id}' has no feature '${missing}' to update or delete`)
      }
      const version = (yield* features.latestVersion(layer.pk)) + 1
      const createdAt = Date.now()
      yield* features.insertTransaction(layer.pk, version, author, createdAt)
      for (const f of [...inserts, ...updates]) {
        yield* features.put(layer.pk, f.id, JSON.stringify(f), version)
      }
      for (const id of deletes) yield* features.remove(layer.pk, id)
      const deleted = deletes.map((id) => JSON.parse(existing.get(id)!.feature) as Feature)
      yield* deliver({
        catalogHrn,
        layerId: layer.id,
        version,
        author,
        createdAt,
        inserted: inserts,
        updated: updates,
        deleted
      })
      return {
        version,
        author,
        createdAt,
        inserted: inserts.map((f) => f.id),
        updated: updates.map((f) => f.id),
        deleted: deletes
      }
    }))
    return json(200, result)
  })

const base = "/features/v1/catalogs/:catalog/layers/:layer"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(`${base}/features`, withCaller(list)),
  HttpRouter.get(`${base}/features/:feature`, withCaller(getOne)),
  HttpRouter.post(`${base}/transactions`, withCaller(featureTransaction))
)
