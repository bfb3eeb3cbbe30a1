import { Schema } from "effect"

export const SinkErrorReason = Schema.Literal(
  "DiskFull",
  "PermissionDenied",
  "ReadOnlyFileSystem",
  "NotFound",
  "TooManyOpenFiles",
  "InvalidOptions",
  "InvalidRow",
  "Encode",
  "Io"
)
export type SinkErrorReason = typeof SinkErrorReason.Type

/** A file of the export could not be written. `message` names the file and what to do. */
export class SinkError extends Schema.TaggedError<SinkError>()("SinkError", {
  path: Schema.String,
  reason: SinkErrorReason,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

const errnoCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

const causeText = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/** Maps a failure while writing `path` (`doing`: "write", "create", "rename", ...) to a SinkError. */
export const fromCause = (path: string, doing: string, cause: unknown): SinkError => {
  if (cause instanceof SinkError) return cause
  const code = errnoCode(cause)
  const make = (reason: SinkErrorReason, message: string) => new SinkError({ path, reason, message, cause })
  switch (code) {
    case "ENOSPC":
    case "EDQUOT":
      return make(
        "DiskFull",
        `Cannot ${doing} ${path}: no space left on the device (${code}). ` +
          "Free space or raise the quota on the output volume, or choose another output directory, then run the export again."
      )
    case "EACCES":
    case "EPERM":
      return make(
        "PermissionDenied",
        `Cannot ${doing} ${path}: permission denied (${code}). ` +
          "Make the output directory writable for the user running the export, or choose another output directory."
      )
    case "EROFS":
      return make(
        "ReadOnlyFileSystem",
        `Cannot ${doing} ${path}: the file system is mounted read-only (EROFS). Choose an output directory on a writable volume.`
      )
    case "ENOENT":
    case "ENOTDIR":
      return make(
        "NotFound",
        `Cannot ${doing} ${path}: a directory on the path does not exist or is not a directory (${code}). ` +
          "Check the output directory (it may have been removed during the run) and run the export again."
      )
    case "EMFILE":
    case "ENFILE":
      return make(
        "TooManyOpenFiles",
        `Cannot ${doing} ${path}: too many open files (${code}). Raise the open-file limit (ulimit -n) or lower the export's concurrency.`
      )
    case undefined:
      return cause instanceof RangeError
        ? make("InvalidRow", `Cannot ${doing} ${path}: a row does not fit the file's columns: ${causeText(cause)}`)
        : make("Encode", `Cannot ${doing} ${path}: ${causeText(cause)}`)
    default:
      return make(
        "Io",
        `Cannot ${doing} ${path}: ${causeText(cause)}. Check the output volume (dmesg, df) and run the export again.`
      )
  }
}
