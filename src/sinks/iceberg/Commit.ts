import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { SinkError } from "../SinkError.ts"
import { IcebergError } from "./Errors.ts"
import { keyIn, keyOfUri, metadataFileName, type TableLocation, uriOf, VERSION_HINT } from "./Location.ts"
import { formatMetadata, type MetadataLogEntry, parseMetadata, type TableMetadata } from "./TableMetadata.ts"

/**
 * Commits of a file-system table ("Commit Conflict Resolution and Retry", "File System Tables"):
 * the next metadata file `metadata/v<K+1>.metadata.json` is created only if absent (an exclusive
 * create: Destination.create), then `metadata/version-hint.text` says K+1. Of two writers only one
 * creates v<K+1>; the other reads the table again and proposes its change anew on top of the winner's
 * (bounded attempts, backoff with jitter), else fails naming the table. Everything a commit records
 * is written before its metadata file, so a process killed at any point leaves the table at its last
 * commit with every file it references present; the hint is only a hint: readers here look past it.
 */

/** The table as it is: the newest metadata file and its version K (0: no table yet). */
export interface Current {
  readonly version: number
  readonly metadata: TableMetadata | undefined
  /** `version-hint.text` names an older version (a writer stopped after its metadata file). */
  readonly hintLags: boolean
}

/** A change of the table proposed on top of `Current`. */
export interface Proposal {
  /** The next metadata; `metadata-log` and `last-updated-ms` are set by the commit. */
  readonly metadata: TableMetadata
  /** Keys of files written for this proposal only (a manifest list, rewritten manifests): removed if it loses. */
  readonly attemptFiles: ReadonlyArray<string>
}

export interface Committed {
  readonly version: number
  readonly metadata: TableMetadata
  /** The metadata file's URI: what engines register the table by. */
  readonly metadataFile: string
}

/** Where a commit may be stopped: its manifests and manifest list written; its metadata file created. */
export type CommitStep = "staged" | "versioned"

export interface CommitOptions {
  /** Attempts before giving up to other writers; default 8. */
  readonly attempts?: number
  /** The first backoff, doubled per attempt (with jitter); default 100 ms. */
  readonly backoff?: Duration.DurationInput
  /** Told each time the commit passes a step (the export's crash probe: telemetry/CrashProbe). */
  readonly reached?: (step: CommitStep) => void
}

const DEFAULT_ATTEMPTS = 8
/** Table property: how many previous metadata files `metadata-log` keeps (the reference implementation's name and default). */
const PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
const DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"

const metadataKey = (table: TableLocation, version: number) => keyIn(table, `metadata/${metadataFileName(version)}`)

const exists = (table: TableLocation, version: number) =>
  Effect.map(table.dest.stat(metadataKey(table, version)), Option.isSome)

/** The table's newest metadata file: from the version hint on, while a next one exists. */
export const readCurrent = Effect.fn("Iceberg.readCurrent")(
  function*(table: TableLocation) {
    const hintText = yield* table.dest.read(keyIn(table, VERSION_HINT))
    const hint = Option.match(hintText, { onNone: () => 0, onSome: (text) => Number.parseInt(text.trim(), 10) })
    let version = Number.isSafeInteger(hint) && hint > 0 ? hint : 0
    while (yield* exists(table, version + 1)) version++
    if (version === 0) return { version, metadata: undefined, hintLags: false } satisfies Current
    const file = metadataKey(table, version)
    const text = yield* table.dest.read(file)
    if (Option.isNone(text)) {
      return yield* new IcebergError({
        table: table.uri,
        reason: "Corrupt",
        message: `The version hint of ${table.uri} names ${
          metadataFileName(version)
        }, which does not exist. Restore the metadata files, or write the number of the newest v<N>.metadata.json into metadata/version-hint.text.`
      })
    }
    const metadata = yield* parseMetadata(table.uri, table.dest.at(file), text.value)
    return { version, metadata, hintLags: version !== hint } satisfies Current
  }
)

const withLog = (
  current: Current,
  table: TableLocation,
  next: TableMetadata,
  now: number
): { readonly metadata: TableMetadata; readonly dropped: ReadonlyArray<MetadataLogEntry> } => {
  if (current.metadata === undefined) return { metadata: { ...next, "last-updated-ms": now }, dropped: [] }
  const log: Array<MetadataLogEntry> = [
    ...(current.metadata["metadata-log"] ?? []),
    {
      "metadata-file": uriOf(table, metadataKey(table, current.version)),
      "timestamp-ms": current.metadata["last-updated-ms"]
    }
  ]
  const max = Number(next.properties?.[PREVIOUS_VERSIONS_MAX] ?? 100)
  const keep = Number.isSafeInteger(max) && max >= 0 ? max : 100
  const dropped = log.length > keep ? log.slice(0, log.length - keep) : []
  return { metadata: { ...next, "metadata-log": log.slice(dropped.length), "last-updated-ms": now }, dropped }
}

const lostRace = (table: TableLocation, attempts: number) =>
  new IcebergError({
    table: table.uri,
    reason: "Conflict",
    message:
      `Could not commit to the table ${table.uri}: other writers committed first ${attempts} times in a row. Nothing of this run is lost; run the same command again.`
  })

/**
 * Commits what `propose` makes of the table as it is, retrying on top of other writers' commits.
 * `propose` is called once per attempt with the table as read then; undefined: nothing to commit
 * (a lagging version hint is brought up to date). Returns the commit, or undefined.
 */
export const commit = <E, R>(
  table: TableLocation,
  propose: (current: Current) => Effect.Effect<Proposal | undefined, E, R>,
  options: CommitOptions = {}
): Effect.Effect<Committed | undefined, E | IcebergError | SinkError, R> =>
  Effect.gen(function*() {
    const reached = options.reached ?? (() => {})
    const attempts = options.attempts ?? DEFAULT_ATTEMPTS
    const backoff = Duration.toMillis(Duration.decode(options.backoff ?? "100 millis"))
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const current = yield* readCurrent(table)
      const proposal = yield* propose(current)
      if (proposal === undefined) {
        if (current.hintLags) yield* table.dest.write(keyIn(table, VERSION_HINT), String(current.version))
        return undefined
      }
      reached("staged")
      const version = current.version + 1
      const { dropped, metadata } = withLog(current, table, proposal.metadata, Date.now())
      const text = formatMetadata(metadata)
      const key = metadataKey(table, version)
      // A store that took the create but whose answer was lost, its retry then told the key exists: ours.
      const created = (yield* table.dest.create(key, text)) ||
        Option.getOrUndefined(yield* table.dest.read(key)) === text
      if (created) {
        reached("versioned")
        // Committed: the hint only helps readers find it, and the next commit writes it again.
        yield* Effect.catchAll(
          table.dest.write(keyIn(table, VERSION_HINT), String(version)),
          (error) =>
            Effect.logWarning(
              `Committed ${metadataFileName(version)} but could not update the version hint: ${error.message}`
            )
        )
        if (metadata.properties?.[DELETE_AFTER_COMMIT] === "true" && dropped.length > 0) {
          const keys = dropped.flatMap((e) => keyOfUri(table, e["metadata-file"]) ?? [])
          yield* Effect.ignore(table.dest.remove(keys))
        }
        return { version, metadata, metadataFile: uriOf(table, key) } satisfies Committed
      }
      yield* Effect.ignore(table.dest.remove(proposal.attemptFiles))
      yield* Effect.logInfo(
        `${table.uri}: another writer committed ${
          metadataFileName(version)
        } first; reading the table again (attempt ${attempt} of ${attempts})`
      )
      if (attempt < attempts) yield* Effect.sleep(Duration.millis(backoff * 2 ** (attempt - 1) * (0.5 + Math.random())))
    }
    return yield* lostRace(table, attempts)
  }).pipe(Effect.withSpan("Iceberg.commit", { attributes: { table: table.uri } }))
