import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Worker } from "node:worker_threads"
import { DecodeError } from "../decode/Errors.ts"
import { UndecodableBlob, type UndecodableFields } from "../decode/Shared.ts"
import type { OpenFiles } from "../sinks/Files.ts"
import type { RowBatch } from "../sinks/RowBatch.ts"
import { fromCause, SinkError } from "../sinks/SinkError.ts"
import type { SinkFailureFields } from "../sinks/SinkFailure.ts"
import type { Completed, Settings } from "./Writers.ts"

/**
 * Where rows become file bytes: Parquet/Arrow encoding, compression and the blocking writes. Either on
 * the calling thread (`Encoder.inline`) or on a thread of its own (`Encoder.thread`). Encoding a row
 * group pauses the thread that does it (~40 ms at 4 MiB); on the main thread no download starts or
 * ends meanwhile. `Encoder.auto` chooses per writer: the thread where encoding is most of the work
 * (large rows) or where the fetch loop must keep the network busy (many downloads in flight, i.e.
 * waiting on latency, with a core to spare); inline otherwise, which costs less CPU (no copies across)
 * and less memory (no second V8 heap, ~40-80 MB). Decoding exports (`--decode`) decode where they
 * encode, and always on the thread: decoding costs as much CPU as encoding again.
 */

/** What a writer's rows are like, as far as known when it opens. */
export interface EncoderWorkload {
  /** The files go to an object store: uploading (hashing, signing) is kept off the fetch loop's thread. */
  readonly remote?: boolean | undefined
  /** The typical size of a row's blob. */
  readonly rowBytes?: number | undefined
  /** Downloads in flight at once in the run feeding the writer. */
  readonly concurrency?: number | undefined
  /** The writer decodes its rows (Settings.decode). */
  readonly decoding?: boolean | undefined
}

/** `Encoder.auto` encodes on the thread rows of at least this size... */
export const THREAD_ROW_BYTES = 16 * 1024
/** ...and the rows of runs with more downloads than this in flight. */
export const THREAD_CONCURRENCY = 64

const onThread = (workload: EncoderWorkload) =>
  workload.remote === true || workload.decoding === true || (workload.rowBytes ?? 0) >= THREAD_ROW_BYTES ||
  (workload.concurrency ?? 0) > THREAD_CONCURRENCY

/** Why the encoder failed: a file that cannot be written, or a blob that does not decode (`--on-decode-error fail`). */
export type EncoderError = SinkError | DecodeError

export interface EncoderSession {
  /**
   * Takes a batch (its buffers move to the encoder thread); done once the encoder has written it as
   * far as a row group was full, and uploads (object stores) are no longer behind.
   */
  readonly add: (batch: RowBatch) => Effect.Effect<void, EncoderError>
  /** Writes what is buffered and the footers and makes the files durable (disk, uploaded parts); none is visible yet. */
  readonly complete: Effect.Effect<Completed, EncoderError>
  /** Closes the files as they are. */
  readonly abandon: Effect.Effect<void>
}

export interface EncoderShape {
  /** Creates the writer's first files. */
  readonly open: (settings: Settings, workload: EncoderWorkload) => Effect.Effect<EncoderSession, EncoderError>
}

const inlineEncoder = (): EncoderShape => {
  let opened: OpenFiles | undefined
  let nextId = 0
  return {
    open: (settings) =>
      Effect.gen(function*() {
        const id = nextId++
        // Loaded here, not imported: every command provides the encoder, few write files (zstd is native).
        const [{ loadBacklog, loadOutputs, OpenFiles }, { chooseWriters }] = yield* Effect.promise(() =>
          Promise.all([import("../sinks/Files.ts"), import("./Writers.ts")])
        )
        const files = opened ??= new OpenFiles()
        const [writers, outputs, backlog] = yield* Effect.tryPromise({
          try: () => Promise.all([chooseWriters(settings), loadOutputs(settings.dir), loadBacklog(settings.dir)]),
          catch: (cause) => fromCause(settings.dir, "create", cause)
        })
        const failure = (operation: string) => (cause: unknown): EncoderError =>
          cause instanceof UndecodableBlob ? DecodeError.of(cause) : fromCause(settings.dir, operation, cause)
        const run = <A>(f: () => A) => Effect.try({ try: f, catch: failure("write") })
        yield* run(() => files.open(id, settings, writers.factories, outputs))
        // Local files: nothing to wait for. Uploads behind: wait before taking more rows.
        const waitForUploads = Effect.suspend(() => {
          const behind = backlog()
          return behind === undefined ? Effect.void : Effect.promise(() => behind)
        })
        return {
          add: (batch) => Effect.zipRight(run(() => files.add(id, batch)), waitForUploads),
          complete: Effect.tryPromise({
            try: async (): Promise<Completed> => ({ files: await files.complete(id), decoded: writers.decoded?.() }),
            catch: failure("complete")
          }),
          abandon: Effect.sync(() => files.abandon(id))
        } satisfies EncoderSession
      })
  }
}

/** One encoder thread, started when the first writer opens there and stopped with the scope. */
const threadEncoder = Effect.gen(function*() {
  let thread: EncoderThread | undefined
  yield* Effect.addFinalizer(() => (thread === undefined ? Effect.void : Effect.promise(() => thread!.terminate())))
  return {
    open: (settings: Settings) =>
      Effect.suspend(() => {
        const current = thread ??= new EncoderThread()
        const id = current.nextId++
        return Effect.as(
          current.request<void>({ op: "open", id, settings }),
          {
            add: (batch) =>
              current.request<void>({ op: "add", id, batch }, [
                batch.data.buffer,
                batch.dataOffsets.buffer,
                batch.dataNull.buffer
              ]),
            complete: current.request<Completed>({ op: "complete", id }),
            abandon: Effect.ignore(current.request<void>({ op: "abandon", id }))
          } satisfies EncoderSession
        )
      })
  } satisfies EncoderShape
})

export class Encoder extends Context.Tag("catalog-export/encoder/Encoder")<Encoder, EncoderShape>() {
  static readonly inline: Layer.Layer<Encoder> = Layer.sync(Encoder, inlineEncoder)

  static readonly thread: Layer.Layer<Encoder> = Layer.scoped(Encoder, threadEncoder)

  /** The thread for large rows or many downloads in flight, inline otherwise (see above). */
  static readonly auto: Layer.Layer<Encoder> = Layer.scoped(
    Encoder,
    Effect.map(threadEncoder, (thread) => {
      const inline = inlineEncoder()
      return {
        open: (settings, workload) => (onThread(workload) ? thread : inline).open(settings, workload)
      } satisfies EncoderShape
    })
  )
}

/** What the encoder thread is asked: see EncoderWorker.ts. */
export type EncoderRequest =
  | { readonly op: "open"; readonly id: number; readonly settings: Settings }
  | { readonly op: "add"; readonly id: number; readonly batch: RowBatch }
  | { readonly op: "complete"; readonly id: number }
  | { readonly op: "abandon"; readonly id: number }

export type EncoderReply =
  | { readonly seq: number; readonly ok: true; readonly value: unknown }
  | { readonly seq: number; readonly ok: false; readonly error: SinkFailureFields }
  | { readonly seq: number; readonly ok: false; readonly undecodable: UndecodableFields }

/** The thread runs bundled (dist/encoder-worker.mjs) or, from the TypeScript sources, through tsx. */
const workerUrl = import.meta.url.endsWith(".ts")
  ? new URL("./EncoderWorker.dev.mjs", import.meta.url)
  : new URL("./encoder-worker.mjs", import.meta.url)

class EncoderThread {
  // A small young generation: the thread's garbage is mostly row strings of batches already written,
  // and a default-sized one grew the process by ~40 MB at 200,000 rows for nothing.
  private readonly worker = new Worker(workerUrl, { resourceLimits: { maxYoungGenerationSizeMb: 2 } })
  private readonly waiting = new Map<number, (reply: EncoderReply) => void>()
  private nextSeq = 0
  nextId = 0
  private stopped: SinkError | undefined

  constructor() {
    // Only requests under way keep the process alive.
    this.worker.unref()
    this.worker.on("message", (reply: EncoderReply) => {
      const resume = this.waiting.get(reply.seq)
      this.waiting.delete(reply.seq)
      if (this.waiting.size === 0) this.worker.unref()
      resume?.(reply)
    })
    const stop = (reason: string) => {
      this.stopped ??= new SinkError({
        path: "",
        reason: "Encode",
        message: `The encoder thread stopped: ${reason}. Run the export again; if it recurs, report it.`
      })
      for (const resume of this.waiting.values()) resume({ seq: -1, ok: false, error: this.stopped })
      this.waiting.clear()
    }
    this.worker.on("error", (error) => stop(error.message))
    this.worker.on("exit", (code) => stop(`exit code ${code}`))
  }

  request<A>(
    message: EncoderRequest,
    transfer: ReadonlyArray<ArrayBuffer | SharedArrayBuffer> = []
  ): Effect.Effect<A, EncoderError> {
    return Effect.async<A, EncoderError>((resume) => {
      if (this.stopped !== undefined) return resume(Effect.fail(this.stopped))
      const seq = this.nextSeq++
      this.waiting.set(seq, (reply) =>
        resume(
          reply.ok
            ? Effect.succeed(reply.value as A)
            : Effect.fail("undecodable" in reply ? DecodeError.of(reply.undecodable) : new SinkError(reply.error))
        ))
      this.worker.ref()
      this.worker.postMessage({ ...message, seq }, transfer as Array<ArrayBuffer>)
    })
  }

  async terminate(): Promise<void> {
    this.stopped ??= new SinkError({ path: "", reason: "Encode", message: "The encoder thread was stopped." })
    await this.worker.terminate()
  }
}
