import * as path from "node:path"
import { Effect, Option } from "effect"
import { TOOL } from "../domain/Tool.ts"
import { crashPoint } from "./CrashHook.ts"
import { exportSummary } from "./Decoding.ts"
import { OutputConflict } from "./Errors.ts"
import { advanceState, type Manifest, MANIFEST, readManifest, writeJsonAtomic } from "./Manifest.ts"
import { type Checkpoint, removeCheckpoints } from "./Parts.ts"
import type { Plan } from "./Plan.ts"

/**
 * The last step of an export: the manifest, written only from what the parts' checkpoints vouch for,
 * then the cursor of incremental runs. A directory with a manifest is a finished export.
 */

/** Moves the incremental cursor forward to the exported version; never back (a backfill of old versions leaves it). */
const advanceCursor = (out: string, plan: Plan, updatedAt: string) =>
  advanceState(path.join(out, plan.catalogId, plan.layerId), { catalogHrn: plan.catalogHrn, layerId: plan.layerId, lastVersion: plan.version, updatedAt })

/**
 * The manifest already in `dir`, if it covers this plan (a full export covers a changes export of the
 * same version); a run killed right after writing it has its commit finished here. A manifest of
 * something else is a conflict.
 */
export const committed = (out: string, dir: string, plan: Plan) =>
  Effect.gen(function*() {
    const existing = yield* readManifest(dir)
    if (Option.isNone(existing)) return Option.none<Manifest>()
    const m = existing.value
    const covers = m.mode === plan.mode || (m.mode === "full" && plan.mode === "changes")
    if (m.catalogHrn !== plan.catalogHrn || m.layerId !== plan.layerId || m.version !== plan.version || !covers) {
      return yield* new OutputConflict({
        message: `${dir} already holds a ${m.mode} export of ${m.catalogHrn} layer ${m.layerId} version ${m.version}; rerun with --force to replace it.`
      })
    }
    yield* removeCheckpoints(dir)
    if (plan.layerType === "versioned") yield* advanceCursor(out, plan, m.finishedAt)
    return Option.some(m)
  })

/** Writes the manifest of the finished parts, then moves the cursor. */
export const commit = (out: string, dir: string, plan: Plan, parts: ReadonlyArray<Checkpoint>, startedAt: string) =>
  Effect.gen(function*() {
    const finished = [...parts].sort((a, b) => a.part - b.part)
    const decode = exportSummary(finished.flatMap((c) => (c.decode === undefined ? [] : [c.decode])))
    const manifest: Manifest = {
      formatVersion: 1,
      catalogHrn: plan.catalogHrn,
      layerId: plan.layerId,
      layerType: plan.layerType,
      version: plan.version,
      ...(plan.snapshot === undefined ? {} : { snapshot: plan.snapshot }),
      contentType: plan.contentType,
      ...(plan.contentEncoding === undefined ? {} : { contentEncoding: plan.contentEncoding }),
      mode: plan.mode,
      ...(plan.baseVersion === undefined ? {} : { baseVersion: plan.baseVersion }),
      partitions: finished.reduce((n, c) => n + c.partitions, 0),
      deleted: finished.reduce((n, c) => n + c.deleted, 0),
      bytes: finished.reduce((n, c) => n + c.bytes, 0),
      files: finished.flatMap((c) => c.files),
      ...(decode === undefined ? {} : { decode }),
      startedAt,
      finishedAt: new Date().toISOString(),
      tool: { name: TOOL.name, version: TOOL.version }
    }
    yield* crashPoint("manifest")
    yield* writeJsonAtomic(path.join(dir, MANIFEST), manifest)
    yield* crashPoint("committed")
    yield* removeCheckpoints(dir)
    if (plan.layerType === "versioned") yield* advanceCursor(out, plan, manifest.finishedAt)
    return manifest
  })
