import { type Context, Effect, Either, Layer, Schema } from "effect"
import type * as DataClient from "../src/client/DataClient.ts"
import { Http } from "../src/client/Http.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import type { ExportResult } from "../src/export/Export.ts"
import { planExport } from "../src/export/Incremental.ts"
import type { DecodeRequest } from "../src/export/Decoding.ts"
import { DecodeConfig, decodeRequest, defaults, ExportSettings, PositiveInt } from "../src/export/JobConfig.ts"
import { runExport } from "../src/export/Lazy.ts"
import { versionBounds } from "../src/export/Plan.ts"
import { Counters, type ProgressStyle, reporting } from "../src/export/Progress.ts"
import { pruneSnapshots } from "../src/export/Snapshots.ts"
import { localLocation } from "../src/retention/ExportLocation.ts"
import { guard } from "./retention.ts"

/** Exports the latest version of each listed layer (volatile layers: a snapshot of their data). */
export const NightlyJob = Schema.Struct({
  job: Schema.Literal("nightly-export"),
  ...ExportSettings,
  /** Export only what changed since the last run (the layer's `_state.json`), else everything. */
  incremental: Schema.optional(Schema.Boolean),
  /** After every layer is committed, raise each catalog's minimum version to what was exported (guarded). */
  raiseMinimum: Schema.optional(Schema.Boolean),
  /** Layers exported at once (default 1); they share `concurrency` between them. */
  layerConcurrency: Schema.optional(PositiveInt),
  /** Volatile layers: keep the newest N snapshots, removing older ones after each new snapshot. */
  keepSnapshots: Schema.optional(PositiveInt),
  /** Each layer may decode otherwise than the job's decoding fields say. */
  layers: Schema.NonEmptyArray(Schema.Struct({ catalog: Schema.String, layer: Schema.String, ...DecodeConfig }))
})
export type NightlyJob = typeof NightlyJob.Type

export type LayerResult = ExportResult | { readonly _tag: "UpToDate"; readonly catalogHrn: string; readonly layerId: string; readonly version: number }

export interface LayerOutcome {
  readonly catalog: string
  readonly layer: string
  readonly result: Either.Either<LayerResult, unknown>
  /** Why a layer was exported differently than asked (a full export instead of changes). */
  readonly note: string | undefined
  /** Old snapshot directories removed after this one (`keepSnapshots`). */
  readonly pruned: ReadonlyArray<string>
  readonly elapsedMs: number
}

export interface MinimumRaised {
  readonly catalogHrn: string
  readonly from: number
  readonly to: number
}

/** One layer: plan (incremental when asked and possible), export, then tidy old snapshots. */
export const exportLayer = (
  target: { readonly catalog: string; readonly layer: string },
  settings: {
    readonly out: string
    readonly mode: "full" | "changes"
    readonly version: number | "latest"
    readonly parts: number
    readonly format: NonNullable<NightlyJob["format"]>
    readonly compression: NonNullable<NightlyJob["compression"]>
    readonly concurrency: number
    readonly listConcurrency: number
    readonly maxFileBytes: number | undefined
    readonly force: boolean
    readonly keepSnapshots: number | undefined
    readonly decode: DecodeRequest
  },
  progress: ProgressStyle,
  /** Called once the plan is known, with the note that explains a fallback (a full export instead of changes). */
  onNote: (note: string) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const started = Date.now()
    const http = yield* Http
    let note: string | undefined
    let pruned: ReadonlyArray<string> = []
    const result = yield* Effect.gen(function*() {
      const planned = yield* planExport({ catalog: target.catalog, layer: target.layer, version: settings.version, mode: settings.mode, out: settings.out, parts: settings.parts })
      if (planned._tag === "UpToDate") return planned as LayerResult
      note = planned.note
      if (note !== undefined) yield* onNote(note)
      const counters = new Counters()
      const exported = yield* reporting(progress, `${target.catalog} ${target.layer}`, counters, http.retryCount, runExport(planned.plan, settings, counters))
      if (exported._tag === "Exported" && planned.plan.layerType === "volatile" && settings.keepSnapshots !== undefined) {
        pruned = yield* pruneSnapshots(settings.out, planned.plan.catalogId, planned.plan.layerId, settings.keepSnapshots)
      }
      return exported as LayerResult
    }).pipe(Effect.either)
    return { catalog: target.catalog, layer: target.layer, result, note, pruned, elapsedMs: Date.now() - started } satisfies LayerOutcome
  })

export interface NightlyRun {
  readonly progress: ProgressStyle
  /**
   * The Data API client for a catalog, and the key (its lookup URL) under which layers share one:
   * each catalog's HRN implies its own lookup service unless one is configured.
   */
  readonly clientFor: (catalog: string) => { readonly key: string; readonly layer: Layer.Layer<DataClient.DataClient, unknown> }
  /** Called when a layer's plan falls back (e.g. to a full export), before it is exported. */
  readonly onNote?: (catalog: string, layer: string, note: string) => Effect.Effect<void>
}

/**
 * Exports every layer of the job, `layerConcurrency` at a time sharing one download budget; a layer
 * that fails does not stop the others, and every layer's outcome is returned. Then, if asked and
 * only if every layer is committed, raises each catalog's minimum version (guarded).
 */
export const runNightly = (job: NightlyJob, run: NightlyRun) =>
  Effect.scoped(Effect.gen(function*() {
    const clients = new Map<string, Either.Either<Context.Context<DataClient.DataClient>, unknown>>()
    const clientOf = (catalog: string) =>
      Effect.gen(function*() {
        const { key, layer } = run.clientFor(catalog)
        let built = clients.get(key)
        if (built === undefined) clients.set(key, built = yield* Effect.either(Layer.build(layer)))
        return built
      })
    // Built up front, one per lookup service, so concurrent layers share them.
    for (const target of job.layers) yield* clientOf(target.catalog)

    const atOnce = Math.min(job.layerConcurrency ?? 1, job.layers.length)
    const settings = {
      out: job.out,
      mode: job.incremental === true ? "changes" as const : "full" as const,
      version: "latest" as const,
      parts: job.parts ?? defaults.parts,
      format: job.format ?? defaults.format,
      compression: job.compression ?? defaults.compression,
      concurrency: Math.max(1, Math.floor((job.concurrency ?? defaults.concurrency) / atOnce)),
      listConcurrency: job.listConcurrency ?? defaults.listConcurrency,
      maxFileBytes: job.maxFileBytes,
      force: false,
      keepSnapshots: job.keepSnapshots
    }
    const outcomes = yield* Effect.forEach(job.layers, (target) =>
      Effect.gen(function*() {
        const client = yield* clientOf(target.catalog)
        if (Either.isLeft(client)) {
          return { ...target, result: Either.left(client.left), note: undefined, pruned: [], elapsedMs: 0 } satisfies LayerOutcome
        }
        const onNote = run.onNote === undefined ? undefined : (note: string) => run.onNote!(target.catalog, target.layer, note)
        return yield* exportLayer(target, { ...settings, decode: decodeRequest(job, target) }, run.progress, onNote).pipe(Effect.provide(client.right))
      }), { concurrency: atOnce })

    const raised: Array<MinimumRaised> = []
    // The exports stay committed when a raise is refused; the next run decides again.
    const raise = job.raiseMinimum === true && outcomes.every((o) => Either.isRight(o.result))
      ? yield* Effect.either(Effect.forEach(exportedVersions(outcomes), ([catalogHrn, version]) =>
        Effect.gen(function*() {
          const client = yield* clientOf(catalogHrn)
          if (Either.isLeft(client)) return yield* Effect.fail(client.left)
          const r = yield* raiseToExported(catalogHrn, version, job.out).pipe(Effect.provide(client.right))
          if (r !== undefined) raised.push(r)
        }), { discard: true }))
      : Either.right(undefined)
    let retries = 0
    for (const client of clients.values()) if (Either.isRight(client)) retries += yield* Effect.flatMap(Http, (h) => h.retryCount).pipe(Effect.provide(client.right))
    /** `raiseFailure`: why raising a minimum was refused or failed (after the exports were committed). */
    return { outcomes, raised, raiseFailure: Either.getLeft(raise), retries }
  }))

/** Per catalog, the lowest version this run committed (or found committed) for a versioned layer. */
export const exportedVersions = (outcomes: ReadonlyArray<Pick<LayerOutcome, "result">>) => {
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

/** Raises a catalog's minimum to a version exported to `out`, under the export guard; undefined when it is there already. */
export const raiseToExported = (catalogHrn: string, version: number, out: string) =>
  Effect.gen(function*() {
    const { minimum } = yield* versionBounds(catalogHrn)
    if (version <= minimum) return undefined
    yield* guard(catalogHrn, version, minimum, localLocation(out))
    yield* (yield* MetadataApi).setMinimumVersion(catalogHrn, version)
    return { catalogHrn, from: minimum, to: version } satisfies MinimumRaised
  })
