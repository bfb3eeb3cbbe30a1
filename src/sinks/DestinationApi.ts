import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { SinkError } from "./SinkError.ts"

/**
 * Where exports are written (`--out`): a local directory or an object store (`s3://`, `gs://`, `az://`,
 * `abfss://`: ObjectStore.ts).
 * Everything the export keeps besides its data files (plans, checkpoints, shard manifests, the
 * manifest, the cursor) is read and written through this, by `/`-separated keys below the root, so
 * that every job works the same on every destination. Data files are written by the encoder
 * (Files.ts) and made visible by `publish`: a rename of the local `.partial` file, the completion of
 * the multipart upload or the commit of the staged blocks on a store (which has no rename).
 */

export interface Entry {
  readonly name: string
  /** A directory (a common prefix on a store). */
  readonly dir: boolean
  readonly size: number
  /** Stores: the object's ETag, the store's checksum of its content. */
  readonly etag?: string | undefined
}

export interface Destination {
  /** The destination as the user gave it. */
  readonly name: string
  readonly remote: boolean
  /** Where a key is, as files and messages name it: a local path or a store URL (in the form the user gave). */
  readonly at: (key: string) => string
  /**
   * The absolute URI of a key, as table formats record files: `file:///abs/path`, `s3://bucket/key`,
   * `gs://bucket/key`, `abfss://container@account.dfs.core.windows.net/key` (also for `az://`).
   */
  readonly uri: (key: string) => string
  /** A file's text; none when it does not exist. */
  readonly read: (key: string) => Effect.Effect<Option.Option<string>, SinkError>
  /** A file's bytes; none when it does not exist. */
  readonly readBytes: (key: string) => Effect.Effect<Option.Option<Uint8Array>, SinkError>
  /** Bytes `start` to `end` (exclusive) of a file, for readers that seek (a Parquet footer, a column). */
  readonly readRange: (key: string, start: number, end: number) => Effect.Effect<Uint8Array, SinkError>
  /** Replaces a file whole: a reader sees the old content or the new one, never a part (also with two writers at once). */
  readonly write: (key: string, content: string | Uint8Array) => Effect.Effect<void, SinkError>
  /**
   * Creates a file whole only if it does not exist yet, atomically: of two writers creating one key at
   * once exactly one succeeds (true); the other finds it there (false) and the file is left as the
   * first wrote it. A local link() of a complete temporary file; a conditional PUT on a store.
   */
  readonly create: (key: string, content: string | Uint8Array) => Effect.Effect<boolean, SinkError>
  readonly stat: (key: string) => Effect.Effect<Option.Option<Entry>, SinkError>
  /** What is directly below `dir` (nothing when it does not exist). */
  readonly list: (dir: string) => Effect.Effect<ReadonlyArray<Entry>, SinkError>
  /** Removes files; missing ones are no error. */
  readonly remove: (keys: ReadonlyArray<string>) => Effect.Effect<void, SinkError>
  /** Removes `dir` and everything below it. */
  readonly removeAll: (dir: string) => Effect.Effect<void, SinkError>
  /**
   * Multipart uploads below `dir` that were never completed (runs killed or abandoned): aborted. Azure
   * has nothing to abort: blocks never committed cannot be removed and are discarded by Azure (0).
   */
  readonly abortUploads: (dir: string) => Effect.Effect<number, SinkError>
  /** Removes the empty directories from `dir` up to (not including) the root; a store has none. */
  readonly pruneEmpty: (dir: string) => Effect.Effect<void>
}
