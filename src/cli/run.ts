import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as fs from "node:fs"
import { Effect, Schema } from "effect"
import { JobConfigError, load } from "../export/JobConfig.ts"
import { BackfillJob } from "../../pipelines/backfill.ts"
import { NightlyJob } from "../../pipelines/nightly-export.ts"
import { RetentionJob } from "../../pipelines/retention.ts"
import { runBackfillJob } from "./backfill.ts"
import { globalOptions, loggerLayer, noFailover, retryOptions, summaryJson } from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { runNightlyJob } from "./nightly.ts"
import { progressOptions } from "./progress.ts"
import { runRetentionJob } from "./retention.ts"

const JobKind = Schema.Struct({ job: Schema.Literal("nightly-export", "backfill", "retention") })

/** `run config.json`: the `job` field says which pipeline; the rest is that pipeline's validated config. */
export const runCommand = Command.make(
  "run",
  { ...globalOptions, ...retryOptions, noFailover, ...progressOptions, json: summaryJson, config: Args.file({ name: "config.json" }) },
  (o) =>
    Effect.gen(function*() {
      const text = yield* Effect.try({
        try: () => fs.readFileSync(o.config, "utf8"),
        catch: (e) => {
          const code = (e as NodeJS.ErrnoException).code
          const why = code === "ENOENT" ? "the file does not exist" : code === "EISDIR" ? "this is a directory" : `it cannot be read (${code ?? String(e)})`
          return new JobConfigError({ message: `Cannot read job config ${o.config}: ${why}. Check the path.` })
        }
      })
      const json = yield* Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: (e) => new JobConfigError({ message: `Job config ${o.config} is not valid JSON: ${(e as Error).message}.` })
      })
      const kind = yield* Effect.try({
        try: () => Schema.decodeUnknownSync(JobKind)(json).job,
        catch: () => new JobConfigError({ message: `Job config ${o.config}: the field "job" must be one of nightly-export, backfill, retention.` })
      })
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
