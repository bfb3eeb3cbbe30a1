import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as fs from "node:fs"
import * as path from "node:path"
import { Console, Effect, Either, Option } from "effect"
import { Http } from "../client/Http.ts"
import { runExport } from "../export/Lazy.ts"
import { planExport } from "../export/Incremental.ts"
import { Compression, defaults, OutputFormat } from "../export/JobConfig.ts"
import { Counters, reporting } from "../export/Progress.ts"
import { type NightlyJob, raiseToExported, runNightly } from "../../pipelines/nightly-export.ts"
import {
  choiceOption,
  clientLayer,
  type GlobalOptions,
  globalOptions,
  integerOption,
  loggerLayer,
  progressStyle,
  resolveLookupUrl,
  retryOptions,
  retryPolicyOf
} from "./common.ts"
import { unfinishedWhenInterrupted, UsageError } from "./Exit.ts"
import { describeResult, duckdbHint } from "./summary.ts"

export const positive = (name: string) => (value: number) =>
  value >= 1 ? Effect.succeed(value) : Effect.fail(new UsageError({ message: `--${name} must be a positive integer, got ${value}.` }))

/**
 * Refuses an output path that is a file or cannot be written, before any data is fetched. Creates
 * nothing: a run refused later (unknown catalog, bad credentials) leaves no trace; the export
 * creates the directories it writes to.
 */
export const checkOutputDir = (out: string) =>
  Effect.try({
    try: () => {
      let existing = path.resolve(out)
      while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing)
      if (!fs.statSync(existing).isDirectory()) {
        throw Object.assign(new Error(`${existing} is a file`), { code: existing === path.resolve(out) ? "EEXIST" : "ENOTDIR", file: existing })
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

const versionArg = (raw: string) =>
  raw === "latest"
    ? Effect.succeed("latest" as const)
    : /^\d+$/.test(raw)
    ? Effect.succeed(Number(raw))
    : Effect.fail(new UsageError({ message: `--version must be a non-negative integer or 'latest', got '${raw}'.` }))

/** The knobs of writing an export, shared by export and backfill. */
export const writeOptions = {
  out: Options.text("out").pipe(Options.withDescription("Output directory; files go to OUT/<catalog-id>/<layer-id>/version=<V>/.")),
  format: choiceOption("format", OutputFormat.literals).pipe(Options.withDefault(defaults.format), Options.withDescription("parquet, arrow or both.")),
  compression: choiceOption("compression", Compression.literals).pipe(Options.withDefault(defaults.compression), Options.withDescription("Parquet page compression.")),
  concurrency: integerOption("concurrency").pipe(Options.withDefault(defaults.concurrency), Options.withDescription("Blob downloads in flight at once.")),
  listConcurrency: integerOption("list-concurrency").pipe(Options.withDefault(defaults.listConcurrency), Options.withDescription("Metadata parts listed and written at once.")),
  parts: integerOption("parts").pipe(Options.withDefault(defaults.parts), Options.withDescription("Metadata parts to ask for (the unit of parallel listing and of resume).")),
  maxFileBytes: integerOption("max-file-bytes").pipe(Options.optional, Options.withDescription("Start a new file once one reaches this size (default 256 MiB).")),
  ...retryOptions
}

export interface WriteSettings {
  readonly out: string
  readonly format: typeof OutputFormat.Type
  readonly compression: typeof Compression.Type
  readonly concurrency: number
  readonly listConcurrency: number
  readonly parts: number
  readonly maxFileBytes: Option.Option<number>
}

export const checkWriteSettings = (o: WriteSettings) =>
  Effect.gen(function*() {
    const concurrency = yield* positive("concurrency")(o.concurrency)
    const listConcurrency = yield* positive("list-concurrency")(o.listConcurrency)
    const parts = yield* positive("parts")(o.parts)
    const maxFileBytes = Option.isSome(o.maxFileBytes) ? yield* positive("max-file-bytes")(o.maxFileBytes.value) : undefined
    return { out: o.out, format: o.format, compression: o.compression, concurrency, listConcurrency, parts, maxFileBytes }
  })

export const exportCommand = Command.make(
  "export",
  {
    ...globalOptions,
    ...writeOptions,
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN, e.g. hrn:here:data::olp-here:rib-2.")),
    layer: Options.text("layer").pipe(Options.withDescription("Layer id (a versioned or volatile layer).")),
    version: Options.text("version").pipe(Options.withDefault("latest"), Options.withDescription("Catalog version to export, or 'latest'.")),
    mode: choiceOption("mode", ["full", "changes"]).pipe(Options.withDefault("full" as const), Options.withDescription("changes: only what changed since the layer's cursor (_state.json) in --out; a full export when there is none.")),
    raiseMinimum: Options.boolean("raise-minimum").pipe(Options.withDescription("After the export is committed, raise the catalog's minimum version to it, if every versioned layer's data below is exported to --out.")),
    force: Options.boolean("force").pipe(Options.withDescription("Export again even if a manifest says it is done.")),
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("Print the plan (pinned version and parts) as JSON and stop."))
  },
  (o) =>
    Effect.gen(function*() {
      const version = yield* versionArg(o.version)
      const settings = yield* checkWriteSettings(o)
      const client = clientLayer({
        lookupUrl: resolveLookupUrl(o.lookupUrl, undefined, o.catalog),
        credentials: Option.getOrUndefined(o.credentials),
        concurrency: settings.concurrency,
        retry: retryPolicyOf(o)
      })
      return yield* Effect.gen(function*() {
        if (!o.dryRun) yield* checkOutputDir(o.out)
        const planned = yield* planExport({ catalog: o.catalog, layer: o.layer, version, mode: o.mode, out: o.out, parts: settings.parts })
        if (o.dryRun) return yield* Console.log(JSON.stringify(planned, null, 2))
        const http = yield* Http
        const started = Date.now()
        if (planned._tag === "UpToDate") {
          yield* Console.log(describeResult(planned, 0, 0))
          // Committed by an earlier run whose raise may have been refused; the guard decides again.
          if (o.raiseMinimum) yield* reportRaised(yield* raiseToExported([{ catalog: o.catalog, layer: o.layer, result: Either.right(planned), note: undefined, elapsedMs: 0 }], o.out))
          return
        }
        if (planned.note !== undefined) yield* Console.error(`${planned.plan.catalogHrn} ${planned.plan.layerId}: ${planned.note}`)
        const counters = new Counters()
        const result = yield* reporting(
          progressStyle(o),
          `${planned.plan.catalogHrn} ${planned.plan.layerId}`,
          counters,
          http.retryCount,
          runExport(planned.plan, { ...settings, force: o.force }, counters)
        )
        yield* Console.log(describeResult(result, Date.now() - started, yield* http.retryCount))
        if (o.raiseMinimum) yield* reportRaised(yield* raiseToExported([{ catalog: o.catalog, layer: o.layer, result: Either.right(result), note: undefined, elapsedMs: 0 }], o.out))
      }).pipe(Effect.provide(client))
    }).pipe(unfinishedWhenInterrupted, Effect.provide(loggerLayer(o)))
).pipe(Command.withDescription("Export one layer version (or a volatile layer's current data) to Parquet and/or Arrow files."))

const reportRaised = (raised: ReadonlyArray<{ catalogHrn: string; from: number; to: number }>) =>
  Effect.forEach(raised, (r) => Console.log(`Raised the minimum version of ${r.catalogHrn} from ${r.from} to ${r.to}: versions ${r.from}..${r.to - 1} are deleted.`), { discard: true })

/** Runs a nightly job; exits with the first failure's code after trying every layer. */
export const runNightlyJob = (job: NightlyJob, global: GlobalOptions, showHints: boolean) =>
  Effect.gen(function*() {
    const concurrency = job.concurrency ?? defaults.concurrency
    const lookupUrl = resolveLookupUrl(global.lookupUrl, job.lookupUrl, job.layers[0].catalog)
    const credentials = Option.getOrElse(global.credentials, () => job.credentials)
    yield* checkOutputDir(job.out)
    return yield* Effect.gen(function*() {
      const http = yield* Http
      const { outcomes, raised } = yield* runNightly(job, progressStyle(global))
      const retries = yield* http.retryCount
      const failed = outcomes.find((o) => Either.isLeft(o.result))
      for (const outcome of outcomes) {
        if (Either.isRight(outcome.result)) {
          if (outcome.note !== undefined) yield* Console.log(`${outcome.catalog} ${outcome.layer}: ${outcome.note}`)
          yield* Console.log(describeResult(outcome.result.right, outcome.elapsedMs, retries))
          const hint = showHints ? duckdbHint(outcome.result.right) : undefined
          if (hint !== undefined) yield* Console.log(`  query it: ${hint}`)
        } else if (outcome !== failed) {
          // The first failure ends the run and is printed as its sentence; the others are listed here.
          yield* Console.error(`Failed ${outcome.catalog} ${outcome.layer}: ${(outcome.result.left as Error).message ?? String(outcome.result.left)}`)
        }
      }
      yield* reportRaised(raised)
      if (failed !== undefined && Either.isLeft(failed.result)) return yield* Effect.fail(failed.result.left)
      return outcomes
    }).pipe(Effect.provide(clientLayer({ lookupUrl, credentials, concurrency, retry: retryPolicyOf(global) })))
  })
