import * as Schema from "effect/Schema"

/**
 * Storage regions of a catalog. The interface names a US West and an EU West region; the config API
 * spells them `us-oregon` and `eu-ireland` (`ap-seoul` exists on the platform but is not selectable).
 * A catalog's regions live in `replication.regions`: one `primary`, and a `secondary` for a
 * multi-region catalog.
 */
export const SELECTABLE_REGIONS = ["eu-ireland", "us-oregon"] as const
export type RegionId = (typeof SELECTABLE_REGIONS)[number]

export const DEFAULT_REGION: RegionId = "eu-ireland"
export const US_WEST: RegionId = "us-oregon"

/** Layer types a US West or a multi-region catalog may hold. */
export const REPLICABLE_LAYER_TYPES: ReadonlyArray<string> = ["versioned", "volatile", "stream"]

const ALIASES: Record<string, RegionId> = {
  "eu-ireland": "eu-ireland",
  "eu-west": "eu-ireland",
  "eu west": "eu-ireland",
  "us-oregon": "us-oregon",
  "us-west": "us-oregon",
  "us west": "us-oregon"
}

/** A region id from its id or its display name ("US West", "eu-west", ...); undefined when unknown. */
export const regionOf = (input: string): RegionId | undefined => ALIASES[input.trim().toLowerCase()]

export interface ReplicationRegion {
  readonly id: string
  readonly role: "primary" | "secondary"
}

export interface Replication {
  readonly regions: ReadonlyArray<ReplicationRegion>
}

/**
 * The local service's own regions administration (`/local/v1/regions`, no platform counterpart): the
 * state of each region and how many copies between the replicas of multi-region catalogs are pending.
 */
export const RegionsStatus = Schema.Struct({
  regions: Schema.Array(Schema.Struct({ id: Schema.String, state: Schema.Literal("up", "down") })),
  pendingCopies: Schema.Number
})
export type RegionsStatus = typeof RegionsStatus.Type

export const LOCAL_REGIONS_PATH = "/local/v1/regions"
