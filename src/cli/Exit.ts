import * as ValidationError from "@effect/cli/ValidationError"
import { Schema } from "effect"

/** Bad flags or values that the parser itself cannot see (ranges, combinations). */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/**
 * Exit codes, as DESIGN.md promises them to cron wrappers:
 * 0 done; 2 bad input or usage; 3 authentication or permission; 4 catalog, layer or version not
 * found; 5 transient failures outlasted the retry budget (safe to run again); 6 integrity; 1 else.
 */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  auth: 3,
  notFound: 4,
  transient: 5,
  integrity: 6
} as const

const byTag: Record<string, number> = {
  UsageError: ExitCode.usage,
  InvalidHrn: ExitCode.usage,
  JobConfigError: ExitCode.usage,
  CredentialsError: ExitCode.auth,
  AuthError: ExitCode.auth,
  PermissionDenied: ExitCode.auth,
  NotFound: ExitCode.notFound,
  RetryBudgetExhausted: ExitCode.transient,
  IntegrityError: ExitCode.integrity
}

export const exitCodeOf = (error: unknown): number => {
  if (ValidationError.isValidationError(error)) return ExitCode.usage
  const tagged = error as { _tag?: unknown; exitCode?: unknown }
  if (typeof tagged?.exitCode === "number") return tagged.exitCode
  if (typeof tagged?._tag === "string" && tagged._tag in byTag) return byTag[tagged._tag]!
  return ExitCode.failure
}

/** One sentence for a human: what was wrong and what to do. */
export const sentenceOf = (error: unknown): string => {
  const message = (error as { message?: unknown })?.message
  return typeof message === "string" && message !== "" ? message : String(error)
}
