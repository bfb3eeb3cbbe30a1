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
  /** A multi-region catalog: the region that served each part (files `part-<part>-*`). */
  regions: Schema.optional(Schema.Array(Schema.Struct({ part: Schema.Number, region: Schema.String }))),
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
