import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import { randomBytes } from "node:crypto"
import { ConcurrencyLimit, DEFAULT_MAX_CONCURRENCY } from "../client/Concurrency.ts"
import type { Partition } from "../domain/Partition.ts"
import { TOOL } from "../domain/Tool.ts"
import type { EncoderError } from "../encoder/Encoder.ts"
import { DEFAULT_MAX_FILE_BYTES } from "../encoder/RollingWriter.ts"
import { type Destination, destination } from "../sinks/Destination.ts"
import type { RowBatch } from "../sinks/RowBatch.ts"
import type { OutputFormat } from "../sinks/WrittenFile.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import { ByteBudget, defaultBufferBytes } from "./Budget.ts"
import { type Checkpoint, damage, discardUnfinished, finishedParts, listing, partsDir } from "./Checkpoints.ts"
import { commit, committed } from "./Commit.ts"
import { type DecodeRequest, type Decoding, exportSummary, prepareDecoding, sameDecoding } from "./Decoding.ts"
import * as Fetch from "./Fetch.ts"
import { listPart } from "./Listing.ts"
import type { Manifest } from "./Manifest.ts"
import { mergeSmallFiles, withoutEmptyFiles } from "./Merging.ts"
import { LARGE_ROW_BYTES, PartWriter } from "./Parts.ts"
import { exportDir, type Plan, shardsOf } from "./Plan.ts"
import { Counters } from "./Progress.ts"
import type { ExportSettings } from "./Settings.ts"
import { forgetRuns, pinPlan, type ShardManifest, shardManifests, writeShardManifest } from "./Shards.ts"
import {
  checkFormat,
  isTablePlan,
  type PreparedTable,
  prepareTable,
  type TableCommit,
  tableOf,
  writerOptionsOf
} from "./Tables.ts"

/** How to export a plan: its write settings (the plan says what and how many parts) and how to go about it. */
export interface ExportOptions
  extends
    Pick<ExportSettings, "out" | "format" | "concurrency" | "listConcurrency">,
    Partial<Pick<ExportSettings, "compression" | "maxFileBytes" | "maxConcurrency" | "bufferBytes">>
{
  readonly rowGroupBytes?: number | undefined
  /** Re-export even when a manifest says it is done. */
  readonly force: boolean
  /** Integrity re-fetches of one blob before a checksum mismatch fails the run. */
  readonly integrityAttempts?: number
  /** The region of a multi-region catalog the data APIs are bound to, recorded per part (Failover.ts). */
  readonly region?: string | undefined
  /** Decode the blobs into columns (`--decode`); absent: the raw columns. */
  readonly decode?: DecodeRequest | undefined
}

/** `dir`: the export's directory (an export into a table: the table's), `table`: its snapshot there. */
export type ExportResult =
  | {
    readonly _tag: "Exported"
    readonly dir: string
    readonly manifest: Manifest
    readonly counters: Counters
    readonly table?: TableCommit | undefined
  }
  | {
    readonly _tag: "AlreadyExported"
    readonly dir: string
    readonly manifest: Manifest
    readonly table?: TableCommit | undefined
  }

export type ShardResult =
  | { readonly _tag: "ShardExported"; readonly dir: string; readonly shard: ShardManifest; readonly counters: Counters }
  | {
    readonly _tag: "AlreadyExported"
    readonly dir: string
    readonly manifest: Manifest
    readonly table?: TableCommit | undefined
  }

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

/** Names this run's data files apart from those of any other run of the same part. */
const newRunId = () => randomBytes(4).toString("hex")

/**
 * An export is three steps, each of which a separate process may run: pin the plan (`_plan.json`),
 * run its shards (each lists its parts, fetches, writes files, checkpoints each finished part and
 * writes its shard manifest), commit (the manifest from the shard manifests, then the cursor).
 * `runExport` runs all three in this process: a re-run after a crash reuses finished parts and
 * shards; a re-run after a commit does nothing. When writing fails (a full disk), this run's
 * unfinished files are removed (and the plan, when nothing was finished); other failures leave them
 * for the next run, which never mistakes them for finished ones.
 */
export const runExport = (plan: Plan, options: ExportOptions, counters = new Counters()) =>
  Effect.gen(function*() {
    const dest = yield* destination(options.out)
    const run = newRunId()
    return yield* exportPlan(dest, plan, options, counters, run).pipe(
      Effect.tapError((
        error
      ) => (error._tag === "SinkError" && !dest.remote ? discardAll(dest, exportDir(plan), run) : Effect.void))
    )
  })

const exportPlan = Effect.fn("Export.run")(
  function*(dest: Destination, plan: Plan, options: ExportOptions, counters: Counters, run: string) {
    const dir = resultDir(dest, plan)
    if (!options.force) {
      const done = yield* committed(dest, plan)
      if (Option.isSome(done)) return { _tag: "AlreadyExported", dir, ...done.value } satisfies ExportResult
    }
    yield* checkFormat(plan, options.format)
    const decoding = yield* prepareDecoding(plan, options.decode)
    // A table's schema is decided (or refused) before anything is written.
    const table = isTablePlan(plan) ? yield* prepareTable(dest, plan, decoding) : undefined
    // A resumed run keeps the plan (and so the part ids) of the run it continues.
    const pinned = yield* pinPlan(dest, plan, options.force)
    yield* Effect.annotateCurrentSpan({
      "catalog.hrn": plan.catalogHrn,
      "layer.id": plan.layerId,
      "export.version": plan.version,
      "export.mode": plan.mode,
      "export.parts": Math.max(1, pinned.parts.length)
    })
    yield* runShards(
      { dest, plan: pinned, options, decoding, table, counters, id: run },
      shardsOf(pinned).map((_, i) => i)
    )
    yield* Effect.annotateCurrentSpan({ "export.parts_reused": counters.skippedParts })
    const done = yield* commit(dest, pinned).pipe(Effect.withSpan("Export.commit"))
    const { manifest } = done
    yield* Effect.annotateCurrentSpan({
      "export.partitions": manifest.partitions,
      "export.bytes": manifest.bytes,
      "export.files": manifest.files.length
    })
    return { _tag: "Exported", dir, ...done, counters } satisfies ExportResult
  }
)

/** Where an export's result is: its directory, or the layer's table. */
const resultDir = (dest: Destination, plan: Plan) =>
  dest.at(isTablePlan(plan) ? tableOf(dest, plan).key : exportDir(plan))

/** One shard of a pinned plan (`export --plan LOCATION --shard I`): its files and its shard manifest. */
export const runShard = (
  dest: Destination,
  plan: Plan,
  shard: number,
  options: Omit<ExportOptions, "out" | "force">,
  counters = new Counters()
) =>
  Effect.gen(function*() {
    const dir = resultDir(dest, plan)
    const done = yield* committed(dest, plan)
    if (Option.isSome(done)) return { _tag: "AlreadyExported", dir, ...done.value } satisfies ShardResult
    yield* checkFormat(plan, options.format)
    const decoding = yield* prepareDecoding(plan, options.decode)
    const table = isTablePlan(plan) ? yield* prepareTable(dest, plan, decoding) : undefined
    const run = newRunId()
    const [manifest] = yield* runShards({ dest, plan, options, decoding, table, counters, id: run }, [shard]).pipe(
      Effect.tapError((
        error
      ) => (error._tag === "SinkError" && !dest.remote ? discardUnfinished(dest, exportDir(plan), run) : Effect.void))
    )
    return { _tag: "ShardExported", dir, shard: manifest!, counters } satisfies ShardResult
  })

/** Commits a pinned plan whose shards have run (`commit --plan LOCATION`). */
export const commitPlan = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const dir = resultDir(dest, plan)
    const done = yield* committed(dest, plan)
    if (Option.isSome(done)) return { _tag: "AlreadyExported", dir, ...done.value } satisfies ExportResult
    const result = yield* commit(dest, plan)
    const counters = new Counters()
    counters.partitions = result.manifest.partitions
    counters.deleted = result.manifest.deleted
    counters.bytes = result.manifest.bytes
    return { _tag: "Exported", dir, ...result, counters } satisfies ExportResult
  })

/** After a failed write: this run's unfinished files; and, when no part finished, the plan and the directories it made. */
const discardAll = (dest: Destination, dir: string, run: string) =>
  Effect.gen(function*() {
    yield* discardUnfinished(dest, dir, run)
    const finished = (yield* dest.list(partsDir(dir))).length > 0
    if (finished) return
    yield* forgetRuns(dest, dir)
    yield* dest.pruneEmpty(dir)
  }).pipe(Effect.ignore)

/** What the stages of one run of a pinned plan share. */
interface Run {
  readonly dest: Destination
  readonly plan: Plan
  readonly options: Omit<ExportOptions, "out" | "force">
  readonly decoding: Decoding | undefined
  /** An export into the layer's Iceberg table: its schema, decided before anything was written. */
  readonly table: PreparedTable | undefined
  readonly counters: Counters
  /** Names this run's data files apart from those of any other run of the same parts. */
  readonly id: string
}

/**
 * Runs `shards` of a pinned plan: a shard whose manifest holds is done; the others' unfinished parts
 * are listed, fetched and written together (`transfer`), then each shard's manifest is written from
 * its parts' checkpoints. Returns the manifests of `shards`, in order.
 */
const runShards = (run: Run, shards: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const { counters, decoding, dest, plan } = run
    const dir = exportDir(plan)
    const startedAt = new Date().toISOString()
    const assignment = shardsOf(plan)
    const done = yield* shardManifests(dest, plan)
    const present = yield* listing(dest, dir)
    const manifests = new Map<number, ShardManifest>()
    for (const shard of shards) {
      const manifest = done.get(shard)
      if (
        manifest === undefined || damage(manifest.files, present) !== undefined ||
        !sameDecoding(manifest.decode, decoding?.identity)
      ) continue
      manifests.set(shard, manifest)
      counters.skippedParts += manifest.parts.length
      counters.partitions += manifest.partitions
      counters.deleted += manifest.deleted
      counters.bytes += manifest.bytes
    }
    const pending = shards.filter((shard) => !manifests.has(shard))
    const parts = pending.flatMap((shard) => assignment[shard] ?? [])
    // Earlier runs' finished parts are kept, if decoded alike; the others are fetched again.
    const finished = yield* finishedParts(dest, dir, parts, decoding?.identity)
    for (const checkpoint of finished.values()) {
      counters.skippedParts++
      counters.partitions += checkpoint.partitions
      counters.deleted += checkpoint.deleted
      counters.bytes += checkpoint.bytes
    }
    const todo = parts.filter((part) => !finished.has(part))
    counters.listingStarts(todo.length)
    if (todo.length > 0) yield* transfer(run, todo, finished)
    for (const shard of pending) {
      const checkpoints = (assignment[shard] ?? []).map((part) => finished.get(part)!)
      const partFiles = checkpoints.flatMap((c) => c.files)
      // A table's files carry their columns' statistics, which merging would have to recompute: they are only left out when empty.
      const files = run.table === undefined
        ? yield* mergeSmallFiles(dest, dir, partFiles, {
          maxFileBytes: run.options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
          name: (seq) => `part-s${shard}-${run.id}-${String(seq).padStart(5, "0")}`
        })
        : withoutEmptyFiles(partFiles)
      const decode = exportSummary(checkpoints.flatMap((c) => (c.decode === undefined ? [] : [c.decode])))
      const manifest: ShardManifest = {
        formatVersion: 1,
        shard,
        parts: checkpoints.map((c) => c.part),
        files,
        partitions: checkpoints.reduce((n, c) => n + c.partitions, 0),
        deleted: checkpoints.reduce((n, c) => n + c.deleted, 0),
        bytes: checkpoints.reduce((n, c) => n + c.bytes, 0),
        ...(checkpoints.some((c) => c.region !== undefined)
          ? {
            regions: checkpoints.flatMap((c) => (c.region === undefined ? [] : [{ part: c.part, region: c.region }]))
          }
          : {}),
        ...(decode === undefined ? {} : { decode }),
        ...(run.table === undefined ? {} : {
          columns: run.table.columns,
          deletedPartitions: checkpoints.flatMap((c) => c.deletedPartitions ?? [])
        }),
        startedAt,
        finishedAt: new Date().toISOString()
      }
      yield* writeShardManifest(dest, dir, manifest)
      manifests.set(shard, manifest)
    }
    return shards.map((shard) => manifests.get(shard)!)
  })

/** Work for the writer fiber, in the order the fetch loop produced it. */
type Command =
  | { readonly _tag: "Write"; readonly writer: PartWriter; readonly batch: RowBatch }
  | { readonly _tag: "Finish"; readonly writer: PartWriter }
  | { readonly _tag: "Fail"; readonly error: Fetch.FetchFailure }

/**
 * List, fetch and write the parts `todo`: each part's listing feeds one fetch loop (so the
 * concurrency limit and the byte budget hold for all parts together), verified blobs become rows of their part's writer
 * synchronously, and one writer fiber hands full batches to the encoder thread and finishes each part
 * once its listing has ended and every row it listed has arrived; its checkpoint goes into `finished`.
 */
const transfer = (run: Run, todo: ReadonlyArray<number>, finished: Map<number, Checkpoint>) =>
  Effect.scoped(Effect.gen(function*() {
    const { counters, decoding, dest, options, plan } = run
    const dir = exportDir(plan)
    const parts: ReadonlyArray<string | undefined> = plan.parts.length === 0 ? [undefined] : plan.parts
    const commands = yield* Queue.unbounded<Command>()
    const writers = new Map<number, PartWriter>()
    // Per part: its rows, and the spans of its fetch (until its last blob arrived) and its write (until its files are complete).
    const tally = new Map<
      number,
      { listed: number; accepted: number; ended: boolean; fetch: Tracer.Span; write: Tracer.Span }
    >()
    const clock = yield* Effect.clock
    const probe = yield* CrashProbe
    const limit = options.concurrency === undefined
      ? ConcurrencyLimit.adaptive(options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY)
      : ConcurrencyLimit.fixed(options.concurrency)
    const budget = new ByteBudget(options.bufferBytes ?? defaultBufferBytes())
    counters.fetching = limit
    counters.buffer = budget

    const write = (writer: PartWriter, batch: RowBatch) => {
      budget.enqueued(batch.data.byteLength)
      Queue.unsafeOffer(commands, { _tag: "Write", writer, batch })
    }
    const partFetched = (part: number) => {
      const t = tally.get(part)!
      t.fetch.attribute("export.partitions", t.accepted)
      t.fetch.end(clock.unsafeCurrentTimeNanos(), Exit.void)
      const writer = writers.get(part)!
      // Its last rows go through the budget like every other batch.
      if (writer.collected > 0) write(writer, writer.take())
      Queue.unsafeOffer(commands, { _tag: "Finish", writer })
    }

    const accept = (part: number, p: Partition, stored: number, data: Uint8Array | null) => {
      const writer = writers.get(part)!
      const size = data === null ? null : p.dataSize ?? stored
      if (data !== null && data.byteLength >= LARGE_ROW_BYTES) {
        write(writer, writer.single(p.partition, p.version, p.dataHandle, size, p.checksum ?? null, data))
      } else {
        writer.add(p.partition, p.version, p.dataHandle, size, p.checksum ?? null, data)
        if (writer.full) write(writer, writer.take())
      }
      counters.partitions++
      if (data === null) counters.deleted++
      else counters.bytes += data.byteLength
      const t = tally.get(part)!
      if (++t.accepted === t.listed && t.ended) partFetched(part)
    }

    const fetch = yield* Fetch.stage(plan, {
      limit,
      budget,
      integrityAttempts: options.integrityAttempts ?? 3,
      onBlob: accept,
      onFailure: (error) => Queue.unsafeOffer(commands, { _tag: "Fail", error })
    })

    const rowGroupBytes = options.rowGroupBytes ?? (decoding === undefined ? ROW_GROUP_BYTES : DECODED_ROW_GROUP_BYTES)
    const files = run.table === undefined
      ? { format: plainFormat(options.format), metadata: fileMetadata(plan) }
      : { ...writerOptionsOf(run.table), metadata: { ...fileMetadata(plan), ...writerOptionsOf(run.table).metadata } }
    const writerOptions = {
      ...files,
      heretile: plan.heretile,
      createdBy: `${TOOL.name} ${TOOL.version}`,
      ...(options.compression === undefined ? {} : { compression: options.compression }),
      ...(options.maxFileBytes === undefined ? {} : { maxFileBytes: options.maxFileBytes }),
      rowGroupBytes,
      batchBytes: Math.min(BATCH_BYTES, rowGroupBytes),
      region: options.region,
      decoding
    }

    // A part's files are opened with its first listed partitions, whose sizes say where to encode them.
    const open = (part: number, listed: ReadonlyArray<Partition>) =>
      writers.has(part)
        ? Effect.void
        : Effect.map(
          PartWriter.open(dest, dir, part, run.id, writerOptions, {
            rowBytes: meanDataSize(listed),
            concurrency: limit.current
          }),
          (writer) => void writers.set(part, writer)
        )

    const listAndFetch = (part: number) =>
      Effect.gen(function*() {
        const attributes = { "export.part": part }
        const t = {
          listed: 0,
          accepted: 0,
          ended: false,
          fetch: yield* Effect.makeSpanScoped("Export.fetch", { attributes }),
          write: yield* Effect.makeSpanScoped("Export.write", { attributes })
        }
        tally.set(part, t)
        yield* listPart(plan, parts[part]).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.gen(function*() {
              const listed = Chunk.toReadonlyArray(chunk)
              yield* open(part, listed)
              const fetched: Array<Partition> = []
              t.listed += listed.length
              for (const p of listed) {
                probe.reached("listed")
                // An empty data handle is a deleted partition: a row without data, nothing to fetch.
                if (p.dataHandle === "") accept(part, p, 0, null)
                else fetched.push(p)
              }
              if (fetched.length > 0) yield* fetch.offer(part, fetched)
            })
          ),
          Effect.zipRight(Effect.suspend(() => Effect.annotateCurrentSpan("export.partitions", t.listed))),
          Effect.withSpan("Export.list", { attributes })
        )
        // A part that listed nothing still has its (empty) files.
        yield* open(part, [])
        t.ended = true
        counters.listingEnded(t.listed)
        if (t.accepted === t.listed) partFetched(part)
      })

    const writing: Effect.Effect<void, EncoderError | Fetch.FetchFailure> = Effect.gen(function*() {
      for (let remaining = todo.length; remaining > 0;) {
        const command = yield* Queue.take(commands)
        switch (command._tag) {
          case "Write": {
            // Read before the batch goes to the encoder thread, which detaches its buffer.
            const bytes = command.batch.data.byteLength
            yield* command.writer.write(command.batch)
            budget.taken(bytes)
            fetch.resume()
            break
          }
          case "Finish": {
            const checkpoint = yield* command.writer.finish
            finished.set(command.writer.part, checkpoint)
            writers.delete(command.writer.part)
            const span = tally.get(command.writer.part)!.write
            span.attribute("export.files", checkpoint.files.length)
            span.attribute("export.bytes", checkpoint.bytes)
            span.end(clock.unsafeCurrentTimeNanos(), Exit.void)
            remaining--
            break
          }
          case "Fail":
            return yield* Effect.fail(command.error)
        }
      }
    })

    yield* Effect.all([
      Effect.forEach(todo, listAndFetch, { concurrency: options.listConcurrency, discard: true }),
      writing
    ], {
      concurrency: "unbounded",
      discard: true
    })
  }))

/** The files of a plan of files (checkFormat: not a table's). */
const plainFormat = (format: ExportOptions["format"]): OutputFormat => (format === "iceberg" ? "parquet" : format)

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
