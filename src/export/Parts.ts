import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Option, Schema } from "effect"
import type { EncoderError, EncoderWorkload } from "../sinks/Encoder.ts"
import * as RollingWriter from "../sinks/RollingWriter.ts"
import { type RowBatch, RowBatchBuilder } from "../sinks/RowBatch.ts"
import { fromCause } from "../sinks/SinkError.ts"
import { crashPoint, crashPointSync } from "./CrashHook.ts"
import { type Decoding, partSummary, sameDecoding } from "./Decoding.ts"
import { type DecodeIdentity, DecodeSummary, MANIFEST, WrittenFile, writeJsonAtomic } from "./Manifest.ts"
import { Plan } from "./Plan.ts"

/**
 * The parts of one export and what they leave in `_parts/` of its directory: the plan a resumed run
 * must keep (part ids are the service's), and per finished part a checkpoint naming its files. Nothing
 * else reads or writes `_parts/`.
 */

const PARTS_DIR = "_parts"
const PLAN_FILE = "plan.json"

/** What one finished part wrote; the proof that lets a resumed run skip it. */
export const Checkpoint = Schema.Struct({
  part: Schema.Number,
  files: Schema.Array(WrittenFile),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number,
  /** how the part was decoded; absent when it was not */
  decode: Schema.optional(DecodeSummary)
})
export type Checkpoint = typeof Checkpoint.Type

const partsDir = (dir: string) => path.join(dir, PARTS_DIR)
const checkpointFile = (dir: string, part: number) => path.join(partsDir(dir), `part-${part}.json`)

const readJsonFile = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
  Effect.promise(() => fs.readFile(file, "utf8").catch(() => undefined)).pipe(
    Effect.flatMap((text) => (text === undefined ? Effect.succeed(Option.none<A>()) : Schema.decodeUnknown(Schema.parseJson(schema))(text).pipe(Effect.option)))
  )

const fileSize = (file: string) => fs.stat(file).then((s) => s.size, () => -1)

const samePlan = (a: Plan, b: Plan) =>
  a.catalogHrn === b.catalogHrn && a.layerId === b.layerId && a.version === b.version && a.mode === b.mode &&
  a.baseVersion === b.baseVersion && a.snapshot === b.snapshot

/**
 * Readies `_parts/` for a run of `plan` and returns the plan to run: the one an interrupted run of the
 * same export left (so its finished parts still mean the same listing), else `plan`. `fresh` forgets
 * earlier runs.
 */
export const prepare = (dir: string, plan: Plan, fresh: boolean) =>
  Effect.gen(function*() {
    const parts = partsDir(dir)
    if (fresh) yield* Effect.promise(() => fs.rm(parts, { recursive: true, force: true }))
    yield* Effect.tryPromise({ try: () => fs.mkdir(parts, { recursive: true }), catch: (cause) => fromCause(parts, "create", cause) })
    const stored = yield* readJsonFile(Plan, path.join(parts, PLAN_FILE))
    if (Option.isSome(stored) && samePlan(stored.value, plan)) return stored.value
    if (Option.isSome(stored)) {
      yield* Effect.promise(() => fs.rm(parts, { recursive: true, force: true }).then(() => fs.mkdir(parts, { recursive: true })))
    }
    yield* writeJsonAtomic(path.join(parts, PLAN_FILE), plan)
    return plan
  })

/**
 * The checkpoints of earlier runs that still hold: decoded as this run decodes (`decoding`, undefined
 * for raw), and every file they name there with its recorded size.
 */
export const finishedParts = (dir: string, count: number, decoding: DecodeIdentity | undefined) =>
  Effect.gen(function*() {
    const finished = new Map<number, Checkpoint>()
    for (let part = 0; part < count; part++) {
      const checkpoint = yield* readJsonFile(Checkpoint, checkpointFile(dir, part))
      if (Option.isNone(checkpoint) || !sameDecoding(checkpoint.value.decode, decoding)) continue
      const valid = yield* Effect.promise(async () => {
        for (const f of checkpoint.value.files) if ((await fileSize(path.join(dir, f.path))) !== f.bytes) return false
        return true
      })
      if (valid) finished.set(part, checkpoint.value)
    }
    return finished
  })

/** Once the manifest is written the checkpoints have served their purpose. */
export const removeCheckpoints = (dir: string) => Effect.promise(() => fs.rm(partsDir(dir), { recursive: true, force: true }))

/**
 * After the output volume failed (disk full, I/O error): removes what no checkpoint vouches for and
 * cannot be resumed anyway, giving the space back and leaving nothing half-written, and the
 * directories left empty. Finished parts stay for the next run.
 */
export const discardUnfinished = (out: string, dir: string) =>
  Effect.promise(async () => {
    // A committed export (the cursor failed to move after its manifest) is finished: keep all of it.
    if ((await fileSize(path.join(dir, MANIFEST))) >= 0) return
    const kept = new Set<string>()
    for (const name of await fs.readdir(partsDir(dir)).catch(() => [] as Array<string>)) {
      if (!/^part-\d+\.json$/.test(name)) continue
      try {
        for (const f of JSON.parse(await fs.readFile(path.join(partsDir(dir), name), "utf8")).files) kept.add(f.path)
      } catch {
        // an unreadable checkpoint vouches for nothing
      }
    }
    for (const name of await fs.readdir(dir).catch(() => [] as Array<string>)) {
      if (name !== PARTS_DIR && !kept.has(name)) await fs.rm(path.join(dir, name), { recursive: true, force: true }).catch(() => undefined)
    }
    if (kept.size > 0) return
    await fs.rm(partsDir(dir), { recursive: true, force: true }).catch(() => undefined)
    const root = path.resolve(out)
    for (let d = path.resolve(dir); d.startsWith(root + path.sep); d = path.dirname(d)) {
      if (!(await fs.rmdir(d).then(() => true, () => false))) break
    }
  })

/** Removes what an unfinished run of a part left: its `.partial` files and any final files without a checkpoint. */
const clearPart = (dir: string, part: number) =>
  Effect.promise(async () => {
    const prefix = `part-${part}-`
    for (const name of await fs.readdir(dir)) if (name.startsWith(prefix)) await fs.rm(path.join(dir, name), { force: true })
  })

export interface PartWriterOptions extends Omit<RollingWriter.Options, "dir" | "shard" | "onRenamed" | "decode"> {
  /** Rows collected before they are handed to the encoder. */
  readonly batchBytes: number
  /** Decode the blobs (`--decode`); absent: the raw columns. */
  readonly decoding?: Decoding | undefined
}

/**
 * The files of one part being written: rows are collected synchronously (the fetch loop calls `add`
 * per blob) into batches that `write` hands to the encoder; `finish` writes the checkpoint.
 */
export class PartWriter {
  private readonly batch: RowBatchBuilder
  partitions = 0
  deleted = 0
  bytes = 0

  private constructor(
    readonly part: number,
    private readonly dir: string,
    private readonly writer: RollingWriter.RollingWriter,
    private readonly options: PartWriterOptions
  ) {
    // Room for a full batch and the blob that fills it, so the buffer rarely grows.
    this.batch = new RowBatchBuilder(options.batchBytes + 64 * 1024)
  }

  static open = (dir: string, part: number, options: PartWriterOptions, workload: EncoderWorkload) =>
    Effect.gen(function*() {
      yield* clearPart(dir, part)
      const writer = yield* RollingWriter.make({ ...options, dir, shard: part, onRenamed: () => crashPointSync("renamed"), workload, decode: options.decoding?.settings })
      return new PartWriter(part, dir, writer, options)
    })

  add(partition: string, version: number, dataHandle: string, dataSize: number | null, checksum: string | null, data: Uint8Array | null): void {
    this.batch.add(partition, version, dataHandle, dataSize, checksum, data)
    this.partitions++
    if (data === null) this.deleted++
    else this.bytes += data.byteLength
  }

  /** Whether the rows collected make a batch for the encoder. */
  get full(): boolean {
    return this.batch.bytes >= this.options.batchBytes
  }

  /** The rows collected so far, as a batch for `write`. */
  take(): RowBatch {
    return this.batch.take()
  }

  /** Hands a batch to the encoder thread. */
  write(batch: RowBatch): Effect.Effect<void, EncoderError> {
    return Effect.zipRight(this.writer.write(batch), crashPoint("written"))
  }

  /** Completes and renames the part's files, then records them in its checkpoint. */
  readonly finish: Effect.Effect<Checkpoint, EncoderError> = Effect.gen(this, function*() {
    if (this.batch.length > 0) yield* this.write(this.take())
    const files = yield* this.writer.finish
    const identity = this.options.decoding?.identity
    const decoded = this.writer.decoded()
    const checkpoint: Checkpoint = {
      part: this.part,
      files: files.map((f) => ({ ...f })),
      partitions: this.partitions,
      deleted: this.deleted,
      bytes: this.bytes,
      ...(identity === undefined || decoded === undefined ? {} : { decode: partSummary(identity, decoded, this.partitions, this.deleted) })
    }
    yield* writeJsonAtomic(checkpointFile(this.dir, this.part), checkpoint)
    yield* crashPoint("checkpoint")
    return checkpoint
  })
}
