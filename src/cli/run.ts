import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import { BackfillJob } from "../../pipelines/backfill.ts"
import { NightlyJob } from "../../pipelines/nightly-export.ts"
import { RetentionJob } from "../../pipelines/retention.ts"
import { jobKindOf, load } from "../export/JobConfig.ts"
import { runBackfillJob } from "./backfill.ts"
import { globalOptions, noFailover, retryOptions, summaryJson } from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { progressOptions } from "./exporting.ts"
import { loggerLayer } from "./Logging.ts"
import { runNightlyJob } from "./nightly.ts"
import { runRetentionJob, yes } from "./retention.ts"

/** `run config.json`: the `job` field says which pipeline; the rest is that pipeline's validated config. */
export const runCommand = Command.make(
  "run",
  {
    ...globalOptions,
    ...retryOptions,
    noFailover,
    ...progressOptions,
    json: summaryJson,
    dryRun: Options.boolean("dry-run").pipe(
      Options.withDescription(
        "Change nothing: a retention job prints its plan; a nightly-export or backfill job prints what it would export."
      )
    ),
    yes,
    config: Args.file({ name: "config.json" }).pipe(
      Args.withDescription("The job config to run: nightly-export, backfill or retention (config/*.example.json).")
    )
  },
  (o) =>
    Effect.gen(function*() {
      const kind = yield* jobKindOf(o.config)
      switch (kind) {
        case "nightly-export":
          return yield* runNightlyJob(yield* load(NightlyJob, o.config), o, false)
        case "backfill":
          return yield* runBackfillJob(yield* load(BackfillJob, o.config), o)
        case "retention":
          return yield* runRetentionJob(yield* load(RetentionJob, o.config), o.config, o)
      }
    }).pipe(Effect.asVoid, unfinishedWhenInterrupted, Effect.provide(loggerLayer(o)))
).pipe(Command.withDescription("Run a job config: nightly-export, backfill or retention (the config's \"job\" field)."))
