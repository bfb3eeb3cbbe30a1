import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ConfigApi } from "../src/client/ConfigApi.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import { DurationString } from "../src/domain/DurationString.ts"
import { ExitCode } from "../src/domain/ExitCode.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { ConnectionFields, JobConfigError } from "../src/export/JobConfig.ts"
import { versionBounds } from "../src/export/Plan.ts"
import { PositiveInt } from "../src/export/Settings.ts"
import { type ExportCheck, guard, guardedLayers } from "../src/retention/Guard.ts"
import { type SharedHandle, sharedHandles } from "../src/retention/HandleReuse.ts"
import { describePolicy, type Policy, RetentionRefused, targetMinimum } from "../src/retention/Policy.ts"
import { type ExpiredTable, expireTables } from "./tables.ts"

/**
 * A retention job config: one of keepLast, olderThan, minimum; and `requireExported` (where the
 * exports are: only versions exported there may go) or, deliberately, `skipExportCheck: true`.
 */
export const RetentionJob = Schema.Struct({
  job: Schema.Literal("retention"),
  ...ConnectionFields,
  catalog: Schema.String,
  keepLast: Schema.optional(PositiveInt),
  olderThan: Schema.optional(DurationString),
  minimum: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  requireExported: Schema.optional(Schema.String),
  skipExportCheck: Schema.optional(Schema.Boolean),
  layers: Schema.optional(Schema.Array(Schema.String)),
  dryRun: Schema.optional(Schema.Boolean)
})
export type RetentionJob = typeof RetentionJob.Type

export const policyOfJob = (job: RetentionJob, file: string): Effect.Effect<Policy, JobConfigError> => {
  const given = [job.keepLast, job.olderThan, job.minimum].filter((v) => v !== undefined).length
  if (given !== 1) {
    return Effect.fail(
      new JobConfigError({ message: `Job config ${file}: give exactly one of keepLast, olderThan, minimum.` })
    )
  }
  if (job.keepLast !== undefined) return Effect.succeed({ _tag: "KeepLast", count: job.keepLast })
  if (job.minimum !== undefined) return Effect.succeed({ _tag: "Minimum", version: job.minimum })
  return Effect.succeed({ _tag: "OlderThan", age: job.olderThan! })
}

export interface RetentionRequest {
  readonly catalog: string
  readonly policy: Policy
  readonly exportCheck: ExportCheck
}

export interface RetentionPlan {
  readonly catalogHrn: string
  readonly policy: string
  readonly latest: number
  readonly minimum: number
  readonly target: number
  /** The versions that raising the minimum to `target` deletes, oldest first. */
  readonly deleted: ReadonlyArray<{ readonly version: number; readonly timestamp: number }>
  /** Why the plan must not be carried out (the guard found a gap, or no check was chosen). */
  readonly refusal: RetentionRefused | undefined
  /** Surviving partitions whose data the deletion takes with it (data-handle rule 3). */
  readonly sharedHandles: ReadonlyArray<SharedHandle>
  /**
   * The catalog's Iceberg tables in the `requireExported` location: the tags below `target` and the
   * files only they use, which carrying the plan out expires (listed, nothing removed yet).
   */
  readonly tables: ReadonlyArray<ExpiredTable>
  /** The check the plan was made with (carrying it out expires the tables in its location). */
  readonly exportCheck: ExportCheck
}

/**
 * An explicit minimum is taken as asked or refused, never clamped: past the latest version it would
 * delete the last version (the service refuses that too), below the current minimum it would mean
 * undeleting versions that are gone.
 */
const checkExplicitMinimum = (
  catalogHrn: string,
  version: number,
  bounds: { readonly latest: number; readonly minimum: number }
) =>
  version > bounds.latest
    ? new RetentionRefused({
      message:
        `Refusing to set the minimum version of ${catalogHrn} to ${version}: the latest version is ${bounds.latest}, and the last version ` +
        `of a catalog can never be deleted. Give --minimum ${bounds.latest} at most (it keeps only version ${bounds.latest}).`
    })
    : version < bounds.minimum
    ? new RetentionRefused({
      message:
        `Refusing to set the minimum version of ${catalogHrn} to ${version}: it is already ${bounds.minimum}, and the minimum version ` +
        `never moves down (versions below ${bounds.minimum} are deleted for good).`
    })
    : Effect.void

/**
 * What the policy deletes, with the guard's verdict and the data-handle check; changes nothing. A
 * plan the guard refuses is still a plan (a dry run prints it); carrying it out is refused.
 */
export const planRetention = (request: RetentionRequest) =>
  Effect.gen(function*() {
    const catalogHrn = yield* Hrn.canonicalCatalog(request.catalog)
    const metadata = yield* MetadataApi
    const bounds = yield* versionBounds(catalogHrn)
    const versions = yield* metadata.versions(catalogHrn, {
      startVersion: bounds.minimum - 1,
      endVersion: bounds.latest
    }).pipe(Stream.runCollect)
    const stamps = [...versions].map((v) => ({ version: v.version, timestamp: v.timestamp })).sort((a, b) =>
      a.version - b.version
    )
    if (request.policy._tag === "Minimum") yield* checkExplicitMinimum(catalogHrn, request.policy.version, bounds)
    const target = targetMinimum(request.policy, bounds, stamps, Date.now())
    const check = request.exportCheck
    const deletes = target > bounds.minimum
    const refusal = check._tag === "Missing"
      ? new RetentionRefused({
        message: `Refusing to delete versions of ${catalogHrn} without the export guard: ${check.how}.`
      })
      : deletes && check._tag === "RequireExported"
      ? yield* guard(catalogHrn, target, bounds.minimum, check.location, check.layers).pipe(
        Effect.as(undefined),
        Effect.catchTag("RetentionRefused", Effect.succeed)
      )
      : undefined
    const layers = check._tag === "RequireExported" ? check.layers : undefined
    const shared: Array<SharedHandle> = []
    if (deletes) {
      const { layers: checked } = yield* guardedLayers(catalogHrn, layers)
      for (const layer of checked) {
        shared.push(...(yield* sharedHandles(catalogHrn, layer, bounds.minimum, target, bounds.latest)))
      }
    }
    const tables = deletes && refusal === undefined && check._tag === "RequireExported"
      ? yield* expireTables(check.location.dest, catalogHrn, target, true)
      : []
    return {
      catalogHrn,
      policy: describePolicy(request.policy),
      latest: bounds.latest,
      minimum: bounds.minimum,
      target,
      deleted: stamps.filter((v) => v.version < target),
      refusal,
      sharedHandles: shared,
      tables,
      exportCheck: check
    } satisfies RetentionPlan
  })

/**
 * Raises the minimum, then expires the snapshots below it in the Iceberg tables of the guard's
 * location (what a table fails is reported in its entry: the next expiry catches up).
 */
export const applyRetention = (plan: RetentionPlan) =>
  Effect.gen(function*() {
    const check = plan.exportCheck
    if (plan.target <= plan.minimum) return []
    yield* (yield* MetadataApi).setMinimumVersion(plan.catalogHrn, plan.target)
    if (check._tag !== "RequireExported" || plan.tables.length === 0) return []
    return yield* expireTables(check.location.dest, plan.catalogHrn, plan.target, false)
  })

/**
 * Turns automatic version deletion on (keep N) or off, and waits until the service has applied it:
 * by its status link, or, when it answers a bare 202 (as the interface describes), by reading the
 * configuration back until it shows the change.
 */
export const setAutomaticDeletion = (catalog: string, keep: number | "disable") =>
  Effect.gen(function*() {
    const catalogHrn = yield* Hrn.canonicalCatalog(catalog)
    const config = yield* ConfigApi
    let link
    if (keep === "disable") link = yield* config.disableAutomaticVersionDeletion(catalogHrn)
    else {
      // The whole configuration as the service sent it: PUT replaces it, so nothing may be lost on the way.
      const current = yield* config.getCatalogConfiguration(catalogHrn)
      link = yield* config.updateCatalog(catalogHrn, {
        ...current,
        automaticVersionDeletion: { numberOfVersionsToKeep: keep }
      })
    }
    if (link !== undefined) return yield* config.awaitStatus(link)
    const applied = (c: Readonly<Record<string, unknown>>) => {
      const kept = (c.automaticVersionDeletion as { numberOfVersionsToKeep?: unknown } | undefined)
        ?.numberOfVersionsToKeep
      return keep === "disable" ? kept === undefined : kept === keep
    }
    yield* config.getCatalogConfiguration(catalogHrn).pipe(
      Effect.filterOrFail(applied, () => new AutomaticDeletionPending({ catalogHrn })),
      Effect.retry({
        schedule: Schedule.spaced("500 millis"),
        times: 120,
        while: (e) => e._tag === "AutomaticDeletionPending"
      })
    )
  })

/** The service accepted the change to automatic version deletion but did not show it within a minute. */
export class AutomaticDeletionPending
  extends Schema.TaggedError<AutomaticDeletionPending>()("AutomaticDeletionPending", { catalogHrn: Schema.String })
{
  get exitCode() {
    return ExitCode.failure
  }

  override get message() {
    return `The change to automatic version deletion of ${this.catalogHrn} was accepted but its configuration did not show it within a minute; check it with catalog-export catalogs get --catalog ${this.catalogHrn}.`
  }
}
