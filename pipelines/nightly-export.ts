import { Effect, Either, Schema } from "effect"
import { Http } from "../src/client/Http.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import type { ExportResult } from "../src/export/Export.ts"
import { runExport } from "../src/export/Lazy.ts"
import { planExport } from "../src/export/Incremental.ts"
import { defaults, ExportSettings } from "../src/export/JobConfig.ts"
import { versionBounds } from "../src/export/Plan.ts"
import { Counters, type ProgressStyle, reporting } from "../src/export/Progress.ts"
import { guard } from "./retention.ts"

/** Exports the latest version of each listed layer (volatile layers: a snapshot of their data). */
export const NightlyJob = Schema.Struct({
  job: Schema.Literal("nightly-export"),
  ...ExportSettings,
  /** Export only what changed since the last run (the layer's `_state.json`), else everything. */
  incremental: Schema.optional(Schema.Boolean),
  /** After every layer is committed, raise each catalog's minimum version to what was exported (guarded). */
  raiseMinimum: Schema.optional(Schema.Boolean),
  layers: Schema.NonEmptyArray(Schema.Struct({ catalog: Schema.String, layer: Schema.String }))
})
export type NightlyJob = typeof NightlyJob.Type

export type LayerResult = ExportResult | { readonly _tag: "UpToDate"; readonly catalogHrn: string; readonly layerId: string; readonly version: number }

export interface LayerOutcome {
  readonly catalog: string
  readonly layer: string
  readonly result: Either.Either<LayerResult, unknown>
  /** Why a layer was exported differently than asked (a full export instead of changes). */
  readonly note: string | undefined
  readonly elapsedMs: number
}

export interface MinimumRaised {
  readonly catalogHrn: string
  readonly from: number
  readonly to: number
}

export const runNightly = (job: NightlyJob, progress: ProgressStyle) =>
  Effect.gen(function*() {
    const http = yield* Http
    const outcomes: Array<LayerOutcome> = []
    for (const target of job.layers) {
      const started = Date.now()
      const counters = new Counters()
      let note: string | undefined
      const result = yield* Effect.gen(function*() {
        const planned = yield* planExport({
          catalog: target.catalog,
          layer: target.layer,
          version: "latest",
          mode: job.incremental === true ? "changes" : "full",
          out: job.out,
          parts: job.parts ?? defaults.parts
        })
        if (planned._tag === "UpToDate") return planned as LayerResult
        note = planned.note
        if (note !== undefined) yield* Effect.logInfo(`${target.catalog} ${target.layer}: ${note}`)
        return yield* reporting(
          progress,
          `${target.catalog} ${target.layer}`,
          counters,
          http.retryCount,
          runExport(planned.plan, {
            out: job.out,
            format: job.format ?? defaults.format,
            compression: job.compression ?? defaults.compression,
            concurrency: job.concurrency ?? defaults.concurrency,
            listConcurrency: job.listConcurrency ?? defaults.listConcurrency,
            maxFileBytes: job.maxFileBytes,
            force: false
          }, counters)
        )
      }).pipe(Effect.either)
      outcomes.push({ catalog: target.catalog, layer: target.layer, result, note, elapsedMs: Date.now() - started })
    }
    const raised = job.raiseMinimum === true && outcomes.every((o) => Either.isRight(o.result))
      ? yield* raiseToExported(outcomes, job.out)
      : []
    return { outcomes, raised }
  })

/** Per catalog, the lowest version this run committed (or found committed) for a versioned layer. */
const exportedVersions = (outcomes: ReadonlyArray<LayerOutcome>) => {
  const byCatalog = new Map<string, number>()
  for (const o of outcomes) {
    if (Either.isLeft(o.result)) continue
    const r = o.result.right
    const [hrn, version] = r._tag === "UpToDate"
      ? [r.catalogHrn, r.version]
      : r.manifest.layerType === "versioned"
      ? [r.manifest.catalogHrn, r.manifest.version]
      : [undefined, 0]
    if (hrn !== undefined) byCatalog.set(hrn, Math.min(version, byCatalog.get(hrn) ?? version))
  }
  return byCatalog
}

/** Raises each catalog's minimum to the version exported, under the export guard. */
export const raiseToExported = (outcomes: ReadonlyArray<LayerOutcome>, out: string) =>
  Effect.gen(function*() {
    const metadata = yield* MetadataApi
    const raised: Array<MinimumRaised> = []
    for (const [catalogHrn, version] of exportedVersions(outcomes)) {
      const { minimum } = yield* versionBounds(catalogHrn)
      if (version <= minimum) continue
      yield* guard(catalogHrn, version, minimum, out)
      yield* metadata.setMinimumVersion(catalogHrn, version)
      raised.push({ catalogHrn, from: minimum, to: version })
    }
    return raised
  })
