import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ConfigApi } from "../client/ConfigApi.ts"
import { RegionUnavailable } from "../client/Errors.ts"
import { inRegion } from "../client/Regional.ts"
import { outageLimit } from "../client/Retry.ts"
import { regionOf } from "../domain/Region.ts"
import { NotFound } from "./Errors.ts"
import { versionBounds } from "./Plan.ts"

/**
 * Exports of multi-region catalogs: which region to read, and failing over to the other one when it
 * keeps failing. A request that fails FAILOVER_AFTER times in a row with 5xx or no answer (Retry.ts
 * `outageLimit`) ends the attempt with RegionUnavailable; the export then runs again in the backup
 * region, where it resumes as any interrupted export does: parts already finished (checkpointed)
 * are kept, the others are listed and fetched anew there. A versioned export fails over only when its
 * catalog version is readable in the backup; a volatile snapshot has one part, so it is read whole
 * from one region, never mixed.
 */

/** Outage failures in a row of one request before an export gives up on its region. */
export const FAILOVER_AFTER = 5

export interface Regions {
  /** Whether the catalog is stored in two regions (then `selected` is always set). */
  readonly multiRegion: boolean
  /** The region read first: `--region`, else the primary (undefined: lookup's default, single-region catalogs). */
  readonly selected: string | undefined
  /** The region to fail over to, when the catalog has one and failover is on. */
  readonly backup: string | undefined
}

export interface Failover {
  readonly from: string
  readonly to: string
  /** What failed in `from`, in a sentence. */
  readonly reason: string
}

const replicationRegions = (replication: unknown): ReadonlyArray<{ readonly id: string; readonly role: string }> => {
  const regions = (replication as { regions?: unknown } | undefined)?.regions
  return Array.isArray(regions) ? regions.filter((r) => typeof r?.id === "string") : []
}

/** The regions an export of catalog `hrn` reads from, from its configuration (the config API is platform-wide). */
export const regionsFor = (hrn: string, requested: string | undefined, failover: boolean) =>
  Effect.flatMap(
    ConfigApi,
    (config) =>
      Effect.flatMap(config.getCatalog(hrn), (catalog) => regionsOf(hrn, catalog.replication, requested, failover))
  )

/** The regions an export reads from, given the catalog's `replication` (as the config API shows it). */
export const regionsOf = (hrn: string, replication: unknown, requested: string | undefined, failover: boolean) =>
  Effect.gen(function*() {
    const regions = replicationRegions(replication)
    if (regions.length < 2) return { multiRegion: false, selected: requested, backup: undefined } satisfies Regions
    const primary = (regions.find((r) => r.role === "primary") ?? regions[0]!).id
    const selected = requested === undefined ? primary : regionOf(requested) ?? requested
    if (!regions.some((r) => r.id === selected)) {
      return yield* new NotFound({
        what: "catalog",
        message: `Catalog ${hrn} is not stored in region ${selected} (its regions: ${
          regions.map((r) => r.id).join(", ")
        }); choose one of them with --region.`
      })
    }
    return {
      multiRegion: true,
      selected,
      backup: failover ? regions.find((r) => r.id !== selected)?.id : undefined
    } satisfies Regions
  })

/** Why catalog version `version` cannot be read in the region the metadata API is bound to, if it cannot. */
export const versionMissing = (catalogHrn: string, version: number) =>
  Effect.map(versionBounds(catalogHrn), (bounds) =>
    version > bounds.latest
      ? Option.some(`its latest version there is ${bounds.latest}`)
      : version < bounds.minimum
      ? Option.some(`its minimum version there is ${bounds.minimum}`)
      : Option.none<string>())

/**
 * Runs `attempt` with the data APIs bound to the selected region; when that region keeps failing and
 * the catalog has a backup region, asks `blocker` (run in the backup) whether anything keeps the
 * attempt from going on there, and if not runs it again in the backup. `onFailover` hears of it.
 */
export const withFailover = <A, E, R, E2, R2>(
  regions: Regions,
  attempt: (region: string | undefined) => Effect.Effect<A, E, R>,
  blocker: (backup: string) => Effect.Effect<Option.Option<string>, E2, R2>,
  onFailover: (failover: Failover) => void
) => {
  const first = Effect.provide(attempt(regions.selected), inRegion(regions.selected))
  const { backup, selected } = regions
  if (backup === undefined || selected === undefined) return first
  return Effect.locally(first, outageLimit, FAILOVER_AFTER).pipe(
    Effect.catchIf(
      (e): e is E & RegionUnavailable => e instanceof RegionUnavailable,
      (unavailable) =>
        Effect.gen(function*() {
          const reason = unavailable.lastError.message
          const blocked = yield* Effect.provide(blocker(backup), inRegion(backup))
          if (Option.isSome(blocked)) {
            yield* Effect.logWarning(
              `region ${selected} keeps failing and the export cannot fail over to ${backup}: ${blocked.value}`
            )
            return yield* Effect.fail(unavailable)
          }
          yield* Effect.logWarning(
            `region ${selected} keeps failing (${unavailable.failures} times in a row, last: ${reason}); failing over to ${backup}`
          )
            .pipe(Effect.annotateLogs({ event: "failover", from: selected, to: backup }))
          onFailover({ from: selected, to: backup, reason })
          return yield* Effect.provide(attempt(backup), inRegion(backup))
        })
    )
  )
}
