import * as path from "node:path"
import { Chunk, Effect, Option, Queue, Stream } from "effect"
import type { Partition } from "../domain/Partition.ts"
import { TOOL } from "../domain/Tool.ts"
import type { ParquetCompression } from "../sinks/ParquetCodecs.ts"
import type * as RollingWriter from "../sinks/RollingWriter.ts"
import type { RowBatch } from "../sinks/RowBatch.ts"
import type { EncoderError } from "../sinks/Encoder.ts"
import { commit, committed } from "./Commit.ts"
import { crashPointSync } from "./CrashHook.ts"
import { type DecodeRequest, type Decoding, prepareDecoding } from "./Decoding.ts"
import * as Fetch from "./Fetch.ts"
import { listPart } from "./Listing.ts"
import type { Manifest } from "./Manifest.ts"
import { type Checkpoint, discardUnfinished, finishedParts, PartWriter, prepare } from "./Parts.ts"
import { exportDir, type Plan } from "./Plan.ts"
import { Counters } from "./Progress.ts"

export interface ExportOptions {
  readonly out: string
  readonly format: RollingWriter.OutputFormat
  readonly compression?: ParquetCompression | undefined
  /** Blob requests in flight at once, across all parts. */
  readonly concurrency: number
  /** Parts listed (and written) at once. */
  readonly listConcurrency: number
  readonly maxFileBytes?: number | undefined
  readonly rowGroupBytes?: number | undefined
  /** Re-export even when a manifest says it is done. */
  readonly force: boolean
  /** Integrity re-fetches of one blob before a checksum mismatch fails the run. */
  readonly integrityAttempts?: number
  /** Decode the blobs into columns (`--decode`); absent: the raw columns. */
  readonly decode?: DecodeRequest | undefined
}

export type ExportResult =
  | { readonly _tag: "Exported"; readonly dir: string; readonly manifest: Manifest; readonly counters: Counters }
  | { readonly _tag: "AlreadyExported"; readonly dir: string; readonly manifest: Manifest }

/**
 * Row bytes per Parquet row group / Arrow record batch. Encoding one is a pause of the thread that
 * does it (~40 ms at 4 MiB); the encoder holds at most two row groups' worth of rows across all
 * open parts (OpenFiles), so this also bounds memory.
 */
const ROW_GROUP_BYTES = 4 * 1024 * 1024
/**
 * Decoding exports: a row group's decoded values live as JS objects while it is written (several
 * times its blob bytes), so smaller groups keep memory near a raw export's (measured: ~310 MB peak
 * at 1 MiB against ~370 MB at 4 MiB for 20,000 road tiles, at the same CPU).
 */
const DECODED_ROW_GROUP_BYTES = 1024 * 1024
/** Rows a part collects on the main thread before they go to the encoder thread. */
const BATCH_BYTES = 1024 * 1024
/** Batches waiting for the encoder beyond this pause new downloads. */
const QUEUED_BYTES = 4 * BATCH_BYTES

/**
 * Runs a plan: lists each part, fetches blobs with bounded concurrency, writes Parquet/Arrow files
 * per part, checkpoints each finished part, and commits the manifest last. A re-run after a crash
 * reuses finished parts; a re-run after a commit does nothing. When writing fails (a full disk), the
 * unfinished files are removed; other failures leave them `.partial` for the next run to replace.
 */
export const runExport = (plan: Plan, options: ExportOptions, counters = new Counters()) =>
  exportPlan(plan, options, counters).pipe(
    Effect.tapError((error) => (error._tag === "SinkError" ? discardUnfinished(options.out, path.join(options.out, exportDir(plan))) : Effect.void))
  )

const exportPlan = Effect.fn("Export.run")(function*(plan: Plan, options: ExportOptions, counters: Counters) {
  const dir = path.join(options.out, exportDir(plan))
  if (!options.force) {
    const done = yield* committed(options.out, dir, plan)
    if (Option.isSome(done)) return { _tag: "AlreadyExported", dir, manifest: done.value } satisfies ExportResult
  }
  const decoding = yield* prepareDecoding(plan, options.decode)
  // A resumed run keeps the plan (and so the part ids) of the run it continues.
  const effective = yield* prepare(dir, plan, options.force)
  const startedAt = new Date().toISOString()
  const parts: ReadonlyArray<string | undefined> = effective.parts.length === 0 ? [undefined] : effective.parts
  // Earlier runs' finished parts are kept, if decoded alike; the others are fetched again.
  const finished = yield* finishedParts(dir, parts.length, decoding?.identity)
  for (const checkpoint of finished.values()) {
    counters.skippedParts++
    counters.partitions += checkpoint.partitions
    counters.deleted += checkpoint.deleted
    counters.bytes += checkpoint.bytes
  }
  const todo = parts.map((_, index) => index).filter((index) => !finished.has(index))
  if (todo.length > 0) yield* transfer(effective, dir, parts, todo, options, decoding, counters, finished)
  const manifest = yield* commit(options.out, dir, effective, [...finished.values()], startedAt)
  return { _tag: "Exported", dir, manifest, counters } satisfies ExportResult
})

/** Work for the writer fiber, in the order the fetch loop produced it. */
type Command =
  | { readonly _tag: "Write"; readonly writer: PartWriter; readonly batch: RowBatch }
  | { readonly _tag: "Finish"; readonly writer: PartWriter }
  | { readonly _tag: "Fail"; readonly error: Fetch.FetchFailure }

/**
 * List, fetch and write the parts `todo`: each part's listing feeds one fetch loop (so `concurrency`
 * bounds the downloads of all parts together), verified blobs become rows of their part's writer
 * synchronously, and one writer fiber hands full batches to the encoder thread and finishes each part
 * once its listing has ended and every row it listed has arrived.
 */
const transfer = (
  plan: Plan,
  dir: string,
  parts: ReadonlyArray<string | undefined>,
  todo: ReadonlyArray<number>,
  options: ExportOptions,
  decoding: Decoding | undefined,
  counters: Counters,
  finished: Map<number, Checkpoint>
) =>
  Effect.scoped(Effect.gen(function*() {
    const commands = yield* Queue.unbounded<Command>()
    const writers = new Map<number, PartWriter>()
    const tally = new Map<number, { listed: number; accepted: number; ended: boolean }>()
    let queuedBytes = 0

    const accept = (part: number, p: Partition, stored: number, data: Uint8Array | null) => {
      const writer = writers.get(part)!
      writer.add(p.partition, p.version, p.dataHandle, data === null ? null : p.dataSize ?? stored, p.checksum ?? null, data)
      counters.partitions++
      if (data === null) counters.deleted++
      else counters.bytes += data.byteLength
      if (writer.full) {
        const batch = writer.take()
        queuedBytes += batch.bytes
        Queue.unsafeOffer(commands, { _tag: "Write", writer, batch })
      }
      const t = tally.get(part)!
      if (++t.accepted === t.listed && t.ended) Queue.unsafeOffer(commands, { _tag: "Finish", writer })
    }

    const fetch = yield* Fetch.stage(plan, {
      concurrency: options.concurrency,
      integrityAttempts: options.integrityAttempts ?? 3,
      onBlob: accept,
      onFailure: (error) => Queue.unsafeOffer(commands, { _tag: "Fail", error }),
      isPaused: () => queuedBytes > QUEUED_BYTES
    })

    const rowGroupBytes = options.rowGroupBytes ?? (decoding === undefined ? ROW_GROUP_BYTES : DECODED_ROW_GROUP_BYTES)
    const writerOptions = {
      format: options.format,
      heretile: plan.heretile,
      metadata: fileMetadata(plan),
      createdBy: `${TOOL.name} ${TOOL.version}`,
      ...(options.compression === undefined ? {} : { compression: options.compression }),
      ...(options.maxFileBytes === undefined ? {} : { maxFileBytes: options.maxFileBytes }),
      rowGroupBytes,
      batchBytes: Math.min(BATCH_BYTES, rowGroupBytes),
      decoding
    }

    // A part's files are opened with its first listed partitions, whose sizes say where to encode them.
    const open = (part: number, listed: ReadonlyArray<Partition>) =>
      writers.has(part)
        ? Effect.void
        : Effect.map(
          PartWriter.open(dir, part, writerOptions, { rowBytes: meanDataSize(listed), concurrency: options.concurrency }),
          (writer) => void writers.set(part, writer)
        )

    const listAndFetch = (part: number) =>
      Effect.gen(function*() {
        const t = { listed: 0, accepted: 0, ended: false }
        tally.set(part, t)
        yield* listPart(plan, parts[part]).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.gen(function*() {
              const listed = Chunk.toReadonlyArray(chunk)
              yield* open(part, listed)
              const fetched: Array<Partition> = []
              t.listed += listed.length
              for (const p of listed) {
                crashPointSync("listed")
                // An empty data handle is a deleted partition: a row without data, nothing to fetch.
                if (p.dataHandle === "") accept(part, p, 0, null)
                else fetched.push(p)
              }
              if (fetched.length > 0) yield* fetch.offer(part, fetched)
            })
          )
        )
        // A part that listed nothing still has its (empty) files.
        yield* open(part, [])
        t.ended = true
        if (t.accepted === t.listed) Queue.unsafeOffer(commands, { _tag: "Finish", writer: writers.get(part)! })
      })

    const write: Effect.Effect<void, EncoderError | Fetch.FetchFailure> = Effect.gen(function*() {
      for (let remaining = todo.length; remaining > 0;) {
        const command = yield* Queue.take(commands)
        switch (command._tag) {
          case "Write":
            yield* command.writer.write(command.batch)
            queuedBytes -= command.batch.bytes
            fetch.resume()
            break
          case "Finish":
            finished.set(command.writer.part, yield* command.writer.finish)
            writers.delete(command.writer.part)
            remaining--
            break
          case "Fail":
            return yield* Effect.fail(command.error)
        }
      }
    })

    yield* Effect.all([Effect.forEach(todo, listAndFetch, { concurrency: options.listConcurrency, discard: true }), write], {
      concurrency: "unbounded",
      discard: true
    })
  }))

/** The mean blob size of listed partitions, where the listing says. */
const meanDataSize = (listed: ReadonlyArray<Partition>): number | undefined => {
  let sum = 0
  let count = 0
  for (const p of listed) {
    if (p.dataSize === undefined) continue
    sum += p.dataSize
    count++
  }
  return count === 0 ? undefined : sum / count
}

const fileMetadata = (plan: Plan): Record<string, string> => ({
  catalog_hrn: plan.catalogHrn,
  layer_id: plan.layerId,
  layer_type: plan.layerType,
  content_type: plan.contentType,
  content_encoding: plan.contentEncoding ?? "",
  catalog_version: String(plan.version),
  tool_version: `${TOOL.name} ${TOOL.version}`
})
