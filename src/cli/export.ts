import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { exportOne } from "../../pipelines/nightly-export.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { planExport } from "../export/Incremental.ts"
import { writeSettingsOf } from "../export/Settings.ts"
import { destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import {
  checkSettings,
  choiceOption,
  clientFor,
  connectionOf,
  globalOptions,
  integerOption,
  noFailover,
  retryOptions,
  retryPolicyOf,
  settingFlags,
  summaryJson
} from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { loggerLayer } from "./Logging.ts"
import { progressLayer, progressOptions } from "./progress.ts"
import { describeRaised, outcomeJson, outcomeLines, reportDocument, reportTable, writeRunReport } from "./summary.ts"

export const positive = (name: string) => (value: number) =>
  value >= 1
    ? Effect.succeed(value)
    : Effect.fail(new UsageError({ message: `--${name} must be a positive integer, got ${value}.` }))

/**
 * Refuses an output path that is a file or cannot be written, before any data is fetched. Creates
 * nothing: a run refused later (unknown catalog, bad credentials) leaves no trace; the export
 * creates the directories it writes to. An object store (`s3://bucket/prefix`) is asked to list the
 * prefix: an unknown bucket, refused credentials or a missing permission stop the run here.
 */
export const checkOutputDir = (out: string) =>
  isObjectStore(out) ? Effect.asVoid(Effect.flatMap(destination(out), (dest) => dest.list(""))) : checkLocalDir(out)

const checkLocalDir = (out: string) =>
  Effect.try({
    try: () => {
      let existing = path.resolve(out)
      while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing)
      if (!fs.statSync(existing).isDirectory()) {
        throw Object.assign(new Error(`${existing} is a file`), {
          code: existing === path.resolve(out) ? "EEXIST" : "ENOTDIR",
          file: existing
        })
      }
      fs.accessSync(existing, fs.constants.W_OK)
    },
    catch: (e) => {
      const code = (e as NodeJS.ErrnoException).code
      const reason = code === "EEXIST"
        ? "is a file, not a directory"
        : code === "ENOTDIR"
        ? `cannot be created: ${(e as { file?: string }).file} is a file`
        : code === "EACCES" || code === "EPERM" || code === "EROFS"
        ? `is not writable (${code})`
        : `cannot be created (${code ?? String(e)})`
      return new UsageError({ message: `Output directory ${out} ${reason}; choose a writable directory with --out.` })
    }
  })

export const versionArg = (raw: string) =>
  raw === "latest"
    ? Effect.succeed("latest" as const)
    : /^\d+$/.test(raw)
    ? Effect.succeed(Number(raw))
    : Effect.fail(new UsageError({ message: `--version must be a non-negative integer or 'latest', got '${raw}'.` }))

/** The flags of export and backfill: the export settings, how long to retry, progress. */
export const writeOptions = { ...settingFlags, ...retryOptions, ...progressOptions }

export const exportCommand = Command.make(
  "export",
  {
    ...globalOptions,
    ...writeOptions,
    out: Options.text("out").pipe(
      Options.optional,
      Options.withDescription(
        "Output directory or object store (s3://bucket/prefix); files go to OUT/<catalog-id>/<layer-id>/version=<V>/."
      )
    ),
    catalog: Options.text("catalog").pipe(
      Options.optional,
      Options.withDescription("Catalog HRN, e.g. hrn:here:data::olp-here:rib-2.")
    ),
    layer: Options.text("layer").pipe(
      Options.optional,
      Options.withDescription("Layer id (a versioned or volatile layer).")
    ),
    plan: Options.text("plan").pipe(
      Options.optional,
      Options.withDescription(
        "Run one shard of a plan made by the plan command (its location, as printed); --catalog, --layer and --out come from it."
      )
    ),
    shard: integerOption("shard").pipe(
      Options.optional,
      Options.withDescription(
        "With --plan: the shard to run (0..N-1); default from JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, CLOUD_RUN_TASK_INDEX or BATCH_TASK_INDEX."
      )
    ),
    version: Options.text("version").pipe(
      Options.withDefault("latest"),
      Options.withDescription("Catalog version to export, or 'latest'.")
    ),
    mode: choiceOption("mode", ["full", "changes"]).pipe(
      Options.withDefault("full" as const),
      Options.withDescription(
        "changes: only what changed since the layer's cursor (_state.json) in --out; a full export when there is none."
      )
    ),
    raiseMinimum: Options.boolean("raise-minimum").pipe(
      Options.withDescription(
        "After the export is committed, raise the catalog's minimum version to it, if every versioned layer's data below is exported to --out."
      )
    ),
    keepSnapshots: integerOption("keep-snapshots").pipe(
      Options.optional,
      Options.withDescription(
        "Volatile layers: after the new snapshot, keep the newest N snapshot directories and remove older ones."
      )
    ),
    force: Options.boolean("force").pipe(Options.withDescription("Export again even if a manifest says it is done.")),
    dryRun: Options.boolean("dry-run").pipe(
      Options.withDescription("Print the plan (pinned version and parts) as JSON and stop.")
    ),
    noFailover,
    json: summaryJson
  },
  (flags) =>
    Effect.gen(function*() {
      if (Option.isSome(flags.plan)) {
        const given = (["catalog", "layer", "out"] as const).filter((name) => Option.isSome(flags[name]))
        if (given.length > 0) {
          return yield* new UsageError({
            message: `--plan runs a shard of a pinned plan, which names the catalog, layer and output; drop ${
              given.map((g) => `--${g}`).join(", ")
            }.`
          })
        }
        if (Option.isSome(flags.shard) && flags.shard.value < 0) {
          return yield* new UsageError({ message: `--shard must be 0 or more, got ${flags.shard.value}.` })
        }
        const settings = writeSettingsOf(yield* checkSettings({ ...flags, out: "" }))
        const { runShardCommand } = yield* Effect.promise(() => import("./shards.ts"))
        return yield* runShardCommand(
          { ...settings, plan: flags.plan.value, shard: flags.shard, json: flags.json },
          flags
        )
      }
      if (Option.isSome(flags.shard)) {
        return yield* new UsageError({
          message: "--shard needs --plan: a shard belongs to a plan made by the plan command."
        })
      }
      const missing = (["catalog", "layer", "out"] as const).filter((name) => Option.isNone(flags[name]))
      if (missing.length > 0) {
        return yield* new UsageError({
          message: `Missing ${
            missing.map((m) => `--${m}`).join(", ")
          }: export needs --catalog, --layer and --out (or --plan LOCATION to run a shard of a plan).`
        })
      }
      const o = {
        ...flags,
        catalog: Option.getOrThrow(flags.catalog),
        layer: Option.getOrThrow(flags.layer),
        out: Option.getOrThrow(flags.out)
      }
      const version = yield* versionArg(o.version)
      const settings = writeSettingsOf(yield* checkSettings(o))
      const keepSnapshots = Option.isSome(o.keepSnapshots)
        ? yield* positive("keep-snapshots")(o.keepSnapshots.value)
        : undefined
      const connection = connectionOf(o)
      const client = clientFor(connection, o.catalog, { concurrency: settings.concurrency, retry: retryPolicyOf(o) })
      return yield* Effect.gen(function*() {
        if (o.dryRun) {
          const planned = yield* planExport({
            catalog: o.catalog,
            layer: o.layer,
            version,
            mode: o.mode,
            out: o.out,
            parts: settings.parts
          })
          return yield* Console.log(JSON.stringify(planned, null, 2))
        }
        const startedAt = Date.now()
        yield* checkOutputDir(o.out)
        const { outcome, raised, raiseFailure } = yield* exportOne(
          { catalog: o.catalog, layer: o.layer },
          {
            ...settings,
            out: o.out,
            mode: o.mode,
            version,
            force: o.force,
            keepSnapshots,
            region: connection.region,
            failover: !o.noFailover
          },
          o.raiseMinimum,
          (note) => Effect.logInfo(`${o.catalog} ${o.layer}: ${note}`)
        ).pipe(Effect.provide(progressLayer(o)))
        const report = reportDocument(outcomeJson(outcome), startedAt)
        yield* writeRunReport(o.out, { job: "export", ...report }, [outcome])
        if (o.json) yield* Console.log(JSON.stringify(report))
        else {
          yield* Console.log(outcomeLines(outcome, false).join("\n"))
          if (process.stdout.isTTY) yield* Console.log(["", ...reportTable([outcome], report.exitCode)].join("\n"))
          for (const r of raised) yield* Console.log(describeRaised(r))
        }
        if (Either.isLeft(outcome.result)) return yield* Effect.fail(outcome.result.left)
        if (Option.isSome(raiseFailure)) return yield* Effect.fail(raiseFailure.value)
      }).pipe(Effect.provide(client))
    }).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(flags)))
).pipe(
  Command.withDescription(
    "Export one layer version (or a volatile layer's current data) to Parquet and/or Arrow files."
  )
)
