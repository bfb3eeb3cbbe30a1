import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { raiseToExported } from "../../pipelines/nightly-export.ts"
import {
  commitShards,
  locatePlan,
  planShards,
  runShardOf,
  type ShardOutcome,
  type ShardsPlanned
} from "../../pipelines/shards.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import type { ExportResult } from "../export/Export.ts"
import type { Manifest } from "../export/Manifest.ts"
import { type Plan, shardsOf } from "../export/Plan.ts"
import { connectionsFor, defaults, type WriteSettings } from "../export/Settings.ts"
import type { TableCommit } from "../export/Tables.ts"
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
import { checkOutputDir, positive, type ProgressFlags, versionArg } from "./exporting.ts"
import { CATALOG_VERSION_FLAG } from "./help.ts"
import { loggerLayer } from "./Logging.ts"
import { progressLayer } from "./progress.ts"
import { render, type Renderer } from "./render.ts"
import { describeResult, raisedMinimum } from "./summary.ts"

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

const clientOfPlan = (o: GlobalOptions, plan: Pick<Plan, "catalogHrn">, concurrency: number) =>
  clientFor(connectionOf(o), plan.catalogHrn, { concurrency, retry: retryPolicyOf(o) })

/** What `plan` prints, always as one JSON line: the plan's location for the array job, or that there is nothing to do. */
const planned: Renderer<ShardsPlanned> = {
  json: (r) =>
    r._tag === "UpToDate"
      ? { plan: null, shards: 0, version: r.version, upToDate: true }
      : {
        plan: r.location,
        shards: shardsOf(r.plan).length,
        version: r.plan.version,
        ...(r.plan.snapshot === undefined ? {} : { snapshot: r.plan.snapshot }),
        parts: r.plan.parts.length
      },
  text: (r) => [JSON.stringify(planned.json(r))]
}

export const planCommand = Command.make(
  "plan",
  {
    ...globalOptions,
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withDescription("Layer id (a versioned or volatile layer).")),
    version: Options.text(CATALOG_VERSION_FLAG).pipe(
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
    format: choiceOption("format", ["files", "iceberg"]).pipe(
      Options.withDefault("files" as const),
      Options.withDescription(
        "iceberg: a snapshot of the layer's Iceberg table (docs/iceberg-tables.md), the shards write its data files and commit makes the snapshot; files (the default): the shards' --format says which."
      )
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
      const result = yield* planShards(
        {
          catalog: o.catalog,
          layer: o.layer,
          version,
          mode: o.mode,
          out: o.out,
          parts,
          shards,
          force: o.force,
          ...(o.format === "iceberg" ? { format: "iceberg" as const } : {})
        },
        (note) => Effect.logInfo(`${o.catalog} ${o.layer}: ${note}`)
      ).pipe(Effect.provide(clientOfPlan(o, { catalogHrn: o.catalog }, 4)))
      yield* render(planned, result, true)
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

/** Where a committed export is recorded: its manifest, or for a table its tagged snapshot. */
const committedAs = (dir: string, table: TableCommit | undefined) =>
  table === undefined
    ? `${dir}/_manifest.json`
    : `table ${table.location}, tag ${table.tag} (snapshot ${table.snapshotId}), metadata ${table.metadataFile}`

/** What `export --plan` shows: the shard it ran, or that the export was committed before. */
type ShardShown =
  | {
    readonly _tag: "CommittedBefore"
    readonly shard: number
    readonly dir: string
    readonly manifest: Manifest
    readonly table: TableCommit | undefined
  }
  | { readonly _tag: "Ran"; readonly outcome: ShardOutcome; readonly location: string }

const shardRun: Renderer<ShardShown> = {
  json: (r) => {
    if (r._tag === "CommittedBefore") {
      return {
        status: "already-committed",
        shard: r.shard,
        dir: r.dir,
        ...(r.table === undefined ? {} : { table: r.table })
      }
    }
    const { result, shard, shards, elapsedMs, counters } = r.outcome
    if (result._tag === "AlreadyExported") return { status: "already-committed", shard, dir: result.dir }
    const m = result.shard
    return {
      status: "shard-exported",
      shard,
      shards,
      dir: result.dir,
      partitions: m.partitions,
      deleted: m.deleted,
      bytes: m.bytes,
      files: m.files.length,
      elapsedMs,
      retries: counters.retries
    }
  },
  text: (r) => {
    if (r._tag === "CommittedBefore") {
      return [
        `Already committed: ${committedAs(r.dir, r.table)} (${
          plural(r.manifest.partitions, "partition")
        }); shard ${r.shard} has nothing to do.`
      ]
    }
    const { plan, result, shard, shards, elapsedMs, counters } = r.outcome
    if (result._tag === "AlreadyExported") return [describeResult(result, elapsedMs, counters.retries)]
    const m = result.shard
    const reused = counters.skippedParts > 0
      ? `, ${plural(counters.skippedParts, "part")} reused from an interrupted run`
      : ""
    return [
      `Exported shard ${shard} of ${shards} (${plan.catalogHrn} ${plan.layerId} ${
        plan.layerType === "volatile" ? `snapshot ${plan.snapshot}` : `version ${plan.version}`
      }): ` +
      `${plural(m.partitions, "partition")} (${m.deleted} deleted), ${(m.bytes / 1e6).toFixed(1)} MB, ${
        plural(m.files.length, "file")
      } in ${(elapsedMs / 1000).toFixed(1)} s ` +
      `(${counters.retries} retries${reused}) -> ${result.dir}. Commit once every shard has finished: catalog-export commit --plan ${r.location}`
    ]
  }
}

/** `export --plan LOCATION [--shard I]`: one shard of a pinned plan. */
export const runShardCommand = (s: ShardRunSettings, o: GlobalOptions & ProgressFlags) =>
  Effect.gen(function*() {
    const { shard, from } = yield* shardIndex(s.shard)
    const located = yield* locatePlan(s.plan)
    if (located.plan === undefined) {
      const { committed, dir, table } = located
      return yield* render(shardRun, { _tag: "CommittedBefore", shard, dir, manifest: committed, table }, s.json)
    }
    const count = shardsOf(located.plan).length
    if (shard >= count) {
      return yield* new UsageError({
        message: `Shard ${shard} (${from}) does not exist: ${located.location} has ${plural(count, "shard")}, 0..${
          count - 1
        }.`
      })
    }
    yield* checkOutputDir(located.dest.name)
    const outcome = yield* runShardOf({ ...located, plan: located.plan }, shard, s).pipe(
      Effect.provide(clientOfPlan(o, located.plan, connectionsFor(s))),
      Effect.provide(progressLayer(o))
    )
    yield* render(shardRun, { _tag: "Ran", outcome, location: located.location }, s.json)
  })

/** What `commit` shows: the manifest it wrote, or that the export was committed before. */
const committed: Renderer<{ readonly result: ExportResult; readonly shards: number; readonly elapsedMs: number }> = {
  json: ({ result }) => ({
    status: result._tag === "Exported" ? "committed" : "already-committed",
    dir: result.dir,
    ...(result.table === undefined ? {} : { table: result.table }),
    version: result.manifest.version,
    partitions: result.manifest.partitions,
    deleted: result.manifest.deleted,
    bytes: result.manifest.bytes,
    files: result.manifest.files.length
  }),
  text: ({ result, shards, elapsedMs }) => {
    const m = result.manifest
    return [
      result._tag === "AlreadyExported"
        ? `Already committed: ${committedAs(result.dir, result.table)}; nothing to do.`
        : `Committed ${m.catalogHrn} ${m.layerId} ${
          m.layerType === "volatile" ? `snapshot ${m.snapshot}` : `version ${m.version}`
        } from ${plural(shards, "shard")}: ` +
          `${plural(m.partitions, "partition")} (${m.deleted} deleted), ${(m.bytes / 1e6).toFixed(1)} MB, ${
            plural(m.files.length, "file")
          } in ${(elapsedMs / 1000).toFixed(1)} s -> ${result.dir}`,
      ...(result.table === undefined
        ? []
        : [`  table ${result.table.location}, tag ${result.table.tag}, metadata ${result.table.metadataFile}`])
    ]
  }
}

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
      const located = yield* locatePlan(o.plan)
      const started = Date.now()
      const result = yield* commitShards(located)
      const shards = located.plan === undefined ? 0 : shardsOf(located.plan).length
      yield* render(committed, { result, shards, elapsedMs: Date.now() - started }, o.json)
      // Also when committed before: a raise refused by an earlier commit is decided again.
      const m = result.manifest
      if (o.raiseMinimum && m.layerType === "versioned") {
        const raised = yield* raiseToExported(m.catalogHrn, m.version, located.dest.name).pipe(
          Effect.provide(clientOfPlan(o, m, 4))
        )
        if (raised !== undefined) yield* render(raisedMinimum, raised, o.json)
      }
    }).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Commit a sharded export once every shard has finished: checks every shard's files, writes _manifest.json and the cursor; exit 7 (nothing committed) while shards are missing."
  )
)
