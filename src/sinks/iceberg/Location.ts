import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomBytes } from "node:crypto"
import type { Destination } from "../Destination.ts"
import type { SinkError } from "../SinkError.ts"
import { IcebergError } from "./Errors.ts"

/**
 * Where a table is: a directory (key) of a Destination, and its absolute URI (the table's
 * `location`, and the prefix of every file path the table records: `file:///…` or `s3://bucket/…`).
 * The file-system catalog layout: `metadata/` (metadata files, the version hint, manifest lists and
 * manifests) and `data/` (data and position delete files).
 */
export interface TableLocation {
  readonly dest: Destination
  /** The table's directory below the destination's root ("" for the root itself). */
  readonly key: string
  /** The table's `location`. */
  readonly uri: string
}

const join = (dir: string, name: string) => (dir === "" ? name : `${dir}/${name}`)

export const tableAt = (dest: Destination, key: string): TableLocation => {
  const clean = key.split("/").filter((s) => s !== "").join("/")
  return { dest, key: clean, uri: dest.uri(clean) }
}

/** The key of a file below the table's directory (`metadata/v3.metadata.json`, `data/…`). */
export const keyIn = (table: TableLocation, relative: string): string => join(table.key, relative)

export const uriOf = (table: TableLocation, key: string): string => table.dest.uri(key)

/** The key of a file the table records by URI; undefined when it is not below the table's location. */
export const keyOfUri = (table: TableLocation, uri: string): string | undefined =>
  uri.startsWith(`${table.uri}/`) ? join(table.key, uri.slice(table.uri.length + 1)) : undefined

export const metadataFileName = (version: number) => `v${version}.metadata.json`
export const VERSION_HINT = "metadata/version-hint.text"

/**
 * A new, unique id for the name of a file the table will record (uuid-named, as Iceberg writers name
 * theirs): a UUIDv7, whose first 48 bits are the time it was made, so that the name says when the file
 * was written (`writtenAt`) on every destination, whether or not it keeps modification times.
 */
export const fileId = (now = Date.now()): string => {
  const bytes = randomBytes(16)
  bytes.writeUIntBE(now, 0, 6)
  bytes[6] = (bytes[6]! & 0x0f) | 0x70
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const hex = bytes.toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

const UUID_V7 = /([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/

/** When a file named with `fileId` was written (ms): the time of the first UUIDv7 in its path; undefined for other names. */
export const writtenAt = (path: string): number | undefined => {
  const m = UUID_V7.exec(path)
  return m === null ? undefined : Number.parseInt(`${m[1]}${m[2]}`, 16)
}

/** A new, unique name for a file the table will record. */
export const newFileName = (prefix: string, extension: string) => `${prefix}-${fileId()}.${extension}`

const corrupt = (table: TableLocation, uri: string, why: string, cause?: unknown) =>
  new IcebergError({
    table: table.uri,
    reason: "Corrupt",
    message:
      `The table ${table.uri} references ${uri}, which ${why}. The table cannot be read as it is: restore the file, or expire the snapshots that use it.`,
    ...(cause === undefined ? {} : { cause })
  })

/** The key of a file the table records, which must be below its location. */
export const keyOrFail = (table: TableLocation, uri: string): Effect.Effect<string, IcebergError> => {
  const key = keyOfUri(table, uri)
  return key === undefined ? Effect.fail(corrupt(table, uri, "lies outside the table's location")) : Effect.succeed(key)
}

/** The bytes of a file the table records by URI; a missing one is a corrupt table. */
export const readRecorded = (table: TableLocation, uri: string): Effect.Effect<Uint8Array, IcebergError | SinkError> =>
  Effect.gen(function*() {
    const key = yield* keyOrFail(table, uri)
    const bytes = yield* table.dest.readBytes(key)
    if (Option.isNone(bytes)) return yield* corrupt(table, uri, "does not exist")
    return bytes.value
  })

/** Decodes a file the table records; a file that does not decode is a corrupt table. */
export const decodeRecorded = <A>(
  table: TableLocation,
  uri: string,
  decode: (bytes: Uint8Array) => Promise<A>
): Effect.Effect<A, IcebergError | SinkError> =>
  Effect.flatMap(readRecorded(table, uri), (bytes) =>
    Effect.tryPromise({
      try: () => decode(bytes),
      catch: (cause) => corrupt(table, uri, `is not a valid Iceberg file (${String(cause)})`, cause)
    }))
