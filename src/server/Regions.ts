import * as Effect from "effect/Effect"
import {
  DEFAULT_REGION,
  regionOf,
  REPLICABLE_LAYER_TYPES,
  type Replication,
  type ReplicationRegion,
  SELECTABLE_REGIONS,
  US_WEST
} from "../domain/Region.ts"
import { badRequest, dataError } from "./Reply.ts"

/**
 * Regional storage rules of the interface: the region is chosen at creation (`region`, a shortcut
 * the local service accepts, or the config API's `replication.regions`) and never changes; a US West
 * catalog and a multi-region catalog hold only versioned, volatile and stream layers.
 */

type Json = Record<string, any>

const unknownRegion = (field: string, value: unknown) =>
  badRequest(
    field,
    `unknown or unselectable region ${JSON.stringify(value)}: choose ${
      SELECTABLE_REGIONS.join(" or ")
    } (EU West or US West)`
  )

/** The replication block a create request asks for, normalised to `{regions: [{id, role}]}` with the primary first. */
export const replicationOfCreate = (body: Json) =>
  Effect.gen(function*() {
    let primary: string | undefined
    if (body.region !== undefined) {
      primary = typeof body.region === "string" ? regionOf(body.region) : undefined
      if (primary === undefined) return yield* unknownRegion("region", body.region)
    }
    const replication = body.replication
    if (
      replication === undefined ||
      (typeof replication === "object" && replication !== null && Object.keys(replication).length === 0)
    ) {
      return { regions: [{ id: primary ?? DEFAULT_REGION, role: "primary" }] } satisfies Replication
    }
    if (
      typeof replication !== "object" || replication === null || !Array.isArray(replication.regions) ||
      replication.regions.length === 0
    ) {
      return yield* badRequest("replication.regions", "replication needs a non-empty array regions: [{id, role}]")
    }
    const regions: Array<ReplicationRegion> = []
    for (const [i, entry] of (replication.regions as Array<Json>).entries()) {
      const id = typeof entry?.id === "string" ? regionOf(entry.id) : undefined
      if (id === undefined) return yield* unknownRegion(`replication.regions[${i}].id`, entry?.id)
      const role = entry.role ?? (replication.regions.length === 1 ? "primary" : undefined)
      if (role !== "primary" && role !== "secondary") {
        return yield* badRequest(`replication.regions[${i}].role`, "role must be primary or secondary")
      }
      if (regions.some((r) => r.id === id)) {
        return yield* badRequest("replication.regions", `region ${id} is listed twice`)
      }
      regions.push({ id, role })
    }
    const primaries = regions.filter((r) => r.role === "primary")
    if (primaries.length !== 1) {
      return yield* badRequest("replication.regions", "exactly one region must have the role primary")
    }
    if (regions.length > 2) {
      return yield* badRequest(
        "replication.regions",
        "a catalog has one primary and at most one secondary (backup) region"
      )
    }
    if (primary !== undefined && primaries[0]!.id !== primary) {
      return yield* badRequest(
        "region",
        `region ${primary} contradicts the primary region ${primaries[0]!.id} of replication`
      )
    }
    return { regions: [...primaries, ...regions.filter((r) => r.role === "secondary")] } satisfies Replication
  })

/** The regions of a stored catalog configuration; catalogs created without a choice live in EU West. */
export const regionsOf = (config: Json): ReadonlyArray<ReplicationRegion> => {
  const regions = config.replication?.regions
  return Array.isArray(regions) && regions.length > 0 ? regions : [{ id: DEFAULT_REGION, role: "primary" }]
}

export const isMultiRegion = (config: Json) => regionsOf(config).length > 1

/** Refuses layers the catalog's regions cannot hold. */
export const checkLayerTypes = (replication: Json, layers: ReadonlyArray<Json>) =>
  Effect.gen(function*() {
    const regions = regionsOf({ replication })
    const multi = regions.length > 1
    const usWest = regions.some((r) => r.id === US_WEST)
    if (!multi && !usWest) return
    for (const [i, layer] of layers.entries()) {
      if (REPLICABLE_LAYER_TYPES.includes(layer.layerType)) continue
      const why = multi
        ? "a multi-region catalog can only contain versioned, volatile and stream layers"
        : "the US West region (us-oregon) supports only stream, versioned and volatile layers"
      return yield* badRequest(`layers[${i}].layerType`, `layer '${layer.id}' is ${layer.layerType}: ${why}`)
    }
  })

/**
 * For a full update (PUT): the region cannot change and the new layer set must suit the regions.
 * Drops the `region` shortcut from the body once checked (the stored form is `replication`).
 */
export const checkUpdate = (body: Json, previous: Json) =>
  Effect.gen(function*() {
    const primary = regionsOf(previous).find((r) => r.role === "primary")!.id
    if (body.region !== undefined) {
      const asked = typeof body.region === "string" ? regionOf(body.region) : undefined
      if (asked !== primary) {
        return yield* badRequest(
          "region",
          `the region of a catalog is chosen at creation and cannot be changed (it is ${primary}); delete and recreate the catalog`
        )
      }
      delete body.region
    }
    yield* checkLayerTypes(previous.replication ?? {}, (body.layers ?? []) as ReadonlyArray<Json>)
  })

/** A `region` query parameter of the resource lookup: undefined when absent. */
export const lookupRegion = (raw: string | undefined) =>
  Effect.gen(function*() {
    if (raw === undefined || raw === "") return undefined
    const region = regionOf(raw)
    if (region === undefined) return yield* unknownRegion("region", raw)
    return region
  })

/** The path prefix under which the catalog-bound APIs of one region are served. */
export const regionPrefix = (region: string): `/${string}` => `/regions/${region}`

const IN_URL = new RegExp(`^/regions/(${SELECTABLE_REGIONS.join("|")})(?:[/?]|$)`)

/** The region a request URL is addressed to (`/regions/<id>/...`), undefined for the unprefixed paths. */
export const regionInUrl = (
  url: string
): string | undefined => (url.startsWith("/regions/") ? IN_URL.exec(url)?.[1] : undefined)

/** Where a catalog's data lives: its primary region and, for a multi-region catalog, the secondary (backup) one. */
export interface Placement {
  readonly primary: string
  readonly secondary: string | undefined
}

export const placementOf = (config: Json): Placement => {
  const regions = regionsOf(config)
  return {
    primary: regions.find((r) => r.role === "primary")?.id ?? DEFAULT_REGION,
    secondary: regions.find((r) => r.role === "secondary")?.id
  }
}

/** The other region of a multi-region catalog. */
export const otherRegion = (placement: Placement, region: string): string | undefined =>
  placement.secondary === undefined ? undefined : region === placement.primary ? placement.secondary : placement.primary

/**
 * The key under which a layer's data is stored in one region (the `layer_pk` of partitions, blobs and
 * stream messages). Versioned layers replicate synchronously: both regions always hold the same data,
 * so it is stored once, under the layer's own key. Volatile and stream layers replicate
 * asynchronously and may differ: the secondary region's replica is stored under the negated key
 * (layer keys are positive, so it never collides).
 */
export const replicaKey = (layerPk: number, layerType: string, secondary: boolean): number =>
  secondary && layerType !== "versioned" ? -layerPk : layerPk

/** The answer of every catalog-bound request to a region that is down (`catalog-export regions down`). */
export const regionUnavailable = (region: string) =>
  dataError(503, "Service Unavailable", [{ name: "region", error: `region ${region} is unavailable` }])

/**
 * Versioned layers of a multi-region catalog take no new data while either region is down (a write is
 * acknowledged only once both regions have it): the region that is down, else undefined.
 */
export const versionedWritesBlockedBy = (placement: Placement, down: ReadonlySet<string>): string | undefined =>
  placement.secondary === undefined || down.size === 0
    ? undefined
    : [placement.primary, placement.secondary].find((r) => down.has(r))

export const versionedWritesRefused = (region: string) =>
  dataError(503, "Service Unavailable", [{
    name: "region",
    error:
      `region ${region} of this multi-region catalog is unavailable: versioned layers take no new data until both regions are up (data published before stays readable)`
  }])
