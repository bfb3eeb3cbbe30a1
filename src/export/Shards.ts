import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Destination } from "../sinks/Destination.ts"
import { RecordedFile } from "../sinks/WrittenFile.ts"
import { partsDir } from "./Checkpoints.ts"
import { OutputConflict } from "./Errors.ts"
import { writeJson } from "./Json.ts"
import { Column, DecodeSummary, PartRegion, readOwnJson, readOwnJsonOption } from "./Manifest.ts"
import { exportDir, PLAN, Plan, shardsOf } from "./Plan.ts"

/**
 * The plan of an export as its runs share it (`_plan.json`) and what each finished shard leaves
 * (`_shards/shard-<i>.json`): the files of its parts. A shard manifest is written whole, once every
 * part of the shard has its checkpoint, by whichever run of the shard gets there; commit builds the
 * export's manifest from them.
 */

const SHARDS_DIR = "_shards"

export const ShardManifest = Schema.Struct({
  formatVersion: Schema.Literal(1),
  shard: Schema.Number,
  parts: Schema.Array(Schema.Number),
  files: Schema.Array(RecordedFile),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number,
  /** Which region of a multi-region catalog served each part. */
  regions: Schema.optional(Schema.Array(PartRegion)),
  /** How the shard's parts were decoded, added up; absent when they were not. */
  decode: Schema.optional(DecodeSummary),
  /** An Iceberg table's export: the columns the files hold (the commit fits the table's schema to them). */
  columns: Schema.optional(Schema.Array(Column)),
  /** An Iceberg table's export: the partitions its parts listed as deleted. */
  deletedPartitions: Schema.optional(Schema.Array(Schema.String)),
  startedAt: Schema.String,
  finishedAt: Schema.String
})
export type ShardManifest = typeof ShardManifest.Type

export const shardsDir = (dir: string) => `${dir}/${SHARDS_DIR}`
export const shardKey = (dir: string, shard: number) => `${shardsDir(dir)}/shard-${shard}.json`
export const planKey = (dir: string) => `${dir}/${PLAN}`

const samePlan = (a: Plan, b: Plan) =>
  a.catalogHrn === b.catalogHrn && a.layerId === b.layerId && a.version === b.version && a.mode === b.mode &&
  a.baseVersion === b.baseVersion && a.snapshot === b.snapshot

/** Forgets earlier runs of the export in `dir`: their plan, checkpoints and shard manifests. */
export const forgetRuns = (dest: Destination, dir: string) =>
  Effect.all([dest.remove([planKey(dir)]), dest.removeAll(partsDir(dir)), dest.removeAll(shardsDir(dir))], {
    discard: true
  })

/**
 * Pins `plan` in its directory and returns the plan to run: the one an earlier (interrupted, or
 * concurrent) run of the same export pinned, so that its finished parts and shards still mean the
 * same listing, else `plan`. `fresh` forgets earlier runs.
 */
export const pinPlan = (dest: Destination, plan: Plan, fresh: boolean) =>
  Effect.gen(function*() {
    const dir = exportDir(plan)
    if (fresh) yield* forgetRuns(dest, dir)
    const stored = yield* readOwnJsonOption(dest, Plan, planKey(dir))
    if (Option.isSome(stored) && samePlan(stored.value, plan)) return stored.value
    if (Option.isSome(stored)) yield* forgetRuns(dest, dir)
    yield* writeJson(dest, planKey(dir), plan)
    return plan
  })

/** The plan at `key` (a `_plan.json`), checked against the directory it is in. */
export const readPlan = (dest: Destination, key: string) =>
  Effect.gen(function*() {
    const plan = yield* readOwnJson(dest, Plan, key)
    if (Option.isNone(plan)) return Option.none<Plan>()
    if (planKey(exportDir(plan.value)) !== key) {
      return yield* new OutputConflict({
        message: `${dest.at(key)} is the plan of ${
          exportDir(plan.value)
        }, not of the directory it is in; give the _plan.json the plan command printed.`
      })
    }
    return plan
  })

export const writeShardManifest = (dest: Destination, dir: string, manifest: ShardManifest) =>
  writeJson(dest, shardKey(dir, manifest.shard), manifest)

/** The shard manifests of the plan, by shard; none where a shard has not finished (or its manifest does not read). */
export const shardManifests = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const dir = exportDir(plan)
    const found = new Map<number, ShardManifest>()
    const names = new Set((yield* dest.list(shardsDir(dir))).map((e) => e.name))
    for (let shard = 0; shard < shardsOf(plan).length; shard++) {
      if (!names.has(`shard-${shard}.json`)) continue
      const manifest = yield* readOwnJsonOption(dest, ShardManifest, shardKey(dir, shard))
      if (Option.isSome(manifest) && manifest.value.shard === shard) found.set(shard, manifest.value)
    }
    return found
  })
