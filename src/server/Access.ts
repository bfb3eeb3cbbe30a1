import * as HttpRouter from "@effect/platform/HttpRouter"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { DEFAULT_REGION } from "../domain/Region.ts"
import { Caller } from "./Auth.ts"
import { type CatalogRow, CatalogsRepo, type LayerRow } from "./db/CatalogsRepo.ts"
import { type CatalogAccessRow, Reads, type ReadsShape } from "./Reads.ts"
import { placementOf, regionUnavailable, replicaKey } from "./Regions.ts"
import { Replicas } from "./Replicas.ts"
import { badRequest, catalogForbidden, forbidden, orFail, Reply, type Result } from "./Reply.ts"

/**
 * The region a catalog-bound request is addressed to: the `<id>` of a `/regions/<id>/...` URL, or
 * undefined for the unprefixed paths (the catalog's primary region). Server.ts provides it to each
 * copy of the catalog-bound routes.
 */
export class ServedRegion
  extends Context.Tag("catalog-export/server/ServedRegion")<ServedRegion, { readonly region: string | undefined }>()
{}

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
    const grant = yield* (yield* CatalogsRepo).grantOf(catalog.hrn, appId)
    return grant !== undefined &&
      (permission === "read" ? grant.can_read === 1 : grant.can_read === 1 && grant.can_write === 1)
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
const access = (
  reads: ReadsShape,
  nameOrId: string,
  appId: string,
  permission: Permission,
  layerId: string | null,
  denied: () => Reply
): Result<CatalogAccessRow> => {
  const row = reads.catalogAccess(nameOrId, appId, layerId)
  return row === undefined || !allowed(row, permission) ? denied() : row
}

/**
 * Whether the region serving a request for the catalog of `row` (the URL's, else the catalog's
 * primary) is its secondary one. A region the catalog is not stored in answers like a missing
 * catalog; a region that is down answers 503.
 */
const servedBySecondary = (
  row: CatalogAccessRow,
  region: string | undefined,
  down: ReadonlySet<string>,
  denied: () => Reply
): Result<boolean> => {
  const primary = row.primary_region ?? DEFAULT_REGION
  const served = region ?? primary
  if (served !== primary && served !== row.secondary_region) return denied()
  if (down.size > 0 && down.has(served)) return regionUnavailable(served)
  return served !== primary
}

/** The catalog named in a catalog-bound request (metadata, blob, publish, ...), as the region it is addressed to serves it. */
export const catalogFor = (
  nameOrId: string,
  permission: Permission,
  denied: () => Reply = forbidden
): Effect.Effect<CatalogRow, Reply, Reads | Caller | ServedRegion | Replicas> =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    const row = yield* orFail(access(yield* Reads, nameOrId, appId, permission, null, denied))
    yield* orFail(servedBySecondary(row, (yield* ServedRegion).region, (yield* Replicas).down, denied))
    return catalogOf(row)
  })

/** The catalog named in a config API request: platform-wide, so served whichever region is down. */
export const configCatalogFor = (
  nameOrId: string,
  permission: Permission
): Effect.Effect<CatalogRow, Reply, Reads | Caller> =>
  Effect.gen(function*() {
    const { appId } = yield* Caller
    return catalogOf(yield* orFail(access(yield* Reads, nameOrId, appId, permission, null, catalogForbidden)))
  })

/** The region serving a catalog-bound request for `catalog` (checked by catalogFor), and where the catalog lives. */
export const servedIn = (catalog: CatalogRow) =>
  Effect.map(ServedRegion, ({ region }) => {
    const placement = placementOf(JSON.parse(catalog.config))
    return { placement, region: region ?? placement.primary }
  })

/** A layer of `catalog` with the key of its data in the region serving the request (see `replicaKey`). */
export const layerOf = (
  catalog: CatalogRow,
  layerId: string
): Effect.Effect<LayerRow, Reply, CatalogsRepo | ServedRegion> =>
  Effect.gen(function*() {
    const layer = yield* (yield* CatalogsRepo).layer(catalog.hrn, layerId)
    if (layer === undefined) return yield* missingLayer(layerId)
    const { placement, region } = yield* servedIn(catalog)
    return { ...layer, pk: replicaKey(layer.pk, layer.layer_type, region !== placement.primary) }
  })

const missingLayer = (layerId: string) =>
  badRequest("layer", `Layer '${layerId}' is missing in the catalog configuration.`)

/** Where a request is addressed: the region of its URL (undefined: the catalog's primary), and the regions that are down. */
export interface Addressed {
  readonly region: string | undefined
  readonly down: ReadonlySet<string>
}

/**
 * A layer of a catalog as the caller may use it, in the region the request is addressed to: both
 * rows (the layer's `pk` is the key of its data in that region, see `replicaKey`), or the 403, 400 or
 * 503 that answers the request.
 */
export const layerAccess = (
  reads: ReadsShape,
  nameOrId: string,
  layerId: string,
  appId: string,
  permission: Permission,
  at: Addressed
): Result<{ readonly catalog: CatalogRow; readonly layer: LayerRow }> => {
  const row = access(reads, nameOrId, appId, permission, layerId, forbidden)
  if (row instanceof Reply) return row
  const secondary = servedBySecondary(row, at.region, at.down, forbidden)
  if (secondary instanceof Reply) return secondary
  if (row.layer_pk === null) return missingLayer(layerId)
  const layer: LayerRow = {
    pk: replicaKey(row.layer_pk, row.layer_type!, secondary),
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
    const at = { region: (yield* ServedRegion).region, down: (yield* Replicas).down }
    return yield* orFail(
      layerAccess(yield* Reads, decodeSegment(params.catalog), decodeSegment(params.layer), appId, permission, at)
    )
  })

export const routeCatalog = (permission: Permission) =>
  Effect.flatMap(HttpRouter.params, (params) => catalogFor(decodeSegment(params.catalog), permission))
