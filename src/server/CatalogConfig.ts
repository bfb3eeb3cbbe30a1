import * as Effect from "effect/Effect"
import { badRequest } from "./Reply.ts"
import { MAX_VERSIONS_TO_KEEP } from "./Versions.ts"

/** Checks of a catalog configuration as the config API takes it (create and full update). */

const CATALOG_ID = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/
const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,49}$/
export const LAYER_TYPES = ["versioned", "volatile", "stream", "index", "objectstore", "interactivemap"] as const
const NEEDS_CONTENT_TYPE = new Set(["versioned", "volatile", "stream", "index"])

type Json = Record<string, any>

const text = (body: Json, field: string, max: number, required: boolean) =>
  Effect.gen(function*() {
    const value = body[field]
    if (value === undefined && !required) return
    if (typeof value !== "string" || (required && value.length === 0) || value.length > max) {
      return yield* badRequest(field, `${field} is required: a string of at most ${max} characters`)
    }
  })

export const checkCatalogId = (id: unknown) =>
  typeof id === "string" && CATALOG_ID.test(id)
    ? Effect.void
    : badRequest("id", "id must be 3-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit")

export const checkAutomaticVersionDeletion = (value: unknown) =>
  Effect.gen(function*() {
    if (value === undefined) return
    const keep = (value as Json)?.numberOfVersionsToKeep
    if (!Number.isInteger(keep) || keep < 1 || keep > MAX_VERSIONS_TO_KEEP) {
      return yield* badRequest(
        "automaticVersionDeletion.numberOfVersionsToKeep",
        `numberOfVersionsToKeep must be an integer within 1..${MAX_VERSIONS_TO_KEEP}`
      )
    }
  })

export const checkLayer = (layer: Json, index: number) =>
  Effect.gen(function*() {
    const at = `layers[${index}]`
    if (typeof layer !== "object" || layer === null) return yield* badRequest(at, "a layer must be an object")
    if (typeof layer.id !== "string" || !LAYER_ID.test(layer.id)) {
      return yield* badRequest(`${at}.id`, "a layer id is 1-50 characters of A-Z, a-z, 0-9, '_', '.' and '-'")
    }
    if (typeof layer.name !== "string" || layer.name.length === 0 || layer.name.length > 120) {
      return yield* badRequest(`${at}.name`, "a layer name of 1-120 characters is required")
    }
    if (!(LAYER_TYPES as ReadonlyArray<string>).includes(layer.layerType)) {
      return yield* badRequest(`${at}.layerType`, `layerType must be one of ${LAYER_TYPES.join(", ")}`)
    }
    if (
      NEEDS_CONTENT_TYPE.has(layer.layerType) && (typeof layer.contentType !== "string" || layer.contentType === "")
    ) {
      return yield* badRequest(`${at}.contentType`, `a ${layer.layerType} layer needs a contentType`)
    }
    const scheme = layer.partitioning?.scheme ?? layer.partitioningScheme ?? "generic"
    // `tile` is the interface's name of the scheme the platform calls `heretile`.
    if (!["generic", "heretile", "tile"].includes(scheme)) {
      return yield* badRequest(`${at}.partitioning.scheme`, "scheme must be generic, heretile or tile")
    }
    if (layer.contentEncoding !== undefined && !["", "gzip", "identity"].includes(layer.contentEncoding)) {
      return yield* badRequest(`${at}.contentEncoding`, "contentEncoding must be gzip or empty")
    }
  })

/** A full catalog configuration (the body of create and of PUT). */
export const checkCatalog = (body: Json) =>
  Effect.gen(function*() {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* badRequest("body", "a JSON object is required")
    }
    yield* checkCatalogId(body.id)
    yield* text(body, "name", 200, true)
    yield* text(body, "summary", 1000, true)
    yield* text(body, "description", 10000, true)
    yield* checkAutomaticVersionDeletion(body.automaticVersionDeletion)
    if (body.layers !== undefined && !Array.isArray(body.layers)) {
      return yield* badRequest("layers", "layers must be an array")
    }
    const layers: Array<Json> = body.layers ?? []
    for (const [i, layer] of layers.entries()) {
      yield* checkLayer(layer, i)
    }
    const ids = layers.map((l) => l.id)
    const duplicate = ids.find((id, i) => ids.indexOf(id) !== i)
    if (duplicate !== undefined) return yield* badRequest("layers", `layer id '${duplicate}' appears twice`)
  })

/** The fields of a catalog the service keeps as given (layers and service-owned fields are kept apart). */
export const storedCatalogConfig = (body: Json, previous: Json = {}): Json => {
  const { layers: _layers, hrn: _hrn, created: _created, owner: _owner, id: _id, version: _version, ...rest } = body
  return { ...rest, owner: previous.owner, version: (previous.version ?? 1) + 1 }
}

/** The fields of a layer the service keeps as given. */
export const storedLayerConfig = (layer: Json): Json => {
  const { hrn: _hrn, created: _created, owner: _owner, id: _id, layerType: _layerType, ...rest } = layer
  return { summary: "", description: "", tags: [], billingTags: [], ...rest }
}
