/**
 * Why a file of the export could not be written, in plain terms: the encoder thread (which loads no
 * Effect) describes failures with this, and SinkError carries the same fields into the Effect world.
 */

export const SINK_FAILURE_REASONS = [
  "DiskFull",
  "PermissionDenied",
  "ReadOnlyFileSystem",
  "NotFound",
  "TooManyOpenFiles",
  "InvalidOptions",
  "InvalidRow",
  "Encode",
  "Io",
  /** A module the writers need (zstd-napi, the native one) did not load: the installation is incomplete. */
  "Installation",
  /** Object stores: the bucket does not exist (bad input). */
  "NoSuchBucket",
  /** Object stores: credentials refused or a permission missing. */
  "AccessDenied",
  /** Object stores: still failing after the client's retries; safe to run again. */
  "Unavailable"
] as const
export type SinkFailureReason = (typeof SINK_FAILURE_REASONS)[number]

export interface SinkFailureFields {
  readonly path: string
  readonly reason: SinkFailureReason
  /** Names the file and says what to do. */
  readonly message: string
}

/** A sink failure thrown by the synchronous writers (Files, FormatWriter). */
export class SinkFailure extends Error implements SinkFailureFields {
  constructor(
    readonly path: string,
    readonly reason: SinkFailureReason,
    message: string
  ) {
    super(message)
  }
}

/**
 * Thrown by a writer for a row whose content it cannot write (a decoding writer's blob that does not
 * decode, with `--on-decode-error fail`): the row's fault, not the file's, so Files passes it on as it
 * is, not as a SinkFailure, and the encoder reports it as its writer defines.
 */
export class RejectedRow extends Error {}

const errnoCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

const causeText = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const isFields = (cause: unknown): cause is SinkFailureFields =>
  typeof cause === "object" && cause !== null && "path" in cause && "reason" in cause &&
  (SINK_FAILURE_REASONS as ReadonlyArray<unknown>).includes((cause as { reason: unknown }).reason)

/** Describes a failure while writing `path` (`doing`: "write", "create", "rename", ...); a described failure stays as it is. */
export const describeSinkFailure = (path: string, doing: string, cause: unknown): SinkFailureFields => {
  if (isFields(cause)) return { path: cause.path, reason: cause.reason, message: cause.message }
  const code = errnoCode(cause)
  const make = (reason: SinkFailureReason, message: string) => ({ path, reason, message })
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
    case "MODULE_NOT_FOUND":
    case "ERR_MODULE_NOT_FOUND":
    case "ERR_DLOPEN_FAILED":
      // Not the volume's fault: e.g. installed with --ignore-scripts, or the native zstd-napi failed to build.
      return make(
        "Installation",
        `Cannot ${doing} ${path}: a module catalog-export needs did not load (${code}: ${
          causeText(cause).split("\n")[0]
        }). The installation is incomplete or was made for another platform: install catalog-export again, ` +
          "with its install scripts, using the Node.js that runs it."
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
