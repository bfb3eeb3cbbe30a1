import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ExitCode, type HasExitCode } from "../domain/ExitCode.ts"

/** A job over several layers or versions that failed in part; `exitCode` is the one that decides. */
export class JobFailed extends Schema.TaggedError<JobFailed>()("JobFailed", {
  exitCode: Schema.Literal(...Object.values(ExitCode)),
  message: Schema.String
}) {}

/** What an exit code tells whoever runs the command next: the run report's last line. */
export const EXIT_MEANINGS: Record<ExitCode, string> = {
  [ExitCode.ok]: "done, or nothing to do",
  [ExitCode.failure]:
    "failed for another reason (the output volume, an interruption, a bug): a person should look; finished parts are kept",
  [ExitCode.usage]: "bad input or usage: fix the command or the job config; running it again as it is will not help",
  [ExitCode.auth]:
    "authentication or permission: fix the credentials or the grants; running it again as it is will not help",
  [ExitCode.notFound]: "not found: check the catalog, layer and version names",
  [ExitCode.transient]:
    "transient failures outlasted the retry budget: safe to run the same command again; what is finished is skipped",
  [ExitCode.integrity]: "integrity: do not use that output; a person should look",
  [ExitCode.unfinished]:
    "a sharded export's shards are not all finished: nothing was committed; run the missing shards, then commit again"
}

export const exitMeaning = (code: ExitCode) => EXIT_MEANINGS[code]

/** The exit code of a failure: its own, or 2 for the argument parser's. */
export const exitCodeOf = (error: HasExitCode | ValidationError.ValidationError): ExitCode =>
  ValidationError.isValidationError(error) ? ExitCode.usage : error.exitCode

/**
 * The exit code of an interrupted run (SIGINT, SIGTERM). `serve` is stopped that way normally (0);
 * commands that move data mark themselves, so a stopped export never looks like a finished one.
 */
export const interruption: { exitCode: ExitCode } = { exitCode: ExitCode.ok }

/** For export, backfill and run: an interruption exits 1 with a sentence saying the work is unfinished. */
export const unfinishedWhenInterrupted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.onInterrupt(effect, () =>
    Effect.sync(() => {
      interruption.exitCode = ExitCode.failure
      process.stderr.write(
        "catalog-export: interrupted before the work was finished (nothing unfinished has a manifest); run the same command again to resume.\n"
      )
    }))

/**
 * Which exit code a run over several layers reports when more than one failed: transient first (5:
 * running the same command again redoes only what failed, and what is still wrong is reported
 * again), then integrity (6: do not use the output), authentication (3), not found (4), bad input
 * (2), anything else (1). Every layer's outcome is in the summary.
 */
const PRECEDENCE: ReadonlyArray<ExitCode> = [
  ExitCode.transient,
  ExitCode.integrity,
  ExitCode.unfinished,
  ExitCode.auth,
  ExitCode.notFound,
  ExitCode.usage,
  ExitCode.failure
]

export const decidingExitCode = (codes: ReadonlyArray<ExitCode>): ExitCode =>
  codes.filter((c) => c !== ExitCode.ok).sort((a, b) => rank(a) - rank(b))[0] ?? ExitCode.ok

const rank = (code: ExitCode) => {
  const i = PRECEDENCE.indexOf(code)
  return i === -1 ? PRECEDENCE.length : i
}

/** One sentence for a human: what was wrong and what to do. */
export const sentenceOf = (error: unknown): string => {
  const message = (error as { message?: unknown })?.message
  return typeof message === "string" && message !== "" ? message : String(error)
}
