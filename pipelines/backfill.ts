import { Effect, Option, Schema } from "effect"
import { Http } from "../src/client/Http.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { type ExportOptions, runExport } from "../src/export/Export.ts"
import { ExportSettings } from "../src/export/JobConfig.ts"
import { readManifest } from "../src/export/Manifest.ts"
import { exportDir, makePlan, parseCatalogHrn, versionBounds } from "../src/export/Plan.ts"
import { Counters, type ProgressStyle, reporting } from "../src/export/Progress.ts"
import { ConfigApi } from "../src/client/ConfigApi.ts"
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
  | { readonly version: number; readonly status: "below-minimum"; readonly minimum: number }
  | { readonly version: number; readonly status: "not-yet-published"; readonly latest: number }

export interface BackfillRequest {
  readonly catalog: string
  readonly layer: string
  readonly from: number
  readonly to: number
  readonly parts: number
  readonly export: Omit<ExportOptions, "force">
}

/**
 * One version after the other, so memory does not grow with the range. A version with a manifest is
 * skipped without a request; an interrupted one resumes from its finished parts; versions below the
 * minimum (deleted) are reported, not fatal.
 */
export const runBackfill = (request: BackfillRequest, progress: ProgressStyle, report: (outcome: VersionOutcome) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const catalogHrn = Hrn.format(yield* parseCatalogHrn(request.catalog))
    const http = yield* Http
    const catalog = yield* (yield* ConfigApi).getCatalog(catalogHrn)
    const outcomes = { exported: 0, alreadyExported: 0, belowMinimum: 0, notYetPublished: 0 }
    for (let version = request.from; version <= request.to; version++) {
      const dir = path.join(request.export.out, exportDir({ catalogId: catalog.id, layerId: request.layer, layerType: "versioned", version }))
      let outcome: VersionOutcome
      if (Option.isSome(yield* readManifest(dir))) {
        outcome = { version, status: "already-exported" }
        outcomes.alreadyExported++
      } else {
        const bounds = yield* versionBounds(catalogHrn)
        if (version < bounds.minimum) {
          outcome = { version, status: "below-minimum", minimum: bounds.minimum }
          outcomes.belowMinimum++
        } else if (version > bounds.latest) {
          outcome = { version, status: "not-yet-published", latest: bounds.latest }
          outcomes.notYetPublished++
        } else {
          const started = Date.now()
          const counters = new Counters()
          const plan = yield* makePlan({ catalog: catalogHrn, layer: request.layer, version, parts: request.parts })
          const result = yield* reporting(progress, `${catalogHrn} ${request.layer} v${version}`, counters, http.retryCount,
            runExport(plan, { ...request.export, force: false }, counters))
          outcome = { version, status: "exported", partitions: result.manifest.partitions, bytes: result.manifest.bytes, elapsedMs: Date.now() - started }
          outcomes.exported++
        }
      }
      yield* report(outcome)
    }
    return outcomes
  })
