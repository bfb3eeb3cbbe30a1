import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ConfigApi } from "../src/client/ConfigApi.ts"
import { ApiError } from "../src/client/Errors.ts"
import { MetadataApi } from "../src/client/MetadataApi.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { tidyCommitted } from "../src/export/Commit.ts"
import { InvalidLayerId, LayerNotExportable, LayerNotVersioned, NotFound } from "../src/export/Errors.ts"
import type { ExportOptions } from "../src/export/Export.ts"
import { regionsOf } from "../src/export/Failover.ts"
import { planTableVersion } from "../src/export/Incremental.ts"
import { ConnectionFields } from "../src/export/JobConfig.ts"
import { runExport } from "../src/export/Lazy.ts"
import { type Manifest, readManifest } from "../src/export/Manifest.ts"
import { exportDir, type Plan, resolvePlan, splitPlan, versionBounds } from "../src/export/Plan.ts"
import { Counters, tracking } from "../src/export/Progress.ts"
import { ExportSettings, PositiveInt, sharedBy, writeSettingsOf } from "../src/export/Settings.ts"
import { identityOf, refuseTable, tableOf } from "../src/export/Tables.ts"
import { destination } from "../src/sinks/Destination.ts"
import { loadTable, taggedVersions } from "../src/sinks/iceberg/Table.ts"

/** Exports every version in from..to of one versioned layer, once each; restartable. */
export const BackfillJob = Schema.Struct({
  job: Schema.Literal("backfill"),
  ...ConnectionFields,
  ...ExportSettings.fields,
  catalog: Schema.String,
  layer: Schema.String,
  from: Schema.Int.pipe(Schema.nonNegative()),
  to: Schema.Int.pipe(Schema.nonNegative()),
  /** Versions exported at once (default 1); they share `concurrency` between them. */
  versionConcurrency: Schema.optional(PositiveInt),
  /** Export every version, also those in which the layer did not change. */
  everyVersion: Schema.optional(Schema.Boolean)
})
export type BackfillJob = typeof BackfillJob.Type

export type VersionOutcome =
  | {
    readonly version: number
    readonly status: "exported"
    readonly partitions: number
    readonly bytes: number
    readonly elapsedMs: number
    /** decoding exports: what decoding made of the version */
    readonly decode?: {
      readonly kind: string
      readonly rows: number
      readonly decoded: number
      readonly failed: number
    }
  }
  | { readonly version: number; readonly status: "already-exported" }
  /** A dry run: the version would be exported. */
  | { readonly version: number; readonly status: "would-export" }
  /** Versions `version..through` hold the layer's state of version `since`, which is exported: nothing new to export. */
  | { readonly version: number; readonly through: number; readonly status: "unchanged"; readonly since: number }
  /** The layer has no data at versions `version..through` (it was first published later). */
  | { readonly version: number; readonly through: number; readonly status: "no-data" }
  /** Versions `version..through` were deleted (below the minimum version) and have no export here. */
  | { readonly version: number; readonly through: number; readonly status: "below-minimum"; readonly minimum: number }
  /** Versions `version..through` are past the latest version. */
  | {
    readonly version: number
    readonly through: number
    readonly status: "not-yet-published"
    readonly latest: number
  }

export interface BackfillTotals {
  exported: number
  alreadyExported: number
  unchanged: number
  noData: number
  belowMinimum: number
  notYetPublished: number
  /** A dry run's versions that would be exported (absent unless a dry run). */
  wouldExport?: number
}

export interface BackfillRequest {
  readonly catalog: string
  readonly layer: string
  readonly from: number
  readonly to: number
  readonly parts: number
  readonly export: Omit<ExportOptions, "force">
  /** Versions exported at once (default 1); `export.concurrency` is shared between them. */
  readonly versionConcurrency?: number | undefined
  /** Export every version, also those in which the layer did not change. */
  readonly everyVersion?: boolean | undefined
  /**
   * The region the client reads (lookup's `region`; default the primary), recorded in the manifests
   * of a multi-region catalog. A backfill does not fail over: being restartable, it is run again
   * with the other region.
   */
  readonly region?: string | undefined
  /** Decide every version as a run would, but export nothing: those to export are reported as "would-export". */
  readonly dryRun?: boolean | undefined
}

/** The request of a backfill job (or of the flags that say the same), with what the caller decides. */
export const backfillRequestOf = (
  job: Omit<BackfillJob, "job" | "lookupUrl" | "credentials" | "region">,
  options: Pick<BackfillRequest, "versionConcurrency" | "region" | "dryRun">
): BackfillRequest => {
  const write = writeSettingsOf(job)
  return {
    catalog: job.catalog,
    layer: job.layer,
    from: job.from,
    to: job.to,
    parts: write.parts,
    export: { ...write, out: job.out },
    everyVersion: job.everyVersion ?? false,
    ...options
  }
}

/** A manifest's decode counts, for the outcome of a version. */
export const decodeCounts = (m: Manifest) =>
  m.decode === undefined
    ? {}
    : { decode: { kind: m.decode.kind, rows: m.decode.rows, decoded: m.decode.decoded, failed: m.decode.failed } }

type Ranged = Extract<VersionOutcome, { readonly through: number }>
const sameRange = (a: Ranged, b: VersionOutcome) =>
  a.status === b.status && b.version === a.through + 1 &&
  (a.status !== "unchanged" || (b as typeof a).since === a.since) &&
  (a.status !== "below-minimum" || (b as typeof a).minimum === a.minimum)

/**
 * Reports outcomes in version order as they become known (exports may finish out of order), with
 * runs of skipped versions of the same kind reported as one range.
 */
const orderedReporter = (report: (outcome: VersionOutcome) => Effect.Effect<void>, totals: BackfillTotals) => {
  const slots: Array<VersionOutcome | undefined> = []
  let next = 0
  let pending: Ranged | undefined
  const count = (o: VersionOutcome) => {
    const n = "through" in o ? o.through - o.version + 1 : 1
    const key = ({
      "exported": "exported",
      "already-exported": "alreadyExported",
      "unchanged": "unchanged",
      "no-data": "noData",
      "below-minimum": "belowMinimum",
      "not-yet-published": "notYetPublished",
      "would-export": "wouldExport"
    } as const)[o.status]
    totals[key] = (totals[key] ?? 0) + n
  }
  const emitPending = Effect.suspend(() => {
    const p = pending
    pending = undefined
    return p === undefined ? Effect.void : report(p)
  })
  const flush: Effect.Effect<void> = Effect.gen(function*() {
    while (next < slots.length && slots[next] !== undefined) {
      const o = slots[next++]!
      count(o)
      if ("through" in o) {
        if (pending !== undefined && sameRange(pending, o)) pending = { ...pending, through: o.through }
        else {
          yield* emitPending
          pending = o
        }
      } else {
        yield* emitPending
        yield* report(o)
      }
    }
  })
  return {
    /** A slot for the next outcome, in version order. */
    reserve: () => slots.push(undefined) - 1,
    settle: (slot: number, outcome: VersionOutcome) =>
      Effect.suspend(() => {
        slots[slot] = outcome
        return flush
      }),
    end: Effect.zipRight(flush, emitPending)
  }
}

/**
 * Decides version by version, oldest first: a version with a manifest is skipped without a request;
 * versions below the minimum (deleted, also while being exported) are reported, not fatal; a version
 * in which the layer did not change (`layerVersions`) holds the state of an exported version and is
 * skipped, unless `everyVersion`; the versions past the latest end the run, so a range of thousands
 * of versions costs requests only for the versions that exist. The versions to export run
 * `versionConcurrency` at a time (one by default, so memory does not grow with the range); an
 * interrupted one resumes from its finished parts.
 */
export const runBackfill = (request: BackfillRequest, report: (outcome: VersionOutcome) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const catalogHrn = yield* Hrn.canonicalCatalog(request.catalog)
    if (!Hrn.isLayerId(request.layer)) return yield* new InvalidLayerId({ layerId: request.layer })
    const metadata = yield* MetadataApi
    const catalog = yield* (yield* ConfigApi).getCatalog(catalogHrn)
    const layer = catalog.layers.find((l) => l.id === request.layer)
    if (layer === undefined) {
      return yield* new NotFound({
        what: "layer",
        message: `Catalog ${catalogHrn} has no layer '${request.layer}' (its layers: ${
          catalog.layers.map((l) => l.id).join(", ") || "none"
        }).`
      })
    }
    if (layer.layerType === "volatile") return yield* new LayerNotVersioned({ catalogHrn, layerId: layer.id })
    if (layer.layerType !== "versioned") {
      return yield* new LayerNotExportable({ catalogHrn, layerId: layer.id, layerType: layer.layerType })
    }
    const regions = yield* regionsOf(catalogHrn, catalog.replication, request.region, false)

    const totals: BackfillTotals = {
      exported: 0,
      alreadyExported: 0,
      unchanged: 0,
      noData: 0,
      belowMinimum: 0,
      notYetPublished: 0,
      ...(request.dryRun === true ? { wouldExport: 0 } : {})
    }
    const reporter = orderedReporter(report, totals)
    const dest = yield* destination(request.export.out)
    const dirOf = (version: number) =>
      exportDir({ catalogId: catalog.id, layerId: layer.id, layerType: "versioned", version })
    // --format iceberg: versions go into the layer's table (tagged v<N>, off main when older than it).
    const ids = { catalogHrn, catalogId: catalog.id, layerId: layer.id }
    const intoTable = request.export.format === "iceberg"
    const tagged = intoTable
      ? new Set(taggedVersions((yield* loadTable(tableOf(dest, ids), identityOf(ids))).metadata).map((t) => t.version))
      : undefined
    if (!intoTable) yield* refuseTable(dest, ids)
    /** A version already exported here: tagged in the table, or its export's manifest. */
    const exportedHere = (version: number) =>
      tagged !== undefined
        ? Effect.succeed(tagged.has(version))
        : Effect.map(readManifest(dest, dirOf(version)), Option.isSome)
    /** Versions whose state this run leaves exported: committed before, or to be exported now. */
    const held = new Set<number>()
    let changeCheck: string | undefined = request.everyVersion === true
      ? "every version is exported (--every-version)"
      : undefined
    /** The version in which the layer last changed at `version`; none when it has no data; undefined when not known. */
    const lastChange = (version: number) =>
      changeCheck !== undefined
        ? Effect.succeed(undefined)
        : metadata.layerVersions(catalogHrn, version).pipe(
          Effect.map((r) => Option.fromNullable(r.layerVersions.find((l) => l.layer === layer.id)?.version)),
          Effect.catchIf((e): e is ApiError => e instanceof ApiError && [400, 404, 405, 501].includes(e.status), (e) =>
            Effect.sync(() => {
              // 400: the version was deleted meanwhile; its export says so. Else the service has no layerVersions.
              if (e.status !== 400) {
                changeCheck =
                  `the service does not tell in which versions the layer changed (layerVersions answered ${e.status}), so every version is exported`
              }
              return undefined
            }))
        )

    const toExport: Array<{ readonly version: number; readonly slot: number }> = []
    let bounds = yield* versionBounds(catalogHrn)
    for (let version = request.from; version <= request.to; version++) {
      const slot = reporter.reserve()
      const manifest = intoTable ? Option.none() : yield* readManifest(dest, dirOf(version))
      if (tagged?.has(version) === true) {
        held.add(version)
        yield* reporter.settle(slot, { version, status: "already-exported" })
        continue
      }
      if (Option.isSome(manifest)) {
        // A run killed between its manifest and its tidying left its bookkeeping: runExport tidies that when it finds the manifest, but this skips it.
        yield* tidyCommitted(dest, dirOf(version), manifest.value)
        held.add(version)
        yield* reporter.settle(slot, { version, status: "already-exported" })
        continue
      }
      if (version < bounds.minimum) {
        yield* reporter.settle(slot, { version, through: version, status: "below-minimum", minimum: bounds.minimum })
        continue
      }
      if (version > bounds.latest) {
        // Published since the run started?
        bounds = yield* versionBounds(catalogHrn)
        if (version > bounds.latest) {
          yield* reporter.settle(slot, {
            version,
            through: request.to,
            status: "not-yet-published",
            latest: bounds.latest
          })
          break
        }
      }
      const changed = yield* lastChange(version)
      if (changed !== undefined && Option.isNone(changed)) {
        yield* reporter.settle(slot, { version, through: version, status: "no-data" })
        continue
      }
      if (changed !== undefined && changed.value < version) {
        const since = changed.value
        if (held.has(since) || (yield* exportedHere(since))) {
          held.add(version)
          yield* reporter.settle(slot, { version, through: version, status: "unchanged", since })
          continue
        }
      }
      held.add(version)
      toExport.push({ version, slot })
    }
    if (changeCheck !== undefined) yield* Effect.logInfo(`${catalogHrn} ${layer.id}: ${changeCheck}`)

    if (request.dryRun === true) {
      for (const { slot, version } of toExport) yield* reporter.settle(slot, { version, status: "would-export" })
      yield* reporter.end
      return { ...totals, changeCheck }
    }
    const atOnce = Math.max(1, Math.min(request.versionConcurrency ?? 1, toExport.length))
    const options = {
      ...sharedBy(request.export, atOnce),
      force: false,
      region: regions.multiRegion ? regions.selected : undefined
    }
    yield* Effect.forEach(toExport, ({ version, slot }) =>
      Effect.gen(function*() {
        const started = Date.now()
        const counters = new Counters()
        const exported = yield* Effect.gen(function*() {
          const resolved = yield* resolvePlan({
            catalog: catalogHrn,
            layer: layer.id,
            version,
            ...(intoTable ? { format: "iceberg" as const } : {})
          })
          // A table's version: the changes from the nearest older tag where the catalog still has them.
          const planned: Option.Option<Plan> = intoTable
            ? Option.map(yield* planTableVersion(dest, resolved, request.parts), (p) => p.plan)
            : Option.some(yield* splitPlan(resolved.plan, request.parts))
          if (Option.isNone(planned)) return "tagged" as const
          const plan = planned.value
          return yield* tracking(
            plan,
            `${catalogHrn} ${layer.id} v${version}`,
            counters,
            runExport(plan, options, counters)
          )
        }).pipe(
          Effect.withSpan("Export.layer", {
            attributes: { "catalog.hrn": catalogHrn, "layer.id": layer.id, "export.version": version }
          }),
          // Deleted while it was being exported (the minimum was raised meanwhile): reported, not fatal.
          Effect.catchAll((error) =>
            Effect.flatMap(
              versionBounds(catalogHrn),
              (now) => (version < now.minimum ? Effect.succeed(now.minimum) : Effect.fail(error))
            )
          )
        )
        yield* reporter.settle(
          slot,
          exported === "tagged"
            ? { version, status: "already-exported" }
            : typeof exported === "number"
            ? { version, through: version, status: "below-minimum", minimum: exported }
            : {
              version,
              status: "exported",
              partitions: exported.manifest.partitions,
              bytes: exported.manifest.bytes,
              elapsedMs: Date.now() - started,
              ...decodeCounts(exported.manifest)
            }
        )
      }), { concurrency: atOnce, discard: true })
    yield* reporter.end
    return { ...totals, changeCheck }
  })
