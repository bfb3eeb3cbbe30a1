import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { type BackfillJob, runBackfill, type VersionOutcome } from "../../pipelines/backfill.ts"
import { ExitCode, UsageError } from "../domain/ExitCode.ts"
import { type WriteSettings, writeSettingsOf } from "../export/Settings.ts"
import {
  checkSettings,
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
import { checkOutputDir, positive, writeOptions } from "./export.ts"
import { loggerLayer } from "./Logging.ts"
import { type ProgressFlags, progressLayer } from "./progress.ts"
import { reportDocument, writeRunReport } from "./summary.ts"
import { describeDecode } from "./summary.ts"

const versions = (
  from: number,
  through: number
) => (from === through ? `version ${from}` : `versions ${from}..${through}`)

const describeOutcome = (o: VersionOutcome) => {
  switch (o.status) {
    case "exported":
      return `version ${o.version}: exported ${o.partitions} partitions${describeDecode(o.decode)}, ${
        (o.bytes / 1e6).toFixed(1)
      } MB in ${(o.elapsedMs / 1000).toFixed(1)} s`
    case "already-exported":
      return `version ${o.version}: already exported, skipped`
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

interface BackfillSettings {
  readonly out: string
  readonly write: WriteSettings
  readonly catalog: string
  readonly layer: string
  readonly from: number
  readonly to: number
  readonly versionConcurrency: number
  readonly everyVersion: boolean
}

const backfill = (
  s: BackfillSettings,
  global: GlobalOptions & ProgressFlags & { readonly json: boolean },
  connection: Connection
) =>
  Effect.gen(function*() {
    if (s.from < 0 || s.to < 0) {
      return yield* new UsageError({
        message: `--from and --to must be non-negative versions, got ${s.from}..${s.to}.`
      })
    }
    if (s.from > s.to) {
      return yield* new UsageError({
        message: `--from ${s.from} is greater than --to ${s.to}; give the range oldest first.`
      })
    }
    const startedAt = Date.now()
    const versionConcurrency = yield* positive("version-concurrency")(s.versionConcurrency)
    yield* checkOutputDir(s.out)
    const { region } = connection
    const client = clientFor(connection, s.catalog, { concurrency: s.write.concurrency, retry: retryPolicyOf(global) })
    const outcomes: Array<VersionOutcome> = []
    const totals = yield* runBackfill(
      {
        catalog: s.catalog,
        layer: s.layer,
        from: s.from,
        to: s.to,
        parts: s.write.parts,
        export: { ...s.write, out: s.out },
        versionConcurrency,
        everyVersion: s.everyVersion,
        region
      },
      (
        outcome
      ) => (global.json ? Effect.sync(() => void outcomes.push(outcome)) : Console.log(describeOutcome(outcome)))
    ).pipe(Effect.provide(client), Effect.provide(progressLayer(global)))
    const { changeCheck, ...counts } = totals
    const report = reportDocument(
      {
        job: "backfill",
        exitCode: ExitCode.ok,
        catalog: s.catalog,
        layer: s.layer,
        from: s.from,
        to: s.to,
        versions: outcomes,
        totals: counts,
        ...(changeCheck === undefined ? {} : { note: changeCheck })
      },
      startedAt
    )
    yield* writeRunReport(s.out, report)
    if (global.json) return yield* Console.log(JSON.stringify(report))
    if (totals.changeCheck !== undefined) yield* Console.log(`Note: ${totals.changeCheck}.`)
    yield* Console.log(
      `Backfill of ${s.catalog} ${s.layer} ${s.from}..${s.to}: ${totals.exported} exported, ${totals.alreadyExported} already exported, ` +
        `${totals.unchanged} unchanged, ${totals.noData} without data, ${totals.belowMinimum} deleted, ${totals.notYetPublished} not published yet.`
    )
  })

export const runBackfillJob = (job: BackfillJob, global: GlobalOptions & ProgressFlags & { readonly json: boolean }) =>
  backfill(
    {
      catalog: job.catalog,
      layer: job.layer,
      from: job.from,
      to: job.to,
      out: job.out,
      write: writeSettingsOf(job),
      versionConcurrency: job.versionConcurrency ?? 1,
      everyVersion: job.everyVersion ?? false
    },
    global,
    connectionOf(global, job)
  )

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
        backfill({ ...o, out: settings.out, write: writeSettingsOf(settings) }, o, connectionOf(o))
      ),
      unfinishedWhenInterrupted,
      Effect.provide(loggerLayer(o))
    )
).pipe(
  Command.withDescription(
    "Export every version in --from..--to of a versioned layer, skipping versions already exported and versions in which the layer did not change; safe to re-run after a kill."
  )
)
