import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Option, Schema } from "effect"
import { fromCause, type SinkError } from "../sinks/SinkError.ts"
import { OutputConflict } from "./Errors.ts"

export const MANIFEST = "_manifest.json"
export const STATE = "_state.json"

export const WrittenFile = Schema.Struct({
  path: Schema.String,
  format: Schema.Literal("parquet", "arrow"),
  rows: Schema.Number,
  bytes: Schema.Number,
  sha256: Schema.String
})
export type WrittenFile = typeof WrittenFile.Type

/** How an export decoded its blobs (`--decode`): the same for every part of it. */
export const DecodeIdentity = Schema.Struct({
  kind: Schema.Literal("protobuf", "geojson", "json"),
  explode: Schema.optional(Schema.String),
  onError: Schema.Literal("fail", "skip", "raw"),
  /** the schema (HRN) whose bundle decoded protobuf, from the artifact API */
  schema: Schema.optional(Schema.String),
  /** the bundle file given with --schema-bundle instead */
  schemaBundle: Schema.optional(Schema.String),
  bundleSha256: Schema.optional(Schema.String)
})
export type DecodeIdentity = typeof DecodeIdentity.Type

/** How an export (or one part of it) decoded, and what came of it; absent from raw exports. */
export const DecodeSummary = Schema.Struct({
  ...DecodeIdentity.fields,
  /** partitions decoded (a deleted partition is a row of null decoded columns, not counted) */
  decoded: Schema.Number,
  /** partitions that did not decode: left out (`skip`) or written raw (`raw`) */
  failed: Schema.Number,
  /** rows written: one per partition, feature or exploded element */
  rows: Schema.Number,
  /** the first 100 that did not decode, and why */
  failures: Schema.Array(Schema.Struct({ partition: Schema.String, dataHandle: Schema.String, reason: Schema.String }))
})
export type DecodeSummary = typeof DecodeSummary.Type

/** Written last: a directory with a manifest is a finished export, one without is not. */
export const Manifest = Schema.Struct({
  formatVersion: Schema.Literal(1),
  catalogHrn: Schema.String,
  layerId: Schema.String,
  layerType: Schema.String,
  version: Schema.Number,
  snapshot: Schema.optional(Schema.String),
  contentType: Schema.String,
  contentEncoding: Schema.optional(Schema.String),
  mode: Schema.Literal("full", "changes"),
  baseVersion: Schema.optional(Schema.Number),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number,
  files: Schema.Array(WrittenFile),
  decode: Schema.optional(DecodeSummary),
  startedAt: Schema.String,
  finishedAt: Schema.String,
  tool: Schema.Struct({ name: Schema.String, version: Schema.String })
})
export type Manifest = typeof Manifest.Type

/** The cursor of incremental runs: the last version of the layer committed to this output. */
export const State = Schema.Struct({
  catalogHrn: Schema.String,
  layerId: Schema.String,
  lastVersion: Schema.Number,
  updatedAt: Schema.String
})
export type State = typeof State.Type

/**
 * Writes JSON under a temporary name, fsyncs and renames: readers see the old file or the new one,
 * never half. Fails with a SinkError naming the file (a full disk is an error, not a crash).
 */
export const writeJsonAtomic = (file: string, value: unknown): Effect.Effect<void, SinkError> =>
  Effect.tryPromise({
    try: async () => {
      const temp = `${file}.partial`
      const handle = await fs.open(temp, "w")
      try {
        await handle.writeFile(JSON.stringify(value, null, 2) + "\n")
        await handle.sync()
      } finally {
        await handle.close()
      }
      await fs.rename(temp, file)
    },
    catch: (cause) => fromCause(file, "write", cause)
  })

const readJson = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
  Effect.gen(function*() {
    const text = yield* Effect.promise(() => fs.readFile(file, "utf8").catch(() => undefined))
    if (text === undefined) return Option.none<A>()
    const decoded = yield* Schema.decodeUnknown(Schema.parseJson(schema))(text).pipe(
      Effect.mapError(() => new OutputConflict({ message: `${file} is not a valid ${path.basename(file)}; move it away or rerun with --force.` }))
    )
    return Option.some(decoded)
  })

export const readManifest = (dir: string) => readJson(Manifest, path.join(dir, MANIFEST))
export const readState = (layerDir: string) => readJson(State, path.join(layerDir, STATE))

/**
 * Cursor updates of a layer, one at a time in this process: exports of several versions may finish
 * together (a parallel backfill), and each must read the cursor the one before it wrote, through the
 * same temporary file.
 */
const cursorLocks = new Map<string, Effect.Semaphore>()

/** Moves the incremental cursor forward to `version`; never back (a backfill of old versions leaves it). */
export const advanceState = (layerDir: string, state: State) =>
  Effect.suspend(() => {
    let lock = cursorLocks.get(layerDir)
    if (lock === undefined) cursorLocks.set(layerDir, lock = Effect.unsafeMakeSemaphore(1))
    return lock.withPermits(1)(Effect.gen(function*() {
      const current = yield* readState(layerDir).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(current) && current.value.lastVersion >= state.lastVersion) return
      yield* writeJsonAtomic(path.join(layerDir, STATE), state)
    }))
  })
