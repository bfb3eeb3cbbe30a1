import * as HttpRouter from "@effect/platform/HttpRouter"
import { Effect } from "effect"
import { Caller } from "./Auth.ts"
import { type ReadsShape, Reads } from "./Reads.ts"
import { badRequest, catalogForbidden, forbidden, orFail, Reply, type Result } from "./Reply.ts"
import { type CatalogAccessRow, type CatalogRow, type LayerRow, Store } from "./Store.ts"

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

export const mayAccess = (catalog: CatalogRow, appId: string, permission: Permission) =>
  Effect.gen(function*() {
    if (catalog.owner_app === appId) return true
    const grant = yield* (yield* Store).grantOf(catalog.hrn, appId).pipe(Effect.orDie)
    return grant !== undefined && (permission === "read" ? grant.can_read === 1 : grant.can_read === 1 && grant.can_write === 1)
  })

const allowed = (row: CatalogAccessRow, permission: Permission) =>
  row.owns === 1 || (permission === "read" ? row.can_read === 1 : row.can_read === 1 && row.can_write === 1)

const catalogOf = (row: CatalogAccessRow): CatalogRow => ({
  hrn: row.hrn,
  id: row.id,
  owner_app: row.owner_app,
  config: row.config,
  created: row.created,
  latest_version: row.latest_version,
  min_version: row.min_version
})

/**
 * The catalog named in the path (and one of its layers) if the caller may use it, in one query. A
 * catalog that exists but is not the caller's answers exactly like one that does not exist, so no
 * one can probe for names.
 */
const access = (reads: ReadsShape, nameOrId: string, appId: string, permission: Permission, layerId: string | null, denied: () => Reply): Result<CatalogAccessRow> => {
  const row = reads.catalogAccess(nameOrId, appId, layerId)
  return row === undefined || !allowed(row, permission) ? denied() : row
}

export const catalogFor = (
  nameOrId: string,
  permission: Permission,
  denied: () => Reply = forbidden
): Effect.Effect<CatalogRow, Reply, Reads | Caller> =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    return catalogOf(yield* orFail(access(yield* Reads, nameOrId, appId, permission, null, denied)))
  })

export const configCatalogFor = (nameOrId: string, permission: Permission) => catalogFor(nameOrId, permission, catalogForbidden)

export const layerOf = (catalog: CatalogRow, layerId: string): Effect.Effect<LayerRow, Reply, Store> =>
  Effect.gen(function*() {
    const layer = yield* (yield* Store).layer(catalog.hrn, layerId).pipe(Effect.orDie)
    if (layer === undefined) return yield* missingLayer(layerId)
    return layer
  })

const missingLayer = (layerId: string) => badRequest("layer", `Layer '${layerId}' is missing in the catalog configuration.`)

/** A layer of a catalog as the caller may use it: both rows, or the 403 or 400 that answers the request. */
export const layerAccess = (
  reads: ReadsShape,
  nameOrId: string,
  layerId: string,
  appId: string,
  permission: Permission
): Result<{ readonly catalog: CatalogRow; readonly layer: LayerRow }> => {
  const row = access(reads, nameOrId, appId, permission, layerId, forbidden)
  if (row instanceof Reply) return row
  if (row.layer_pk === null) return missingLayer(layerId)
  const layer: LayerRow = {
    pk: row.layer_pk,
    catalog_hrn: row.hrn,
    id: row.layer_id!,
    layer_type: row.layer_type!,
    config: row.layer_config!,
    created: row.layer_created!
  }
  return { catalog: catalogOf(row), layer }
}

/** `:catalog` and `:layer` from the route, checked for the caller. */
export const routeLayer = (permission: Permission) =>
  Effect.gen(function*() {
    const params = yield* HttpRouter.params
    const { appId } = yield* Caller
    return yield* orFail(layerAccess(yield* Reads, decodeSegment(params.catalog), decodeSegment(params.layer), appId, permission))
  })

export const routeCatalog = (permission: Permission) =>
  Effect.flatMap(HttpRouter.params, (params) => catalogFor(decodeSegment(params.catalog), permission))
