import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"
import { describeSinkFailure, SINK_FAILURE_REASONS } from "./SinkFailure.ts"

export const SinkErrorReason = Schema.Literal(...SINK_FAILURE_REASONS)
export type SinkErrorReason = typeof SinkErrorReason.Type

/** A file of the export could not be written. `message` names the file and what to do. */
export class SinkError extends Schema.TaggedError<SinkError>()("SinkError", {
  path: Schema.String,
  reason: SinkErrorReason,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  get exitCode() {
    return EXIT_CODES[this.reason]
  }
}

/** Failures of the output: those of an object store say whether to fix the input, the credentials, or retry. */
const EXIT_CODES: Record<SinkErrorReason, ExitCode> = {
  DiskFull: ExitCode.failure,
  PermissionDenied: ExitCode.failure,
  ReadOnlyFileSystem: ExitCode.failure,
  NotFound: ExitCode.failure,
  TooManyOpenFiles: ExitCode.failure,
  InvalidOptions: ExitCode.usage,
  InvalidRow: ExitCode.failure,
  Encode: ExitCode.failure,
  Io: ExitCode.failure,
  Installation: ExitCode.failure,
  NoSuchBucket: ExitCode.usage,
  AccessDenied: ExitCode.auth,
  Unavailable: ExitCode.transient
}

/** Maps a failure while writing `path` (`doing`: "write", "create", "rename", ...) to a SinkError. */
export const fromCause = (path: string, doing: string, cause: unknown): SinkError => {
  if (cause instanceof SinkError) return cause
  return new SinkError({ ...describeSinkFailure(path, doing, cause), cause })
}
