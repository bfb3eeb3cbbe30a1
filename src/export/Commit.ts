import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { TOOL } from "../domain/Tool.ts"
import type { Destination } from "../sinks/Destination.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import { damage, isDataFile, listing, partsDir } from "./Checkpoints.ts"
import { exportSummary, sameDecoding } from "./Decoding.ts"
import { OutputConflict, ShardsUnfinished } from "./Errors.ts"
import { writeJson } from "./Json.ts"
import { advanceState, exportedOf, MANIFEST, type Manifest, readManifest } from "./Manifest.ts"
import { withoutEmptyFiles } from "./Merging.ts"
import { exportDir, type Plan, shardsOf } from "./Plan.ts"
import { planKey, type ShardManifest, shardManifests, shardsDir } from "./Shards.ts"
import { commitTable, isTablePlan, type TableCommit, tableCommitted } from "./Tables.ts"

/**
 * The last step of an export: the manifest, written only from what every shard's manifest vouches
 * for (each file there, as recorded), then the cursor of incremental runs. A directory with a
 * manifest is a finished export. Commit is idempotent: a second one finds the manifest and only
 * finishes what the first may have left (tidying, the cursor).
 */

/** Moves the incremental cursor forward to the exported version; never back (a backfill of old versions leaves it). */
const advanceCursor = (dest: Destination, plan: Plan, updatedAt: string) =>
  advanceState(dest, `${plan.catalogId}/${plan.layerId}`, {
    catalogHrn: plan.catalogHrn,
    layerId: plan.layerId,
    lastVersion: plan.version,
    updatedAt
  })

/**
 * After the manifest: what no manifest names goes (files of runs that were killed, or lost a race to
 * another run of their shard; uploads never completed), and the bookkeeping of the runs.
 */
export const tidyCommitted = (dest: Destination, dir: string, manifest: Manifest) =>
  tidyRun(dest, dir, new Set(manifest.files.map((f) => f.path)))

/** After a commit: the files of `dir` not `named` (the ones the export committed), unfinished uploads, the runs' bookkeeping. */
const tidyRun = (dest: Destination, dir: string, named: ReadonlySet<string>) =>
  Effect.gen(function*() {
    const stale = [...(yield* listing(dest, dir)).keys()].filter((name) =>
      (isDataFile(name) && !named.has(name)) || name.endsWith(".partial")
    )
    yield* dest.remove(stale.map((name) => `${dir}/${name}`))
    yield* dest.abortUploads(dir)
    yield* dest.removeAll(partsDir(dir))
    yield* dest.removeAll(shardsDir(dir))
    yield* dest.remove([planKey(dir)])
  })

/**
 * The manifest already in the plan's directory, if it covers this plan (a full export covers a
 * changes export of the same version); a run killed right after writing it has its commit finished
 * here. A manifest of something else is a conflict.
 */
export const committed = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const dir = exportDir(plan)
    if (isTablePlan(plan)) {
      const done = yield* tableCommitted(dest, plan)
      if (Option.isNone(done)) return Option.none<CommitResult>()
      if (done.value.named !== undefined) yield* tidyRun(dest, dir, done.value.named)
      return Option.some<CommitResult>({ manifest: done.value.manifest, table: done.value.table })
    }
    const existing = yield* readManifest(dest, dir)
    if (Option.isNone(existing)) return Option.none<CommitResult>()
    const m = existing.value
    const covers = m.mode === plan.mode || (m.mode === "full" && plan.mode === "changes")
    if (m.catalogHrn !== plan.catalogHrn || m.layerId !== plan.layerId || m.version !== plan.version || !covers) {
      return yield* new OutputConflict({
        message: `${
          dest.at(dir)
        } already holds a ${m.mode} export of ${m.catalogHrn} layer ${m.layerId} version ${m.version}; rerun with --force to replace it.`
      })
    }
    if (plan.layerType === "versioned") yield* advanceCursor(dest, plan, m.finishedAt)
    yield* tidyCommitted(dest, dir, m)
    return Option.some<CommitResult>({ manifest: m })
  })

/** What a commit made: the export's manifest and, for an export into a table, its snapshot there. */
export interface CommitResult {
  readonly manifest: Manifest
  readonly table?: TableCommit | undefined
}

/**
 * Writes the manifest of the finished shards, then moves the cursor (a table's export: commits a
 * snapshot of their files instead); refuses (writing nothing) while a shard is missing or damaged.
 */
export const commit = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const dir = exportDir(plan)
    if (isTablePlan(plan)) {
      // Committed meanwhile by another run of it, whose tidying may have taken this one's files.
      const done = yield* committed(dest, plan)
      if (Option.isSome(done)) return done.value
    }
    const finished = yield* finishedShards(dest, plan)
    const manifest = manifestOf(plan, finished)
    if (isTablePlan(plan)) {
      const { named, table } = yield* commitTable(dest, plan, finished, manifest)
      yield* tidyRun(dest, dir, named)
      return { manifest, table } satisfies CommitResult
    }
    const probe = yield* CrashProbe
    probe.reached("manifest")
    yield* writeJson(dest, `${dir}/${MANIFEST}`, manifest)
    probe.reached("committed")
    // The cursor before the tidying, which removes the plan: a commit run again finds the manifest and nothing left to do.
    if (plan.layerType === "versioned") yield* advanceCursor(dest, plan, manifest.finishedAt)
    yield* tidyCommitted(dest, dir, manifest)
    return { manifest } satisfies CommitResult
  })

/** The shard manifests of the plan, every one there and its files as recorded; else ShardsUnfinished, nothing committed. */
const finishedShards = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const dir = exportDir(plan)
    const shards = yield* shardManifests(dest, plan)
    const present = yield* listing(dest, dir)
    const missing = shardsOf(plan).map((_, i) => i).filter((i) => !shards.has(i))
    const finished = [...shards.values()].sort((a, b) => a.shard - b.shard)
    const broken = finished.flatMap((s) => {
      const reason = damage(s.files, present) ??
        (sameDecoding(s.decode, finished[0]!.decode)
          ? undefined
          : `decoded otherwise than shard ${finished[0]!.shard}: give every shard the same --decode flags`)
      return reason === undefined ? [] : [{ shard: s.shard, reason }]
    })
    if (missing.length > 0 || broken.length > 0) {
      return yield* new ShardsUnfinished({ plan: dest.at(planKey(dir)), missing, broken })
    }
    return finished
  })

/** The export's manifest, from its finished shards. */
const manifestOf = (plan: Plan, finished: ReadonlyArray<ShardManifest>): Manifest => {
  const decode = exportSummary(finished.flatMap((s) => (s.decode === undefined ? [] : [s.decode])))
  const manifest: Manifest = {
    formatVersion: 1,
    ...exportedOf(plan),
    mode: plan.mode,
    ...(plan.baseVersion === undefined ? {} : { baseVersion: plan.baseVersion }),
    partitions: finished.reduce((n, s) => n + s.partitions, 0),
    deleted: finished.reduce((n, s) => n + s.deleted, 0),
    bytes: finished.reduce((n, s) => n + s.bytes, 0),
    // A shard without rows keeps an empty file (its columns), which an export with rows does not need.
    files: withoutEmptyFiles(finished.flatMap((s) => s.files)).map(({ bytes, format, path, rows, sha256 }) => ({
      path,
      format,
      rows,
      bytes,
      sha256
    })),
    ...(finished.some((s) => s.regions !== undefined) ? { regions: finished.flatMap((s) => s.regions ?? []) } : {}),
    ...(decode === undefined ? {} : { decode }),
    startedAt: finished.map((s) => s.startedAt).sort()[0] ?? new Date().toISOString(),
    finishedAt: new Date().toISOString(),
    tool: { name: TOOL.name, version: TOOL.version }
  }
  return manifest
}
