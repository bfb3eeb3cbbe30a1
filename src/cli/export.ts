import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Struct from "effect/Struct"
import { exportOne, previewLayer } from "../../pipelines/nightly-export.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { connectionsFor, writeSettingsOf } from "../export/Settings.ts"
import {
  choiceOption,
  clientFor,
  connectionOf,
  globalOptions,
  integerOption,
  noFailover,
  retryPolicyOf,
  summaryJson
} from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { checkOutputDir, checkSettings, positive, settingFlags, versionArg, writeOptions } from "./exporting.ts"
import { CATALOG_VERSION_FLAG } from "./help.ts"
import { loggerLayer } from "./Logging.ts"
import { progressLayer } from "./progress.ts"
import { render } from "./render.ts"
import { exported, outcomeJson, previewed, reportDocument, writeRunReport } from "./summary.ts"

export const exportCommand = Command.make(
  "export",
  {
    // In the order help lists them: what export needs first (optional to the parser only because --plan gives them).
    catalog: Options.text("catalog").pipe(
      Options.withPseudoName("HRN"),
      Options.optional,
      Options.withDescription("Required unless --plan. Catalog HRN, e.g. hrn:here:data::olp-here:rib-2.")
    ),
    layer: Options.text("layer").pipe(
      Options.withPseudoName("ID"),
      Options.optional,
      Options.withDescription("Required unless --plan. Layer id (a versioned or volatile layer).")
    ),
    out: Options.optional(settingFlags.out).pipe(Options.withDescription("Required unless --plan.")),
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
    version: Options.text(CATALOG_VERSION_FLAG).pipe(
      Options.withPseudoName("N|latest"),
      Options.withDefault("latest"),
      Options.withDescription("Catalog version to export, or 'latest'. Default: latest.")
    ),
    mode: choiceOption("mode", ["full", "changes"]).pipe(
      Options.withDefault("full" as const),
      Options.withDescription(
        "changes: only what changed since the layer's cursor (_state.json) in --out; a full export when there is none. Default: full."
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
      Options.withDescription(
        "Say what the export would do (version, mode, metadata parts, or that it is up to date or already exported) and change nothing; one JSON object with --json."
      )
    ),
    noFailover,
    json: summaryJson,
    ...Struct.omit(writeOptions, "out"),
    ...globalOptions
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
      const client = clientFor(connection, o.catalog, {
        concurrency: connectionsFor(settings),
        retry: retryPolicyOf(o)
      })
      return yield* Effect.gen(function*() {
        if (o.dryRun) {
          const preview = yield* previewLayer(
            { catalog: o.catalog, layer: o.layer },
            { out: o.out, mode: o.mode, version, parts: settings.parts, format: settings.format }
          )
          return yield* render(previewed, [{ catalog: o.catalog, layer: o.layer, ...preview }], o.json)
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
        yield* render(exported, { outcomes: [outcome], raised, report }, o.json)
        if (Either.isLeft(outcome.result)) return yield* Effect.fail(outcome.result.left)
        if (Option.isSome(raiseFailure)) return yield* Effect.fail(raiseFailure.value)
      }).pipe(Effect.provide(client))
    }).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(flags)))
).pipe(
  Command.withDescription(
    "Export one layer version (or a volatile layer's current data) to Parquet and/or Arrow files."
  )
)
