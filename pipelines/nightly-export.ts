import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import * as Schema from "effect/Schema"
import type * as DataClient from "../src/client/DataClient.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import { RetryTally } from "../src/client/Retry.ts"
import type { HasExitCode } from "../src/domain/ExitCode.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { committed } from "../src/export/Commit.ts"
import { InvalidLayerId } from "../src/export/Errors.ts"
import type { ExportResult } from "../src/export/Export.ts"
import { type Failover, regionsFor, versionMissing, withFailover } from "../src/export/Failover.ts"
import { planExport, type Planned } from "../src/export/Incremental.ts"
import { ConnectionFields } from "../src/export/JobConfig.ts"
import { runExport } from "../src/export/Lazy.ts"
import { versionBounds } from "../src/export/Plan.ts"
import { Counters, expectedPartitions, tracking } from "../src/export/Progress.ts"
import {
  DecodeOverrides,
  decodeRequest,
  ExportSettings,
  PositiveInt,
  sharedBy,
  type WriteSettings,
  writeSettingsOf
} from "../src/export/Settings.ts"
import { pruneSnapshots } from "../src/export/Snapshots.ts"
import { exportLocation } from "../src/retention/ExportLocation.ts"
import { guard } from "../src/retention/Guard.ts"
import { destination } from "../src/sinks/Destination.ts"
import * as Metrics from "../src/telemetry/Metrics.ts"
import { afterTableExport, type Compacted, type ExpiredTable, expireTables } from "./tables.ts"

/** Exports the latest version of each listed layer (volatile layers: a snapshot of their data). */
export const NightlyJob = Schema.Struct({
  job: Schema.Literal("nightly-export"),
  ...ConnectionFields,
  ...ExportSettings.fields,
  /** Export only what changed since the last run (the layer's `_state.json`), else everything. */
  incremental: Schema.optional(Schema.Boolean),
  /** After every layer is committed, raise each catalog's minimum version to what was exported (guarded). */
  raiseMinimum: Schema.optional(Schema.Boolean),
  /** Layers exported at once (default 1); they share `concurrency` between them. */
  layerConcurrency: Schema.optional(PositiveInt),
  /** Volatile layers: keep the newest N snapshots, removing older ones after each new snapshot. */
  keepSnapshots: Schema.optional(PositiveInt),
  /** Multi-region catalogs: read from the other region when the selected one keeps failing (default true). */
  failover: Schema.optional(Schema.Boolean),
  /** Each layer may decode otherwise than the job's decoding fields say. */
  layers: Schema.NonEmptyArray(Schema.Struct({ catalog: Schema.String, layer: Schema.String, ...DecodeOverrides }))
})
export type NightlyJob = typeof NightlyJob.Type

export type LayerResult = ExportResult | {
  readonly _tag: "UpToDate"
  readonly catalogHrn: string
  readonly layerId: string
  readonly version: number
}

/** A layer's outcome; what it failed with says its exit code. */
export interface LayerOutcome<E extends HasExitCode = HasExitCode> {
  readonly catalog: string
  readonly layer: string
  readonly result: Either.Either<LayerResult, E>
  /** Why a layer was exported differently than asked (a full export instead of changes). */
  readonly note: string | undefined
  /** Old snapshot directories removed after this one (`keepSnapshots`); a table's: the tags of the snapshots expired. */
  readonly pruned: ReadonlyArray<string>
  /** An export into an Iceberg table: the compaction of `main` that followed it, when it was due. */
  readonly compacted?: Compacted | undefined
  /** A multi-region catalog's export that went on in its other region. */
  readonly failover?: Failover | undefined
  readonly elapsedMs: number
  /** What the export did, also when it failed: partitions and bytes fetched, retries. */
  readonly counters: Counters
}

export interface MinimumRaised {
  readonly catalogHrn: string
  readonly from: number
  readonly to: number
  /** The catalog's Iceberg tables in the output, their snapshots below the new minimum expired. */
  readonly tables: ReadonlyArray<ExpiredTable>
}

/** How one layer is exported: where, with which write settings, what to plan, and what to do around it. */
export interface LayerSettings extends WriteSettings, Pick<ExportSettings, "out"> {
  readonly mode: "full" | "changes"
  readonly version: number | "latest"
  readonly force: boolean
  readonly keepSnapshots: number | undefined
  /** Lookup's `region` to read from (default: the catalog's primary region). */
  readonly region?: string | undefined
  /** Multi-region catalogs: go on in the other region when the selected one keeps failing (default true). */
  readonly failover?: boolean | undefined
}

/** One layer: plan (incremental when asked and possible), export, then tidy old snapshots. */
export const exportLayer = (
  target: { readonly catalog: string; readonly layer: string },
  settings: LayerSettings,
  /** Called once the plan is known, with the note that explains a fallback (a full export instead of changes). */
  onNote: (note: string) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const started = Date.now()
    // One count per attempt: a failover's attempt counts the parts the first one finished from their checkpoints.
    const attempts = [new Counters()]
    let note: string | undefined
    let pruned: ReadonlyArray<string> = []
    let compacted: Compacted | undefined
    let failover: Failover | undefined
    const result = yield* Effect.gen(function*() {
      const hrn = yield* Hrn.canonicalCatalog(target.catalog)
      if (!Hrn.isLayerId(target.layer)) return yield* new InvalidLayerId({ layerId: target.layer })
      const regions = yield* regionsFor(hrn, settings.region, settings.failover ?? true)
      // Planned in the first region that answers; after a failover the export resumes that plan.
      let planned: Planned | undefined
      let ran = false
      const attempt = (region: string | undefined) =>
        Effect.gen(function*() {
          planned ??= yield* planExport({
            catalog: target.catalog,
            layer: target.layer,
            version: settings.version,
            mode: settings.mode,
            out: settings.out,
            parts: settings.parts,
            format: settings.format
          })
            .pipe(Effect.withSpan("Export.plan"))
          if (planned._tag === "UpToDate") return planned as LayerResult
          const plan = planned.plan
          if (note === undefined && planned.note !== undefined) yield* onNote(note = planned.note)
          if (ran) attempts.push(new Counters())
          ran = true
          const counters = attempts.at(-1)!
          const run = runExport(plan, { ...settings, region: regions.multiRegion ? region : undefined }, counters)
          const exported = yield* tracking(plan, `${target.catalog} ${target.layer}`, counters, run)
          if (exported._tag === "Exported" && exported.table !== undefined) {
            // Upkeep of the table; the export stays committed when it fails (the next run tries again).
            const upkeep = yield* Effect.flatMap(
              destination(settings.out),
              (dest) => afterTableExport(dest, plan, settings.keepSnapshots)
            ).pipe(
              Effect.catchAll((e) =>
                Effect.as(
                  Effect.logWarning(`${target.catalog} ${target.layer}: the table's upkeep failed: ${e.message}`),
                  undefined
                )
              )
            )
            pruned = upkeep?.expired ?? []
            compacted = upkeep?.compacted
          } else if (
            exported._tag === "Exported" && plan.layerType === "volatile" && settings.keepSnapshots !== undefined
          ) {
            pruned = yield* pruneSnapshots(settings.out, plan.catalogId, plan.layerId, settings.keepSnapshots)
          }
          return exported as LayerResult
        })
      // A versioned export goes on elsewhere only where its pinned version is readable.
      const blocker = () => {
        const plan = planned?._tag === "Planned" ? planned.plan : undefined
        return plan?.layerType === "versioned"
          ? Effect.map(
            versionMissing(plan.catalogHrn, plan.version),
            Option.map((why) => `version ${plan.version} is not readable there (${why})`)
          )
          : Effect.succeed(Option.none<string>())
      }
      return yield* withFailover(regions, attempt, blocker, (f) => void (failover = f))
    }).pipe(
      Effect.provideService(RetryTally, attempts[0]!),
      Effect.withSpan("Export.layer", { attributes: { "catalog.hrn": target.catalog, "layer.id": target.layer } }),
      Effect.either
    )
    const counters = acrossAttempts(attempts)
    return {
      catalog: target.catalog,
      layer: target.layer,
      result,
      note,
      pruned,
      compacted,
      failover,
      elapsedMs: Date.now() - started,
      counters
    } satisfies LayerOutcome
  })

/** What exporting one layer can fail with. */
export type LayerError = Effect.Effect.Success<ReturnType<typeof exportLayer>>["result"] extends
  Either.Either<LayerResult, infer E> ? E : never

/**
 * One count for a layer exported in several attempts (a failover): the last attempt's, which counted
 * the parts earlier attempts finished from their checkpoints, with the first attempt's reused parts
 * (what an earlier run left) and every attempt's retries.
 */
const acrossAttempts = (attempts: ReadonlyArray<Counters>): Counters => {
  const last = attempts.at(-1)!
  if (attempts.length === 1) return last
  last.skippedParts = attempts[0]!.skippedParts
  for (const earlier of attempts.slice(0, -1)) {
    for (const [reason, n] of Object.entries(earlier.retriesByReason)) {
      last.retries += n
      last.retriesByReason[reason] = (last.retriesByReason[reason] ?? 0) + n
    }
  }
  return last
}

export interface NightlyRun<E extends HasExitCode> {
  /** The lookup service of a catalog (its HRN implies one unless one is configured): layers whose catalogs share it share a client. */
  readonly lookupUrlOf: (catalog: string) => string
  /** The Data API client of a lookup service. */
  readonly client: (lookupUrl: string) => Layer.Layer<DataClient.DataClient, E>
  /** Called when a layer's plan falls back (e.g. to a full export), before it is exported. */
  readonly onNote?: (catalog: string, layer: string, note: string) => Effect.Effect<void>
}

/**
 * Exports every layer of the job, `layerConcurrency` at a time sharing one download budget; a layer
 * that fails does not stop the others, and every layer's outcome is returned. Then, if asked and
 * only if every layer is committed, raises each catalog's minimum version (guarded).
 */
export const runNightly = <E extends HasExitCode>(job: NightlyJob, run: NightlyRun<E>) =>
  Effect.scoped(Effect.gen(function*() {
    // One client per lookup service, built once and kept for the run; a client that cannot be built
    // fails each layer that needs it.
    const clients = yield* RcMap.make({
      lookup: (lookupUrl: string) => Layer.build(run.client(lookupUrl)),
      idleTimeToLive: Duration.infinity
    })
    const clientOf = (catalog: string) => RcMap.get(clients, run.lookupUrlOf(catalog))
    const retriedBefore = yield* Metrics.retriesSoFar
    // Built up front, one per lookup service, so concurrent layers share them.
    for (const target of job.layers) yield* Effect.either(clientOf(target.catalog))

    const atOnce = Math.min(job.layerConcurrency ?? 1, job.layers.length)
    const write = writeSettingsOf(job)
    const settings = {
      ...write,
      out: job.out,
      mode: job.incremental === true ? "changes" as const : "full" as const,
      version: "latest" as const,
      ...sharedBy(write, atOnce),
      force: false,
      keepSnapshots: job.keepSnapshots,
      region: job.region,
      failover: job.failover
    }
    const outcomes = yield* Effect.forEach(job.layers, (target) =>
      Effect.gen(function*() {
        const client = yield* Effect.either(clientOf(target.catalog))
        if (Either.isLeft(client)) {
          const failed: LayerOutcome<LayerError | E> = {
            ...target,
            result: Either.left(client.left),
            note: undefined,
            pruned: [],
            elapsedMs: 0,
            counters: new Counters()
          }
          return failed
        }
        const onNote = run.onNote === undefined
          ? undefined
          : (note: string) => run.onNote!(target.catalog, target.layer, note)
        const outcome: LayerOutcome<LayerError | E> = yield* exportLayer(
          target,
          { ...settings, decode: decodeRequest(job, target) },
          onNote
        ).pipe(Effect.provide(client.right))
        return outcome
      }), { concurrency: atOnce })

    // The exports stay committed when a raise is refused; the next run decides again.
    const { raised, raiseFailure } = job.raiseMinimum === true && outcomes.every((o) => Either.isRight(o.result))
      ? yield* raiseExported(outcomes, job.out, clientOf)
      : { raised: [], raiseFailure: Option.none() }
    const retries = (yield* Metrics.retriesSoFar) - retriedBefore
    /** `raiseFailure`: why raising a minimum was refused or failed (after the exports were committed). */
    return { outcomes, raised, raiseFailure, retries }
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

/**
 * Raises each catalog's minimum to the lowest version the outcomes committed, under the export guard;
 * `clientOf` gives the catalog's client. A refusal stops the raising (`raiseFailure`), not the caller.
 */
const raiseExported = <E, R>(
  outcomes: ReadonlyArray<Pick<LayerOutcome, "result">>,
  out: string,
  clientOf: (catalogHrn: string) => Effect.Effect<Context.Context<DataClient.DataClient>, E, R>
) =>
  Effect.gen(function*() {
    const raised: Array<MinimumRaised> = []
    const result = yield* Effect.either(Effect.forEach(exportedVersions(outcomes), ([catalogHrn, version]) =>
      Effect.gen(function*() {
        const r = yield* raiseToExported(catalogHrn, version, out).pipe(Effect.provide(yield* clientOf(catalogHrn)))
        if (r !== undefined) raised.push(r)
      }), { discard: true }))
    return { raised: raised as ReadonlyArray<MinimumRaised>, raiseFailure: Either.getLeft(result) }
  })

/**
 * The `export` command's job: one layer, then, if asked and it is committed, its catalog's minimum
 * raised to it (guarded) — also when it was up to date or already exported: a raise refused by an
 * earlier run is decided again. A refused raise leaves the export committed.
 */
export const exportOne = (
  target: { readonly catalog: string; readonly layer: string },
  settings: LayerSettings,
  raiseMinimum: boolean,
  onNote?: (note: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const outcome = yield* exportLayer(target, settings, onNote)
    const { raised, raiseFailure } = raiseMinimum && Either.isRight(outcome.result)
      ? yield* raiseExported([outcome], settings.out, () => Effect.context<DataClient.DataClient>())
      : { raised: [], raiseFailure: Option.none() }
    return { outcome, raised, raiseFailure }
  })

/**
 * Raises a catalog's minimum to a version exported to `out`, under the export guard, then expires the
 * snapshots below it in the catalog's Iceberg tables there; undefined when it is there already.
 */
export const raiseToExported = (catalogHrn: string, version: number, out: string) =>
  Effect.gen(function*() {
    const { minimum } = yield* versionBounds(catalogHrn)
    if (version <= minimum) return undefined
    const location = yield* exportLocation(out)
    yield* guard(catalogHrn, version, minimum, location)
    yield* (yield* MetadataApi).setMinimumVersion(catalogHrn, version)
    const tables = yield* expireTables(location.dest, catalogHrn, version, false)
    return { catalogHrn, from: minimum, to: version, tables } satisfies MinimumRaised
  })

/** What a run would do with a layer, found without changing anything (a dry run). */
export type LayerPreview =
  | {
    readonly action: "export"
    readonly version: number
    readonly mode: "full" | "changes"
    /** `changes`: the version the changes are counted from (exclusive). */
    readonly baseVersion?: number | undefined
    /** Metadata parts the listing is split into. */
    readonly parts: number
    /** Partitions a full export of a versioned layer lists (the versions answer's count), when the service counts them. */
    readonly partitions?: number | undefined
    /** Why the plan is not what was asked (e.g. a full export instead of changes). */
    readonly note?: string | undefined
  }
  | { readonly action: "up-to-date"; readonly version: number }
  | { readonly action: "already-exported"; readonly version: number }

/** Plans a layer as a run would (incremental when asked), and tells whether its export is already committed. */
export const previewLayer = (
  target: { readonly catalog: string; readonly layer: string },
  settings: Pick<LayerSettings, "out" | "mode" | "version" | "parts" | "format">
) =>
  Effect.gen(function*() {
    const planned = yield* planExport({ ...target, ...settings })
    if (planned._tag === "UpToDate") return { action: "up-to-date", version: planned.version } satisfies LayerPreview
    const plan = planned.plan
    const done = yield* committed(yield* destination(settings.out), plan)
    if (Option.isSome(done)) return { action: "already-exported", version: plan.version } satisfies LayerPreview
    return {
      action: "export",
      version: plan.version,
      mode: plan.mode,
      baseVersion: plan.baseVersion,
      parts: Math.max(1, plan.parts.length),
      partitions: yield* expectedPartitions(plan),
      note: planned.note
    } satisfies LayerPreview
  })
