import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import {
  type BackfillJob,
  backfillRequestOf,
  type BackfillTotals,
  runBackfill,
  type VersionOutcome
} from "../../pipelines/backfill.ts"
import { ExitCode, UsageError } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import { connectionsFor, writeSettingsOf } from "../export/Settings.ts"
import {
  clientFor,
  type Connection,
  connectionOf,
  type GlobalOptions,
  globalOptions,
  integerOption,
  retryPolicyOf,
  summaryJson
} from "./common.ts"
import { unfinishedWhenInterrupted } from "./Exit.ts"
import { checkOutputDir, checkSettings, positive, type ProgressFlags, writeOptions } from "./exporting.ts"
import { loggerLayer } from "./Logging.ts"
import { progressLayer } from "./progress.ts"
import { render, type Renderer } from "./render.ts"
import { describeDecode, reportDocument, writeRunReport } from "./summary.ts"

const versions = (
  from: number,
  through: number
) => (from === through ? `version ${from}` : `versions ${from}..${through}`)

const describeOutcome = (o: VersionOutcome) => {
  switch (o.status) {
    case "exported":
      return `version ${o.version}: exported ${plural(o.partitions, "partition")}${describeDecode(o.decode)}, ${
        (o.bytes / 1e6).toFixed(1)
      } MB in ${(o.elapsedMs / 1000).toFixed(1)} s`
    case "already-exported":
      return `version ${o.version}: already exported, skipped`
    case "would-export":
      return `version ${o.version}: would be exported`
    case "unchanged":
      return `${
        versions(o.version, o.through)
      }: the layer did not change since version ${o.since}, whose export holds this state; skipped`
    case "no-data":
      return `${versions(o.version, o.through)}: the layer has no data yet, skipped`
    case "below-minimum":
      return `${versions(o.version, o.through)}: deleted (below the minimum version ${o.minimum}), skipped`
    case "not-yet-published":
      return `${versions(o.version, o.through)}: not published yet (the latest version is ${o.latest}), skipped`
  }
}

/** A version's line as soon as it is decided; with --json, versions are in the run report. */
const versionDecided: Renderer<VersionOutcome> = { json: () => undefined, text: (o) => [describeOutcome(o)] }

/** The end of a backfill: how unchanged versions were found (when it matters) and the counts; the run report with --json. */
const backfilled: Renderer<{
  readonly job: Backfill
  readonly totals: BackfillTotals & { readonly changeCheck: string | undefined }
  readonly report: unknown
}> = {
  json: (r) => r.report,
  text: ({ job, totals }) => [
    ...(totals.changeCheck === undefined ? [] : [`Note: ${totals.changeCheck}.`]),
    `Backfill of ${job.catalog} ${job.layer} ${job.from}..${job.to}: ${
      totals.wouldExport === undefined ? `${totals.exported} exported` : `${totals.wouldExport} to export`
    }, ${totals.alreadyExported} already exported, ` +
    `${totals.unchanged} unchanged, ${totals.noData} without data, ${totals.belowMinimum} deleted, ${totals.notYetPublished} not published yet.`,
    ...(totals.wouldExport === undefined ? [] : ["Dry run: nothing was changed."])
  ]
}

/** What a backfill runs: a backfill job config's fields (but how to reach the service), from a config or from the flags. */
type Backfill = Omit<BackfillJob, "job" | keyof Connection>

const backfill = (
  job: Backfill,
  global: GlobalOptions & ProgressFlags & { readonly json: boolean; readonly dryRun?: boolean },
  connection: Connection
) =>
  Effect.gen(function*() {
    if (job.from < 0 || job.to < 0) {
      return yield* new UsageError({
        message: `--from and --to must be non-negative versions, got ${job.from}..${job.to}.`
      })
    }
    if (job.from > job.to) {
      return yield* new UsageError({
        message: `--from ${job.from} is greater than --to ${job.to}; give the range oldest first.`
      })
    }
    const startedAt = Date.now()
    const versionConcurrency = yield* positive("version-concurrency")(job.versionConcurrency ?? 1)
    yield* checkOutputDir(job.out)
    const { region } = connection
    const write = writeSettingsOf(job)
    const client = clientFor(connection, job.catalog, {
      concurrency: connectionsFor(write),
      retry: retryPolicyOf(global)
    })
    const outcomes: Array<VersionOutcome> = []
    const totals = yield* runBackfill(
      backfillRequestOf(job, { versionConcurrency, region, dryRun: global.dryRun === true }),
      (outcome) =>
        Effect.zipRight(Effect.sync(() => outcomes.push(outcome)), render(versionDecided, outcome, global.json))
    ).pipe(Effect.provide(client), Effect.provide(progressLayer(global)))
    const { changeCheck, ...counts } = totals
    const report = reportDocument(
      {
        job: "backfill",
        exitCode: ExitCode.ok,
        catalog: job.catalog,
        layer: job.layer,
        from: job.from,
        to: job.to,
        versions: outcomes,
        totals: counts,
        ...(changeCheck === undefined ? {} : { note: changeCheck })
      },
      startedAt
    )
    if (global.dryRun !== true) yield* writeRunReport(job.out, report)
    yield* render(backfilled, { job, totals, report }, global.json)
  })

export const runBackfillJob = (
  job: BackfillJob,
  global: GlobalOptions & ProgressFlags & { readonly json: boolean; readonly dryRun?: boolean }
) => backfill(job, global, connectionOf(global, job))

export const backfillCommand = Command.make(
  "backfill",
  {
    ...globalOptions,
    ...writeOptions,
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withDescription("Versioned layer id.")),
    from: integerOption("from").pipe(Options.withDescription("First catalog version to export.")),
    to: integerOption("to").pipe(Options.withDescription("Last catalog version to export (inclusive).")),
    versionConcurrency: integerOption("version-concurrency").pipe(
      Options.withDefault(1),
      Options.withDescription("Versions exported at once; they share --concurrency between them.")
    ),
    everyVersion: Options.boolean("every-version").pipe(
      Options.withDescription(
        "Export every version, also those in which the layer did not change (by default those are skipped: the export of the version where it last changed holds their state)."
      )
    ),
    json: summaryJson
  },
  (o) =>
    checkSettings(o).pipe(
      Effect.flatMap((settings) =>
        backfill(
          {
            ...settings,
            catalog: o.catalog,
            layer: o.layer,
            from: o.from,
            to: o.to,
            versionConcurrency: o.versionConcurrency,
            everyVersion: o.everyVersion
          },
          o,
          connectionOf(o)
        )
      ),
      unfinishedWhenInterrupted,
      Effect.provide(loggerLayer(o))
    )
).pipe(
  Command.withDescription(
    "Export every version in --from..--to of a versioned layer, skipping versions already exported and versions in which the layer did not change; safe to re-run after a kill."
  )
)
