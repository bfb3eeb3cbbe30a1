import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { UsageError } from "../src/domain/ExitCode.ts"
import type { ShardResult } from "../src/export/Export.ts"
import { type ExportRequest, planExport } from "../src/export/Incremental.ts"
import { type Manifest, readManifest } from "../src/export/Manifest.ts"
import { exportDir, type Plan, shardsOf, withShards } from "../src/export/Plan.ts"
import { Counters, tracking } from "../src/export/Progress.ts"
import type { WriteSettings } from "../src/export/Settings.ts"
import { forgetRuns, pinPlan, planKey, readPlan } from "../src/export/Shards.ts"
import { committedRun, type TableCommit } from "../src/export/Tables.ts"
import { type Destination, destination } from "../src/sinks/Destination.ts"
import { isObjectStore } from "../src/sinks/ObjectStore.ts"

/**
 * A sharded export on an array-job engine: `planShards` pins the version and deals the metadata
 * parts to N shards (`_plan.json`), `runShardOf` runs one shard of a plan (N workers at once), and
 * `commitShards` writes the manifest once every shard has finished. `locatePlan` finds a plan by
 * the location the plan command printed.
 */

/** An export to plan (its metadata parts are dealt to the shards), for `shards` workers. */
export interface ShardsRequest extends ExportRequest {
  readonly shards: number
  /** Plan again, forgetting what an earlier plan of the same version finished. */
  readonly force: boolean
}

export type ShardsPlanned =
  | { readonly _tag: "UpToDate"; readonly version: number }
  | { readonly _tag: "Planned"; readonly location: string; readonly plan: Plan }

/**
 * Pins the export's plan for `shards` workers. A plan pinned before with another shard count is
 * planned again only while none of its shards has run; `force` forgets their work.
 */
export const planShards = (
  request: ShardsRequest,
  /** Called with the note that explains a fallback (a full export instead of changes). */
  onNote: (note: string) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const planned = yield* planExport(request)
    if (planned._tag === "UpToDate") return { _tag: "UpToDate", version: planned.version } satisfies ShardsPlanned
    if (planned.note !== undefined) yield* onNote(planned.note)
    const dest = yield* destination(request.out)
    const wanted = withShards(planned.plan, request.shards)
    let plan = yield* pinPlan(dest, wanted, request.force)
    if (shardsOf(plan).length !== request.shards) {
      // Pinned before with another shard count: running it with this one would leave shards out.
      const started = (yield* dest.list(`${exportDir(plan)}/_shards`)).length +
        (yield* dest.list(`${exportDir(plan)}/_parts`)).length
      if (started > 0) {
        return yield* new UsageError({
          message: `${dest.at(planKey(exportDir(plan)))} already plans ${
            shardsOf(plan).length
          } shards and some have run; run it with ${
            shardsOf(plan).length
          } workers, or plan again with --force (their work is lost).`
        })
      }
      yield* forgetRuns(dest, exportDir(plan))
      plan = yield* pinPlan(dest, wanted, false)
    }
    return { _tag: "Planned", location: dest.at(planKey(exportDir(plan))), plan } satisfies ShardsPlanned
  })

/** A plan found where the plan command said: its destination, its key there, and the plan or, once committed, the manifest. */
export type LocatedPlan =
  & { readonly dest: Destination; readonly key: string; readonly location: string; readonly dir: string }
  & (
    | { readonly plan: Plan; readonly committed: undefined }
    | { readonly plan: undefined; readonly committed: Manifest; readonly table?: TableCommit | undefined }
  )

/** The plan at a location as given (`.../version=V/_plan.json`, or its directory). */
export const locatePlan = (location: string) =>
  Effect.gen(function*() {
    const trimmed = location.replace(/\/+$/, "")
    const file = trimmed.endsWith("/_plan.json") || trimmed === "_plan.json" ? trimmed : `${trimmed}/_plan.json`
    const segments = file.split("/")
    // OUT/<catalog-id>/<layer-id>/<version=V|snapshot=S>/_plan.json; a table's: OUT/<catalog-id>/<layer-id>/data/<...>/_plan.json
    const depth = segments.at(-3) === "data" && segments.length >= 5 &&
        Option.isSome(yield* readPlan(yield* destination(rootOf(segments, 5, location)), segments.slice(-5).join("/")))
      ? 5
      : 4
    const key = segments.slice(-depth).join("/")
    if (segments.length < 4 || !/^(version=\d+|snapshot=\d{8}T\d{6}Z)$/.test(segments.at(-2)!)) {
      return yield* new UsageError({
        message:
          `--plan ${location} is not the location of a plan (OUT/<catalog-id>/<layer-id>/version=<V>/_plan.json, as the plan command prints it).`
      })
    }
    const dest = yield* destination(rootOf(segments, depth, location))
    const at = { dest, key, location: dest.at(key), dir: dest.at(key.slice(0, key.lastIndexOf("/"))) }
    const plan = yield* readPlan(dest, key)
    if (Option.isSome(plan)) return { ...at, plan: plan.value, committed: undefined } satisfies LocatedPlan
    // Commit removes the plan: a committed export answers every later run of the plan.
    const tableRun = segments.at(-3) === "data" && segments.length >= 5
      ? yield* committedRun(
        yield* destination(rootOf(segments, 5, location)),
        segments.at(-5)!,
        segments.at(-4)!,
        segments.at(-2)!
      )
      : Option.none()
    if (Option.isSome(tableRun)) {
      return {
        ...at,
        plan: undefined,
        committed: tableRun.value.manifest,
        table: tableRun.value.table
      } satisfies LocatedPlan
    }
    const committed = yield* readManifest(dest, segments.slice(-depth, -1).join("/"))
    if (Option.isSome(committed)) {
      return { ...at, plan: undefined, committed: committed.value, table: undefined } satisfies LocatedPlan
    }
    return yield* new UsageError({
      message: `There is no plan at ${at.location}: run catalog-export plan first, or check --plan.`
    })
  })

/** The destination a plan's path is below, the last `depth` segments of the path being the plan's key. */
const rootOf = (segments: ReadonlyArray<string>, depth: number, location: string) => {
  const root = segments.slice(0, -depth).join("/")
  return root === "" && !isObjectStore(location) ? "." : root
}

export interface ShardOutcome {
  readonly plan: Plan
  readonly shard: number
  /** The plan's shard count. */
  readonly shards: number
  readonly result: ShardResult
  readonly elapsedMs: number
  readonly counters: Counters
}

/**
 * Runs shard `shard` of a located plan: its parts (those an interrupted run finished are reused),
 * its files and its shard manifest; nothing when the export is committed meanwhile.
 */
export const runShardOf = (
  located: LocatedPlan & { readonly plan: Plan },
  shard: number,
  settings: Omit<WriteSettings, "parts">
) =>
  Effect.gen(function*() {
    const { runShard } = yield* Effect.promise(() => import("../src/export/Export.ts"))
    const { dest, plan } = located
    const shards = shardsOf(plan).length
    const counters = new Counters()
    const started = Date.now()
    const label = `${plan.catalogHrn} ${plan.layerId} shard ${shard}/${shards}`
    // The versions answer counts the whole layer; a shard's total is known once its parts are listed.
    const run = runShard(dest, plan, shard, settings, counters)
    const result = yield* tracking(plan, label, counters, run, { wholeLayer: shards === 1 })
    return { plan, shard, shards, result, elapsedMs: Date.now() - started, counters } satisfies ShardOutcome
  })

/** Commits a located plan once every shard has finished (ShardsUnfinished otherwise); nothing when committed before. */
export const commitShards = (located: LocatedPlan) =>
  Effect.gen(function*() {
    if (located.plan === undefined) {
      return { _tag: "AlreadyExported" as const, dir: located.dir, manifest: located.committed, table: located.table }
    }
    const { commitPlan } = yield* Effect.promise(() => import("../src/export/Export.ts"))
    return yield* commitPlan(located.dest, located.plan)
  })
