import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import { defaults } from "../export/JobConfig.ts"
import { type BackfillJob, runBackfill, type VersionOutcome } from "../../pipelines/backfill.ts"
import { clientLayer, type GlobalOptions, globalOptions, integerOption, loggerLayer, progressStyle, resolveLookupUrl, retryPolicyOf } from "./common.ts"
import { unfinishedWhenInterrupted, UsageError } from "./Exit.ts"
import { checkOutputDir, checkWriteSettings, type WriteSettings, writeOptions } from "./export.ts"

const versions = (from: number, through: number) => (from === through ? `version ${from}` : `versions ${from}..${through}`)

const describeOutcome = (o: VersionOutcome) => {
  switch (o.status) {
    case "exported":
      return `version ${o.version}: exported ${o.partitions} partitions, ${(o.bytes / 1e6).toFixed(1)} MB in ${(o.elapsedMs / 1000).toFixed(1)} s`
    case "already-exported":
      return `version ${o.version}: already exported, skipped`
    case "below-minimum":
      return `${versions(o.version, o.through)}: deleted (below the minimum version ${o.minimum}), skipped`
    case "not-yet-published":
      return `${versions(o.version, o.through)}: not published yet (the latest version is ${o.latest}), skipped`
  }
}

interface BackfillSettings extends WriteSettings {
  readonly catalog: string
  readonly layer: string
  readonly from: number
  readonly to: number
}

const backfill = (s: BackfillSettings, global: GlobalOptions, lookupFromConfig?: string, credentialsFromConfig?: string) =>
  Effect.gen(function*() {
    if (s.from < 0 || s.to < 0) return yield* new UsageError({ message: `--from and --to must be non-negative versions, got ${s.from}..${s.to}.` })
    if (s.from > s.to) return yield* new UsageError({ message: `--from ${s.from} is greater than --to ${s.to}; give the range oldest first.` })
    const settings = yield* checkWriteSettings(s)
    yield* checkOutputDir(s.out)
    const client = clientLayer({
      lookupUrl: resolveLookupUrl(global.lookupUrl, lookupFromConfig, s.catalog),
      credentials: Option.getOrElse(global.credentials, () => credentialsFromConfig),
      concurrency: settings.concurrency,
      retry: retryPolicyOf(global)
    })
    const totals = yield* runBackfill(
      { catalog: s.catalog, layer: s.layer, from: s.from, to: s.to, parts: settings.parts, export: settings },
      progressStyle(global),
      (outcome) => Console.log(describeOutcome(outcome))
    ).pipe(Effect.provide(client))
    yield* Console.log(
      `Backfill of ${s.catalog} ${s.layer} ${s.from}..${s.to}: ${totals.exported} exported, ${totals.alreadyExported} already exported, ` +
        `${totals.belowMinimum} deleted, ${totals.notYetPublished} not published yet.`
    )
  })

export const runBackfillJob = (job: BackfillJob, global: GlobalOptions) =>
  backfill({
    catalog: job.catalog,
    layer: job.layer,
    from: job.from,
    to: job.to,
    out: job.out,
    format: job.format ?? defaults.format,
    compression: job.compression ?? defaults.compression,
    concurrency: job.concurrency ?? defaults.concurrency,
    listConcurrency: job.listConcurrency ?? defaults.listConcurrency,
    parts: job.parts ?? defaults.parts,
    maxFileBytes: Option.fromNullable(job.maxFileBytes)
  }, global, job.lookupUrl, job.credentials)

export const backfillCommand = Command.make(
  "backfill",
  {
    ...globalOptions,
    ...writeOptions,
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withDescription("Versioned layer id.")),
    from: integerOption("from").pipe(Options.withDescription("First catalog version to export.")),
    to: integerOption("to").pipe(Options.withDescription("Last catalog version to export (inclusive)."))
  },
  (o) => backfill(o, o).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(o)))
).pipe(Command.withDescription("Export every version in --from..--to of a versioned layer, skipping versions already exported; safe to re-run after a kill."))
