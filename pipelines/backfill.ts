import { Effect, Option, Schema } from "effect"
import { Http } from "../src/client/Http.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import type { ExportOptions } from "../src/export/Export.ts"
import { runExport } from "../src/export/Lazy.ts"
import { ExportSettings } from "../src/export/JobConfig.ts"
import { readManifest } from "../src/export/Manifest.ts"
import { exportDir, makePlan, parseCatalogHrn, versionBounds } from "../src/export/Plan.ts"
import { Counters, type ProgressStyle, reporting } from "../src/export/Progress.ts"
import { ConfigApi } from "../src/client/ConfigApi.ts"
import * as fs from "node:fs/promises"
import * as path from "node:path"

/** Exports every version in from..to of one layer, once each; restartable. */
export const BackfillJob = Schema.Struct({
  job: Schema.Literal("backfill"),
  ...ExportSettings,
  catalog: Schema.String,
  layer: Schema.String,
  from: Schema.Int.pipe(Schema.nonNegative()),
  to: Schema.Int.pipe(Schema.nonNegative())
})
export type BackfillJob = typeof BackfillJob.Type

export type VersionOutcome =
  | { readonly version: number; readonly status: "exported"; readonly partitions: number; readonly bytes: number; readonly elapsedMs: number }
  | { readonly version: number; readonly status: "already-exported" }
  /** Versions `version..through` were deleted (below the minimum version) and have no export here. */
  | { readonly version: number; readonly through: number; readonly status: "below-minimum"; readonly minimum: number }
  /** Versions `version..through` are past the latest version. */
  | { readonly version: number; readonly through: number; readonly status: "not-yet-published"; readonly latest: number }

export interface BackfillRequest {
  readonly catalog: string
  readonly layer: string
  readonly from: number
  readonly to: number
  readonly parts: number
  readonly export: Omit<ExportOptions, "force">
}

/**
 * runExport writes the manifest before it removes the part checkpoints (`_parts/`), so a run killed in
 * between leaves them in a committed directory; runExport tidies that when it finds the manifest, but
 * the backfill skips committed versions without calling it, so it tidies them itself.
 */
const tidyCommitted = (dir: string) => Effect.promise(() => fs.rm(path.join(dir, "_parts"), { recursive: true, force: true }))

/**
 * One version after the other, so memory does not grow with the range. A version with a manifest is
 * skipped without a request; an interrupted one resumes from its finished parts; versions below the
 * minimum (deleted, also while being exported) are reported, not fatal. Runs of deleted or unpublished
 * versions are reported as one range, and the versions past the latest end the run, so a range of
 * thousands of versions costs requests only for the versions that exist.
 */
export const runBackfill = (request: BackfillRequest, progress: ProgressStyle, report: (outcome: VersionOutcome) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const catalogHrn = Hrn.format(yield* parseCatalogHrn(request.catalog))
    const http = yield* Http
    const catalog = yield* (yield* ConfigApi).getCatalog(catalogHrn)
    const outcomes = { exported: 0, alreadyExported: 0, belowMinimum: 0, notYetPublished: 0 }
    const dirOf = (version: number) =>
      path.join(request.export.out, exportDir({ catalogId: catalog.id, layerId: request.layer, layerType: "versioned", version }))
    let deleted: { from: number; through: number; minimum: number } | undefined
    const flushDeleted = Effect.suspend(() => {
      if (deleted === undefined) return Effect.void
      const { from, through, minimum } = deleted
      deleted = undefined
      outcomes.belowMinimum += through - from + 1
      return report({ version: from, through, status: "below-minimum", minimum })
    })
    const markDeleted = (version: number, minimum: number) =>
      Effect.gen(function*() {
        if (deleted !== undefined && deleted.through === version - 1) deleted = { ...deleted, through: version, minimum }
        else {
          yield* flushDeleted
          deleted = { from: version, through: version, minimum }
        }
      })
    let bounds = yield* versionBounds(catalogHrn)
    for (let version = request.from; version <= request.to; version++) {
      if (Option.isSome(yield* readManifest(dirOf(version)))) {
        yield* tidyCommitted(dirOf(version))
        yield* flushDeleted
        outcomes.alreadyExported++
        yield* report({ version, status: "already-exported" })
        continue
      }
      if (version < bounds.minimum) {
        yield* markDeleted(version, bounds.minimum)
        continue
      }
      if (version > bounds.latest) {
        // Published since the run started?
        bounds = yield* versionBounds(catalogHrn)
        if (version > bounds.latest) {
          yield* flushDeleted
          outcomes.notYetPublished += request.to - version + 1
          yield* report({ version, through: request.to, status: "not-yet-published", latest: bounds.latest })
          break
        }
      }
      const started = Date.now()
      const counters = new Counters()
      const exported = yield* Effect.gen(function*() {
        const plan = yield* makePlan({ catalog: catalogHrn, layer: request.layer, version, parts: request.parts })
        return yield* reporting(progress, `${catalogHrn} ${request.layer} v${version}`, counters, http.retryCount,
          runExport(plan, { ...request.export, force: false }, counters))
      }).pipe(
        // Deleted while it was being exported (the minimum was raised meanwhile): reported, not fatal.
        Effect.catchAll((error) =>
          Effect.flatMap(versionBounds(catalogHrn), (now) => {
            bounds = now
            return version < now.minimum ? Effect.succeed(undefined) : Effect.fail(error)
          })
        )
      )
      if (exported === undefined) {
        yield* markDeleted(version, bounds.minimum)
        continue
      }
      yield* flushDeleted
      outcomes.exported++
      yield* report({
        version,
        status: "exported",
        partitions: exported.manifest.partitions,
        bytes: exported.manifest.bytes,
        elapsedMs: Date.now() - started
      })
      bounds = yield* versionBounds(catalogHrn)
    }
    yield* flushDeleted
    return outcomes
  })
