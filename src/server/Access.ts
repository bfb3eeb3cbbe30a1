import * as HttpRouter from "@effect/platform/HttpRouter"
import { Effect } from "effect"
import { Caller } from "./Auth.ts"
import { badRequest, catalogForbidden, forbidden, type Reply } from "./Reply.ts"
import { type CatalogRow, type LayerRow, Store } from "./Store.ts"

export type Permission = "read" | "write"

/** A path segment that names a catalog: a full HRN (raw or percent-encoded) or, as some base URLs carry, a bare id. */
export const decodeSegment = (segment: string | undefined): string => {
  if (segment === undefined) return ""
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

const findCatalog = (nameOrId: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    return nameOrId.startsWith("hrn:") ? yield* store.catalog(nameOrId) : yield* store.catalogById(nameOrId)
  }).pipe(Effect.orDie)

export const mayAccess = (catalog: CatalogRow, appId: string, permission: Permission) =>
  Effect.gen(function*() {
    if (catalog.owner_app === appId) return true
    const grant = yield* (yield* Store).grantOf(catalog.hrn, appId).pipe(Effect.orDie)
    return grant !== undefined && (permission === "read" ? grant.can_read === 1 : grant.can_read === 1 && grant.can_write === 1)
  })

/**
 * The catalog named in the path if the caller may use it. A catalog that exists but is not the
 * caller's answers exactly like one that does not exist, so no one can probe for names.
 */
export const catalogFor = (
  nameOrId: string,
  permission: Permission,
  denied: () => Reply = forbidden
): Effect.Effect<CatalogRow, Reply, Store | Caller> =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    const catalog = yield* findCatalog(nameOrId)
    if (catalog === undefined || !(yield* mayAccess(catalog, appId, permission))) return yield* Effect.fail(denied())
    return catalog
  })

export const configCatalogFor = (nameOrId: string, permission: Permission) => catalogFor(nameOrId, permission, catalogForbidden)

export const layerOf = (catalog: CatalogRow, layerId: string): Effect.Effect<LayerRow, Reply, Store> =>
  Effect.gen(function*() {
    const layer = yield* (yield* Store).layer(catalog.hrn, layerId).pipe(Effect.orDie)
    if (layer === undefined) {
      return yield* badRequest("layer", `Layer '${layerId}' is missing in the catalog configuration.`)
    }
    return layer
  })

/** `:catalog` and `:layer` from the route, checked for the caller. */
export const routeLayer = (permission: Permission) =>
  Effect.gen(function*() {
    const params = yield* HttpRouter.params
    const catalog = yield* catalogFor(decodeSegment(params.catalog), permission)
    const layer = yield* layerOf(catalog, decodeSegment(params.layer))
    return { catalog, layer }
  })

export const routeCatalog = (permission: Permission) =>
  Effect.flatMap(HttpRouter.params, (params) => catalogFor(decodeSegment(params.catalog), permission))
