import * as Schema from "effect/Schema"

/**
 * Exit codes, as DESIGN.md promises them to cron wrappers: 0 done; 2 bad input or usage; 3
 * authentication or permission; 4 catalog, layer or version not found; 5 transient failures
 * outlasted the retry budget (safe to run again); 6 integrity; 7 a sharded export's commit found
 * shards unfinished; 1 else.
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
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/**
 * A failure that says how a run it ends exits. Every error class declares its exit code where it
 * is defined, so that an error without one cannot reach a command (src/cli/commands.ts).
 */
export interface HasExitCode {
  readonly exitCode: ExitCode
}

/** Bad input that the argument parser cannot see: ranges, combinations, a location that is not what it should be. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {
  get exitCode() {
    return ExitCode.usage
  }
}
