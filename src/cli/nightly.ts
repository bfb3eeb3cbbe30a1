import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { type LayerPreview, type NightlyJob, previewLayer, runNightly } from "../../pipelines/nightly-export.ts"
import { ExitCode } from "../domain/ExitCode.ts"
import { connectionsFor, writeSettingsOf } from "../export/Settings.ts"
import { clientLayer, connectionOf, type GlobalOptions, lookupFromOf, lookupUrlFor, retryPolicyOf } from "./common.ts"
import { decidingExitCode, exitCodeOf, JobFailed, sentenceOf } from "./Exit.ts"
import { checkOutputDir, type ProgressFlags } from "./exporting.ts"
import { progressLayer } from "./progress.ts"
import { render, type Renderer } from "./render.ts"
import { nightlyRun, outcomeJson, reportDocument, writeRunReport } from "./summary.ts"

/**
 * Runs a nightly job and reports every layer's outcome on stdout (text, with the run report's table
 * on a terminal, or one JSON object with `--json`), and as `_run.json` in the output directory. The
 * exit code is the deciding one of the failed layers (`decidingExitCode`: 5 when any failure is
 * transient), and the one sentence on stderr names that layer.
 */
type Previewed =
  & { readonly catalog: string; readonly layer: string }
  & (
    | LayerPreview
    | { readonly action: "fail"; readonly exitCode: ExitCode; readonly error: string }
  )

const describePreview = (p: Previewed) => {
  const name = `${p.catalog} ${p.layer}`
  switch (p.action) {
    case "export":
      return `Would export ${name} version ${p.version} (${
        p.mode === "changes" ? `the changes since version ${p.baseVersion}` : "full"
      }, ${p.parts} metadata part${p.parts === 1 ? "" : "s"})${p.note === undefined ? "" : `: ${p.note}`}.`
    case "up-to-date":
      return `${name}: up to date at version ${p.version}, nothing to export.`
    case "already-exported":
      return `${name}: version ${p.version} is already exported, nothing to export.`
    case "fail":
      return `${name} would fail (exit ${p.exitCode}): ${p.error}`
  }
}

/** A nightly job's dry run: what each layer would do; one JSON object with --json. */
const previewed: Renderer<ReadonlyArray<Previewed>> = {
  json: (layers) => ({ dryRun: true, layers }),
  text: (layers) => [...layers.map(describePreview), "Dry run: nothing was changed."]
}

/** What a nightly job would do with each layer, changing nothing; fails with the deciding exit code as a run would. */
const previewNightlyJob = (job: NightlyJob, global: GlobalOptions & { readonly json?: boolean }) =>
  Effect.gen(function*() {
    const connection = connectionOf(global, job)
    const settings = {
      out: job.out,
      mode: job.incremental === true ? "changes" as const : "full" as const,
      version: "latest" as const,
      parts: writeSettingsOf(job).parts,
      format: job.format
    }
    const layers = yield* Effect.forEach(job.layers, (target) => {
      const lookupUrl = lookupUrlFor(connection.lookupUrl, target.catalog)
      return previewLayer(target, settings).pipe(
        Effect.provide(clientLayer({
          lookupUrl,
          lookupFrom: lookupFromOf(connection, lookupUrl),
          credentials: connection.credentials,
          concurrency: 2,
          retry: retryPolicyOf(global),
          region: connection.region
        })),
        Effect.map((p): Previewed => ({ catalog: target.catalog, layer: target.layer, ...p })),
        Effect.catchAll((error) =>
          Effect.succeed<Previewed>({
            catalog: target.catalog,
            layer: target.layer,
            action: "fail",
            exitCode: exitCodeOf(error),
            error: sentenceOf(error)
          })
        )
      )
    })
    yield* render(previewed, layers, global.json === true)
    const failed = layers.filter((p) => p.action === "fail")
    if (failed.length > 0) {
      const exitCode = decidingExitCode(failed.map((p) => p.exitCode))
      const deciding = failed.find((p) => p.exitCode === exitCode)!
      return yield* new JobFailed({ exitCode, message: describePreview(deciding) })
    }
  })

export const runNightlyJob = (
  job: NightlyJob,
  global: GlobalOptions & ProgressFlags & {
    readonly json?: boolean
    readonly noFailover?: boolean
    readonly dryRun?: boolean
  },
  showHints: boolean
) =>
  Effect.gen(function*() {
    if (global.dryRun === true) return yield* previewNightlyJob(job, global)
    const startedAt = Date.now()
    yield* checkOutputDir(job.out)
    const connection = connectionOf(global, job)
    const { region } = connection
    const concurrency = connectionsFor(writeSettingsOf(job))
    const failover = global.noFailover === true ? false : job.failover
    const { outcomes, raised, raiseFailure, retries } = yield* runNightly({ ...job, region, failover }, {
      // Each layer's lookup service follows from its own catalog's HRN, unless one is configured.
      lookupUrlOf: (catalog) => lookupUrlFor(connection.lookupUrl, catalog),
      client: (lookupUrl) =>
        clientLayer({
          lookupUrl,
          lookupFrom: lookupFromOf(connection, lookupUrl),
          credentials: connection.credentials,
          concurrency,
          retry: retryPolicyOf(global),
          region: connection.region
        }),
      onNote: (catalog, layer, note) => Effect.logInfo(`${catalog} ${layer}: ${note}`)
    }).pipe(Effect.provide(progressLayer(global)))
    const failed = outcomes.filter((o) => Either.isLeft(o.result))
    const codes = failed.map((o) => Either.isLeft(o.result) ? exitCodeOf(o.result.left) : ExitCode.ok)
    const exitCode = decidingExitCode(Option.isSome(raiseFailure) ? [...codes, exitCodeOf(raiseFailure.value)] : codes)
    const report = reportDocument({
      job: "nightly-export",
      exitCode,
      retry: exitCode === ExitCode.transient,
      layers: outcomes.map(outcomeJson),
      minimumRaised: raised,
      ...(Option.isSome(raiseFailure) ? { raiseRefused: sentenceOf(raiseFailure.value) } : {}),
      retries
    }, startedAt)
    yield* writeRunReport(job.out, report, outcomes)
    yield* render(nightlyRun(showHints), { outcomes, raised, report }, global.json === true)
    if (failed.length > 0) {
      const deciding = failed.find((o) => Either.isLeft(o.result) && exitCodeOf(o.result.left) === exitCode)!
      const why = Either.isLeft(deciding.result) ? sentenceOf(deciding.result.left) : ""
      const others = failed.length > 1
        ? ` ${failed.length} of ${outcomes.length} layers failed; every layer's outcome is in the summary.`
        : ""
      return yield* new JobFailed({ exitCode, message: `${deciding.catalog} ${deciding.layer}: ${why}${others}` })
    }
    if (Option.isSome(raiseFailure)) return yield* Effect.fail(raiseFailure.value)
    return outcomes
  })
