import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** Bad flags or values that the parser itself cannot see (ranges, combinations). */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** A job over several layers or versions that failed in part; `exitCode` is the one that decides. */
export class JobFailed
  extends Schema.TaggedError<JobFailed>()("JobFailed", { exitCode: Schema.Number, message: Schema.String })
{}

/**
 * Exit codes, as DESIGN.md promises them to cron wrappers:
 * 0 done; 2 bad input or usage; 3 authentication or permission; 4 catalog, layer or version not
 * found; 5 transient failures outlasted the retry budget (safe to run again); 6 integrity; 7 a
 * sharded export's commit found shards unfinished; 1 else.
 */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  auth: 3,
  notFound: 4,
  transient: 5,
  integrity: 6,
  /** `commit` of a sharded export before every shard has finished (or with a damaged shard): run the shards, then commit again. */
  unfinished: 7
} as const

/** What an exit code tells whoever runs the command next: the run report's last line. */
export const EXIT_MEANINGS: Record<number, string> = {
  [ExitCode.ok]: "done, or nothing to do",
  [ExitCode.failure]:
    "failed for another reason (the output volume, an interruption, a bug): a person should look; finished parts are kept",
  [ExitCode.usage]: "bad input or usage: fix the command or the job config; running it again as it is will not help",
  [ExitCode.auth]:
    "authentication or permission: fix the credentials or the grants; running it again as it is will not help",
  [ExitCode.notFound]: "not found: check the catalog, layer and version names",
  [ExitCode.transient]:
    "transient failures outlasted the retry budget: safe to run the same command again; what is finished is skipped",
  [ExitCode.integrity]: "integrity: do not use that output; a person should look"
}

export const exitMeaning = (code: number) => EXIT_MEANINGS[code] ?? EXIT_MEANINGS[ExitCode.failure]!

const byTag: Record<string, number> = {
  UsageError: ExitCode.usage,
  InvalidHrn: ExitCode.usage,
  JobConfigError: ExitCode.usage,
  LayerNotExportable: ExitCode.usage,
  LayerNotVersioned: ExitCode.usage,
  InvalidLayerId: ExitCode.usage,
  RetentionRefused: ExitCode.usage,
  CatalogExists: ExitCode.usage,
  SubscriptionConflict: ExitCode.usage,
  CredentialsError: ExitCode.auth,
  AuthError: ExitCode.auth,
  NotFound: ExitCode.notFound,
  CatalogNotFound: ExitCode.notFound,
  ApiNotFound: ExitCode.notFound,
  SubscriptionNotFound: ExitCode.notFound,
  SchemaNotFound: ExitCode.notFound,
  RetryBudgetExhausted: ExitCode.transient,
  RegionUnavailable: ExitCode.transient,
  DecodeSetupError: ExitCode.usage,
  IntegrityError: ExitCode.integrity,
  DecodeError: ExitCode.integrity,
  OutputConflict: ExitCode.integrity,
  ShardsUnfinished: ExitCode.unfinished
}

/** Failures of the output: those of an object store say whether to fix the input, the credentials, or retry. */
const bySinkReason: Record<string, number> = {
  NoSuchBucket: ExitCode.usage,
  InvalidOptions: ExitCode.usage,
  AccessDenied: ExitCode.auth,
  Unavailable: ExitCode.transient
}

/** An Iceberg table that cannot be committed (other writers kept winning), is something else, or is damaged. */
const byIcebergReason: Record<string, number> = {
  Conflict: ExitCode.transient,
  Mismatch: ExitCode.usage,
  SchemaChange: ExitCode.usage,
  Corrupt: ExitCode.integrity
}

/** An HTTP status the service answered with and the caller did not expect. */
const byStatus = (status: number): number =>
  status === 401 || status === 403
    ? ExitCode.auth
    : status === 404
    ? ExitCode.notFound
    : status === 400 || status === 416
    ? ExitCode.usage
    : status === 408 || status === 429 || status >= 500
    ? ExitCode.transient
    : ExitCode.failure

/**
 * The exit code of an interrupted run (SIGINT, SIGTERM). `serve` is stopped that way normally (0);
 * commands that move data mark themselves, so a stopped export never looks like a finished one.
 */
export const interruption = { exitCode: ExitCode.ok as number }

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
const PRECEDENCE: ReadonlyArray<number> = [
  ExitCode.transient,
  ExitCode.integrity,
  ExitCode.unfinished,
  ExitCode.auth,
  ExitCode.notFound,
  ExitCode.usage,
  ExitCode.failure
]

export const decidingExitCode = (codes: ReadonlyArray<number>): number =>
  codes.filter((c) => c !== ExitCode.ok).sort((a, b) => rank(a) - rank(b))[0] ?? ExitCode.ok

const rank = (code: number) => {
  const i = PRECEDENCE.indexOf(code)
  return i === -1 ? PRECEDENCE.length : i
}

export const exitCodeOf = (error: unknown): number => {
  if (ValidationError.isValidationError(error)) return ExitCode.usage
  if (error instanceof JobFailed) return error.exitCode
  const tagged = error as { _tag?: unknown; status?: unknown }
  if (tagged?._tag === "ApiError" && typeof tagged.status === "number") return byStatus(tagged.status)
  const reason = (error as { reason?: unknown })?.reason
  if (tagged?._tag === "SinkError" && typeof reason === "string" && reason in bySinkReason) return bySinkReason[reason]!
  if (tagged?._tag === "IcebergError" && typeof reason === "string" && reason in byIcebergReason) {
    return byIcebergReason[reason]!
  }
  if (typeof tagged?._tag === "string" && tagged._tag in byTag) return byTag[tagged._tag]!
  return ExitCode.failure
}

/** One sentence for a human: what was wrong and what to do. */
export const sentenceOf = (error: unknown): string => {
  const message = (error as { message?: unknown })?.message
  return typeof message === "string" && message !== "" ? message : String(error)
}
