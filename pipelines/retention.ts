import { Effect, Schema, Stream } from "effect"
import { ConfigApi } from "../src/client/ConfigApi.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { JobConfigError, PositiveInt } from "../src/export/JobConfig.ts"
import { parseCatalogHrn, versionBounds } from "../src/export/Plan.ts"
import { firstUncovered } from "../src/retention/Guard.ts"
import { describePolicy, parseAge, type Policy, RetentionRefused, targetMinimum } from "../src/retention/Policy.ts"

/** A retention job config: one of keepLast, olderThan, minimum. */
export const RetentionJob = Schema.Struct({
  job: Schema.Literal("retention"),
  lookupUrl: Schema.optional(Schema.String),
  credentials: Schema.optional(Schema.String),
  catalog: Schema.String,
  keepLast: Schema.optional(PositiveInt),
  olderThan: Schema.optional(Schema.String),
  minimum: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  requireExported: Schema.optional(Schema.String),
  layers: Schema.optional(Schema.Array(Schema.String)),
  dryRun: Schema.optional(Schema.Boolean)
})
export type RetentionJob = typeof RetentionJob.Type

export const policyOfJob = (job: RetentionJob, file: string): Effect.Effect<Policy, JobConfigError> => {
  const given = [job.keepLast, job.olderThan, job.minimum].filter((v) => v !== undefined).length
  if (given !== 1) {
    return Effect.fail(new JobConfigError({ message: `Job config ${file}: give exactly one of keepLast, olderThan, minimum.` }))
  }
  if (job.keepLast !== undefined) return Effect.succeed({ _tag: "KeepLast", count: job.keepLast })
  if (job.minimum !== undefined) return Effect.succeed({ _tag: "Minimum", version: job.minimum })
  const age = parseAge(job.olderThan!)
  return age === undefined
    ? Effect.fail(new JobConfigError({ message: `Job config ${file}: olderThan '${job.olderThan}' is not a duration (for example 30d, 12h, "7 days").` }))
    : Effect.succeed({ _tag: "OlderThan", age })
}

export interface RetentionRequest {
  readonly catalog: string
  readonly policy: Policy
  /** Refuse to delete versions whose data is not in a committed export under this directory. */
  readonly requireExported?: { readonly out: string; readonly layers?: ReadonlyArray<string> | undefined } | undefined
}

export interface RetentionPlan {
  readonly catalogHrn: string
  readonly policy: string
  readonly latest: number
  readonly minimum: number
  readonly target: number
  /** The versions that raising the minimum to `target` deletes, oldest first. */
  readonly deleted: ReadonlyArray<{ readonly version: number; readonly timestamp: number }>
}

/** The versioned layers whose data the guard protects: the listed ones, else every versioned layer. */
const guardedLayers = (catalogHrn: string, listed: ReadonlyArray<string> | undefined) =>
  Effect.gen(function*() {
    const catalog = yield* (yield* ConfigApi).getCatalog(catalogHrn)
    const versioned = catalog.layers.filter((l) => l.layerType === "versioned").map((l) => l.id)
    const unknown = (listed ?? []).find((id) => !versioned.includes(id))
    if (unknown !== undefined) {
      return yield* new RetentionRefused({ message: `Catalog ${catalogHrn} has no versioned layer '${unknown}' (its versioned layers: ${versioned.join(", ") || "none"}).` })
    }
    return { catalog, layers: listed ?? versioned }
  })

/**
 * Refuses a minimum that would delete data no committed export holds, naming the version and layer.
 * Shared by `retention --require-exported` and `export --raise-minimum`.
 */
export const guard = (catalogHrn: string, target: number, minimum: number, out: string, layers?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { catalog, layers: checked } = yield* guardedLayers(catalogHrn, layers)
    const gap = yield* firstUncovered(out, catalog, checked, minimum, target)
    if (gap !== undefined) {
      return yield* new RetentionRefused({
        message: `Refusing to raise the minimum version of ${catalogHrn} to ${target}: version ${gap.version} of layer '${gap.layer}' ` +
          `has no committed export in ${out}. Export it first (catalog-export backfill --catalog ${catalogHrn} --layer ${gap.layer} ` +
          `--from ${gap.version} --to ${target - 1} --out ${out}), or set a lower minimum.`
      })
    }
  })

/**
 * An explicit minimum is taken as asked or refused, never clamped: past the latest version it would
 * delete the last version (the service refuses that too), below the current minimum it would mean
 * undeleting versions that are gone.
 */
const checkExplicitMinimum = (catalogHrn: string, version: number, bounds: { readonly latest: number; readonly minimum: number }) =>
  version > bounds.latest
    ? new RetentionRefused({
      message: `Refusing to set the minimum version of ${catalogHrn} to ${version}: the latest version is ${bounds.latest}, and the last version ` +
        `of a catalog can never be deleted. Give --minimum ${bounds.latest} at most (it keeps only version ${bounds.latest}).`
    })
    : version < bounds.minimum
    ? new RetentionRefused({
      message: `Refusing to set the minimum version of ${catalogHrn} to ${version}: it is already ${bounds.minimum}, and the minimum version ` +
        `never moves down (versions below ${bounds.minimum} are deleted for good).`
    })
    : Effect.void

export const planRetention = (request: RetentionRequest) =>
  Effect.gen(function*() {
    const catalogHrn = Hrn.format(yield* parseCatalogHrn(request.catalog))
    const metadata = yield* MetadataApi
    const bounds = yield* versionBounds(catalogHrn)
    const versions = yield* metadata.versions(catalogHrn, { startVersion: bounds.minimum - 1, endVersion: bounds.latest }).pipe(Stream.runCollect)
    const stamps = [...versions].map((v) => ({ version: v.version, timestamp: v.timestamp })).sort((a, b) => a.version - b.version)
    if (request.policy._tag === "Minimum") yield* checkExplicitMinimum(catalogHrn, request.policy.version, bounds)
    const target = targetMinimum(request.policy, bounds, stamps, Date.now())
    if (target > bounds.minimum && request.requireExported !== undefined) {
      yield* guard(catalogHrn, target, bounds.minimum, request.requireExported.out, request.requireExported.layers)
    }
    return {
      catalogHrn,
      policy: describePolicy(request.policy),
      latest: bounds.latest,
      minimum: bounds.minimum,
      target,
      deleted: stamps.filter((v) => v.version < target)
    } satisfies RetentionPlan
  })

export const applyRetention = (plan: RetentionPlan) =>
  plan.target > plan.minimum ? Effect.flatMap(MetadataApi, (m) => m.setMinimumVersion(plan.catalogHrn, plan.target)) : Effect.void

/** Turns automatic version deletion on (keep N) or off, and waits until the service has applied it. */
export const setAutomaticDeletion = (catalog: string, keep: number | "disable") =>
  Effect.gen(function*() {
    const catalogHrn = Hrn.format(yield* parseCatalogHrn(catalog))
    const config = yield* ConfigApi
    if (keep === "disable") return yield* config.awaitStatus(yield* config.disableAutomaticVersionDeletion(catalogHrn))
    // The whole configuration as the service sent it: PUT replaces it, so nothing may be lost on the way.
    const current = yield* config.getCatalogConfiguration(catalogHrn)
    return yield* config.awaitStatus(
      yield* config.updateCatalog(catalogHrn, { ...current, automaticVersionDeletion: { numberOfVersionsToKeep: keep } })
    )
  })
