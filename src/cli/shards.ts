import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { raiseToExported } from "../../pipelines/nightly-export.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { planExport } from "../export/Incremental.ts"
import { readManifest } from "../export/Manifest.ts"
import { exportDir, type Plan, shardsOf, withShards } from "../export/Plan.ts"
import { Counters, tracking } from "../export/Progress.ts"
import { defaults, type WriteSettings } from "../export/Settings.ts"
import { forgetRuns, pinPlan, planKey, readPlan } from "../export/Shards.ts"
import { destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import {
  choiceOption,
  clientFor,
  connectionOf,
  type GlobalOptions,
  globalOptions,
  integerOption,
  retryOptions,
  retryPolicyOf,
  summaryJson
} from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { checkOutputDir, positive, versionArg } from "./export.ts"
import { loggerLayer } from "./Logging.ts"
import { type ProgressFlags, progressLayer } from "./progress.ts"
import { describeRaised, describeResult } from "./summary.ts"

/**
 * A sharded export on an array-job engine: `plan` pins the version and deals the metadata parts to N
 * shards (`_plan.json`), `export --plan LOCATION --shard I` runs one shard (N workers at once), and
 * `commit --plan LOCATION` writes the manifest once every shard has finished.
 */

/** Where engines put the index of an array job's task, in the order they are looked up. */
export const INDEX_VARIABLES = [
  "JOB_COMPLETION_INDEX",
  "AWS_BATCH_JOB_ARRAY_INDEX",
  "CLOUD_RUN_TASK_INDEX",
  "BATCH_TASK_INDEX"
] as const

/** The shard to run: `--shard`, else the engine's index variable. */
export const shardIndex = (flag: Option.Option<number>, env: NodeJS.ProcessEnv = process.env) => {
  if (Option.isSome(flag)) return Effect.succeed({ shard: flag.value, from: "--shard" })
  for (const name of INDEX_VARIABLES) {
    const raw = env[name]
    if (raw === undefined || raw === "") continue
    return /^\d+$/.test(raw.trim())
      ? Effect.succeed({ shard: Number(raw), from: name })
      : Effect.fail(new UsageError({ message: `${name} must be a shard index (0, 1, ...), got '${raw}'.` }))
  }
  return Effect.fail(
    new UsageError({
      message: `Which shard? Give --shard I, or run it as an array job that sets one of ${INDEX_VARIABLES.join(", ")}.`
    })
  )
}

/** The location of a plan as given (`.../version=V/_plan.json`, or its directory): the destination and the plan's key in it. */
export const planLocation = (location: string) =>
  Effect.gen(function*() {
    const trimmed = location.replace(/\/+$/, "")
    const file = trimmed.endsWith("/_plan.json") || trimmed === "_plan.json" ? trimmed : `${trimmed}/_plan.json`
    const segments = file.split("/")
    // OUT/<catalog-id>/<layer-id>/<version=V|snapshot=S>/_plan.json
    const key = segments.slice(-4).join("/")
    const root = segments.slice(0, -4).join("/")
    if (segments.length < 4 || !/^(version=\d+|snapshot=\d{8}T\d{6}Z)$/.test(segments.at(-2)!)) {
      return yield* new UsageError({
        message:
          `--plan ${location} is not the location of a plan (OUT/<catalog-id>/<layer-id>/version=<V>/_plan.json, as the plan command prints it).`
      })
    }
    const dest = yield* destination(root === "" && !isObjectStore(location) ? "." : root)
    const plan = yield* readPlan(dest, key)
    if (Option.isSome(plan)) return { dest, key, plan: plan.value, committed: undefined }
    // Commit removes the plan: a committed export answers every later run of the plan.
    const committed = yield* readManifest(dest, segments.slice(-4, -1).join("/"))
    if (Option.isSome(committed)) return { dest, key, plan: undefined, committed: committed.value }
    return yield* new UsageError({
      message: `There is no plan at ${dest.at(key)}: run catalog-export plan first, or check --plan.`
    })
  })

const clientOfPlan = (o: GlobalOptions, plan: Pick<Plan, "catalogHrn">, concurrency: number) =>
  clientFor(connectionOf(o), plan.catalogHrn, { concurrency, retry: retryPolicyOf(o) })

export const planCommand = Command.make(
  "plan",
  {
    ...globalOptions,
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withDescription("Layer id (a versioned or volatile layer).")),
    version: Options.text("version").pipe(
      Options.withDefault("latest"),
      Options.withDescription("Catalog version to export, or 'latest'.")
    ),
    mode: choiceOption("mode", ["full", "changes"]).pipe(
      Options.withDefault("full" as const),
      Options.withDescription("changes: only what changed since the layer's cursor (_state.json) in --out.")
    ),
    shards: integerOption("shards").pipe(
      Options.withDescription("Workers that will run the plan (an array job's size).")
    ),
    parts: integerOption("parts").pipe(
      Options.optional,
      Options.withDescription(
        `Metadata parts to ask for; default ${defaults.parts} per shard (the unit of listing and of resume).`
      )
    ),
    out: Options.text("out").pipe(
      Options.withDescription("Output directory or object store (s3://bucket/prefix), as for export.")
    ),
    force: Options.boolean("force").pipe(
      Options.withDescription("Plan again, forgetting the shards an earlier plan of the same version finished.")
    )
  },
  (o) =>
    Effect.gen(function*() {
      const version = yield* versionArg(o.version)
      const shards = yield* positive("shards")(o.shards)
      const parts = Option.isSome(o.parts) ? yield* positive("parts")(o.parts.value) : defaults.parts * shards
      yield* checkOutputDir(o.out)
      return yield* Effect.gen(function*() {
        const planned = yield* planExport({
          catalog: o.catalog,
          layer: o.layer,
          version,
          mode: o.mode,
          out: o.out,
          parts
        })
        if (planned._tag === "UpToDate") {
          return yield* Console.log(JSON.stringify({ plan: null, shards: 0, version: planned.version, upToDate: true }))
        }
        if (planned.note !== undefined) yield* Effect.logInfo(`${o.catalog} ${o.layer}: ${planned.note}`)
        const dest = yield* destination(o.out)
        const wanted = withShards(planned.plan, shards)
        let plan = yield* pinPlan(dest, wanted, o.force)
        if (shardsOf(plan).length !== shards) {
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
        yield* Console.log(
          JSON.stringify({
            plan: dest.at(planKey(exportDir(plan))),
            shards: shardsOf(plan).length,
            version: plan.version,
            ...(plan.snapshot === undefined ? {} : { snapshot: plan.snapshot }),
            parts: plan.parts.length
          })
        )
      }).pipe(Effect.provide(clientOfPlan(o, { catalogHrn: o.catalog }, 4)))
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Pin a layer version and deal its metadata parts to N shards: writes OUT/<catalog-id>/<layer-id>/version=<V>/_plan.json and prints {\"plan\", \"shards\", \"version\"} as one JSON line."
  )
)

/** `export --plan`: which plan and shard, and how to write (the plan says what and how many parts). */
export interface ShardRunSettings extends Omit<WriteSettings, "parts"> {
  readonly plan: string
  readonly shard: Option.Option<number>
  readonly json: boolean
}

/** `export --plan LOCATION [--shard I]`: one shard of a pinned plan. */
export const runShardCommand = (s: ShardRunSettings, o: GlobalOptions & ProgressFlags) =>
  Effect.gen(function*() {
    const { shard, from } = yield* shardIndex(s.shard)
    const { dest, key, plan, committed } = yield* planLocation(s.plan)
    if (plan === undefined) {
      const dir = dest.at(key.slice(0, key.lastIndexOf("/")))
      return yield* Console.log(
        s.json
          ? JSON.stringify({ status: "already-committed", shard, dir })
          : `Already committed: ${dir}/_manifest.json (${committed.partitions} partitions); shard ${shard} has nothing to do.`
      )
    }
    const count = shardsOf(plan).length
    if (shard >= count) {
      return yield* new UsageError({
        message: `Shard ${shard} (${from}) does not exist: ${dest.at(key)} has ${count} shard(s), 0..${count - 1}.`
      })
    }
    yield* checkOutputDir(dest.name)
    return yield* Effect.gen(function*() {
      const { runShard } = yield* Effect.promise(() => import("../export/Export.ts"))
      const counters = new Counters()
      const started = Date.now()
      const label = `${plan.catalogHrn} ${plan.layerId} shard ${shard}/${count}`
      // The versions answer counts the whole layer; a shard's total is known once its parts are listed.
      const run = runShard(dest, plan, shard, s, counters)
      const result = yield* tracking(plan, label, counters, run, { wholeLayer: count === 1 })
      const elapsedMs = Date.now() - started
      const retries = counters.retries
      if (result._tag === "AlreadyExported") {
        return yield* Console.log(
          s.json
            ? JSON.stringify({ status: "already-committed", shard, dir: result.dir })
            : describeResult(result, elapsedMs, retries)
        )
      }
      const m = result.shard
      const reused = counters.skippedParts > 0
        ? `, ${counters.skippedParts} part(s) reused from an interrupted run`
        : ""
      yield* Console.log(
        s.json
          ? JSON.stringify({
            status: "shard-exported",
            shard,
            shards: count,
            dir: result.dir,
            partitions: m.partitions,
            deleted: m.deleted,
            bytes: m.bytes,
            files: m.files.length,
            elapsedMs,
            retries
          })
          : `Exported shard ${shard} of ${count} (${label.split(" shard ")[0]} ${
            plan.layerType === "volatile" ? `snapshot ${plan.snapshot}` : `version ${plan.version}`
          }): ` +
            `${m.partitions} partitions (${m.deleted} deleted), ${
              (m.bytes / 1e6).toFixed(1)
            } MB, ${m.files.length} file(s) in ${(elapsedMs / 1000).toFixed(1)} s ` +
            `(${retries} retries${reused}) -> ${result.dir}. Commit once every shard has finished: catalog-export commit --plan ${
              dest.at(key)
            }`
      )
    }).pipe(Effect.provide(clientOfPlan(o, plan, s.concurrency)), Effect.provide(progressLayer(o)))
  })

export const commitCommand = Command.make(
  "commit",
  {
    ...globalOptions,
    ...retryOptions,
    plan: Options.text("plan").pipe(Options.withDescription("The plan's location, as the plan command printed it.")),
    raiseMinimum: Options.boolean("raise-minimum").pipe(
      Options.withDescription(
        "Then raise the catalog's minimum version to the exported version, if every versioned layer's data below is exported there."
      )
    ),
    json: summaryJson
  },
  (o) =>
    Effect.gen(function*() {
      const { dest, key, plan, committed } = yield* planLocation(o.plan)
      const { commitPlan } = yield* Effect.promise(() => import("../export/Export.ts"))
      const started = Date.now()
      const dir = dest.at(key.slice(0, key.lastIndexOf("/")))
      const result = plan === undefined
        ? { _tag: "AlreadyExported" as const, dir, manifest: committed }
        : yield* commitPlan(dest, plan)
      const m = result.manifest
      yield* Console.log(
        o.json
          ? JSON.stringify({
            status: result._tag === "Exported" ? "committed" : "already-committed",
            dir: result.dir,
            version: m.version,
            partitions: m.partitions,
            deleted: m.deleted,
            bytes: m.bytes,
            files: m.files.length
          })
          : result._tag === "AlreadyExported"
          ? `Already committed: ${result.dir}/_manifest.json; nothing to do.`
          : `Committed ${m.catalogHrn} ${m.layerId} ${
            m.layerType === "volatile" ? `snapshot ${m.snapshot}` : `version ${m.version}`
          } from ${plan === undefined ? 0 : shardsOf(plan).length} shard(s): ` +
            `${m.partitions} partitions (${m.deleted} deleted), ${
              (m.bytes / 1e6).toFixed(1)
            } MB, ${m.files.length} file(s) in ${((Date.now() - started) / 1000).toFixed(1)} s -> ${result.dir}`
      )
      // Also when committed before: a raise refused by an earlier commit is decided again.
      if (o.raiseMinimum && m.layerType === "versioned") {
        const raised = yield* raiseToExported(m.catalogHrn, m.version, dest.name).pipe(
          Effect.provide(clientOfPlan(o, m, 4))
        )
        if (raised !== undefined && !o.json) yield* Console.log(describeRaised(raised))
      }
    }).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Commit a sharded export once every shard has finished: checks every shard's files, writes _manifest.json and the cursor; exit 7 (nothing committed) while shards are missing."
  )
)
