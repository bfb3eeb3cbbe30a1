import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { type NightlyJob, previewLayer, runNightly } from "../../pipelines/nightly-export.ts"
import { ExitCode } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import { connectionsFor, writeSettingsOf } from "../export/Settings.ts"
import { clientLayer, connectionOf, type GlobalOptions, lookupFromOf, lookupUrlFor, retryPolicyOf } from "./common.ts"
import { decidingExitCode, exitCodeOf, JobFailed, sentenceOf } from "./Exit.ts"
import { checkOutputDir, type ProgressFlags } from "./exporting.ts"
import { progressLayer } from "./progress.ts"
import { render } from "./render.ts"
import {
  describePreview,
  nightlyRun,
  outcomeJson,
  type Previewed,
  previewed,
  reportDocument,
  writeRunReport
} from "./summary.ts"

/**
 * Runs a nightly job and reports every layer's outcome on stdout (text, with the run report's table
 * on a terminal, or one JSON object with `--json`), and as `_run.json` in the output directory. The
 * exit code is the deciding one of the failed layers (`decidingExitCode`: 5 when any failure is
 * transient), and the one sentence on stderr names that layer.
 */
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
        ? ` ${failed.length} of ${plural(outcomes.length, "layer")} failed; every layer's outcome is in the summary.`
        : ""
      return yield* new JobFailed({ exitCode, message: `${deciding.catalog} ${deciding.layer}: ${why}${others}` })
    }
    if (Option.isSome(raiseFailure)) return yield* Effect.fail(raiseFailure.value)
    return outcomes
  })
