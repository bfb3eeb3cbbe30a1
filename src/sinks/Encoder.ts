import { Context, Effect, Layer } from "effect"
import { Worker } from "node:worker_threads"
import { type CompletedFile, Files, loadWriters, type Settings } from "./Files.ts"
import type { RowBatch } from "./RowBatch.ts"
import { fromCause, SinkError } from "./SinkError.ts"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * Where rows become file bytes: Parquet/Arrow encoding, compression and the blocking writes. In an
 * export that is a thread of its own (`Encoder.worker`), so the main thread only moves bytes from the
 * network into batches; `Encoder.inline` does the same work on the calling thread (tests, tools).
 */

export interface EncoderSession {
  /** Takes a batch (its buffers move to the encoder thread); done once the encoder has written it as far as a row group was full. */
  readonly add: (batch: RowBatch) => Effect.Effect<void, SinkError>
  /** Writes what is buffered and the footers and flushes the files to disk; they keep their `.partial` names. */
  readonly complete: Effect.Effect<ReadonlyArray<CompletedFile>, SinkError>
  /** Closes the files as they are. */
  readonly abandon: Effect.Effect<void>
}

export interface EncoderShape {
  /** Creates the writer's first files. */
  readonly open: (settings: Settings) => Effect.Effect<EncoderSession, SinkError>
}

export class Encoder extends Context.Tag("catalog-export/sinks/Encoder")<Encoder, EncoderShape>() {
  static readonly inline: Layer.Layer<Encoder> = Layer.sync(Encoder, () => ({
    open: (settings) =>
      Effect.gen(function*() {
        const writers = yield* Effect.promise(() => loadWriters(settings.formats))
        const run = <A>(f: () => A) => Effect.try({ try: f, catch: (cause) => fromCause(settings.dir, "write", cause) })
        const files = yield* run(() => new Files(settings, writers))
        return {
          add: (batch) => run(() => files.add(batch)),
          complete: run(() => files.complete()),
          abandon: Effect.sync(() => files.abandon())
        } satisfies EncoderSession
      })
  }))

  /** One encoder thread, started when the first writer opens and stopped with the layer. */
  static readonly worker: Layer.Layer<Encoder> = Layer.scoped(
    Encoder,
    Effect.gen(function*() {
      let thread: EncoderThread | undefined
      yield* Effect.addFinalizer(() => (thread === undefined ? Effect.void : Effect.promise(() => thread!.terminate())))
      return {
        open: (settings) =>
          Effect.suspend(() => {
            const current = thread ??= new EncoderThread()
            const id = current.nextId++
            return Effect.as(current.request<void>({ op: "open", id, settings }), {
              add: (batch) => current.request<void>({ op: "add", id, batch }, [batch.data.buffer, batch.dataOffsets.buffer, batch.dataNull.buffer]),
              complete: current.request<ReadonlyArray<CompletedFile>>({ op: "complete", id }),
              abandon: Effect.ignore(current.request<void>({ op: "abandon", id }))
            } satisfies EncoderSession)
          })
      }
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

/** The thread runs bundled (dist/encoder-worker.mjs) or, from the TypeScript sources, through tsx. */
const workerUrl = import.meta.url.endsWith(".ts")
  ? new URL("./EncoderWorker.dev.mjs", import.meta.url)
  : new URL("./encoder-worker.mjs", import.meta.url)

class EncoderThread {
  private readonly worker = new Worker(workerUrl)
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
      this.stopped ??= new SinkError({ path: "", reason: "Encode", message: `The encoder thread stopped: ${reason}. Run the export again; if it recurs, report it.` })
      for (const resume of this.waiting.values()) resume({ seq: -1, ok: false, error: this.stopped })
      this.waiting.clear()
    }
    this.worker.on("error", (error) => stop(error.message))
    this.worker.on("exit", (code) => stop(`exit code ${code}`))
  }

  request<A>(message: EncoderRequest, transfer: ReadonlyArray<ArrayBuffer | SharedArrayBuffer> = []): Effect.Effect<A, SinkError> {
    return Effect.async<A, SinkError>((resume) => {
      if (this.stopped !== undefined) return resume(Effect.fail(this.stopped))
      const seq = this.nextSeq++
      this.waiting.set(seq, (reply) =>
        resume(reply.ok ? Effect.succeed(reply.value as A) : Effect.fail(new SinkError(reply.error)))
      )
      this.worker.ref()
      this.worker.postMessage({ ...message, seq }, transfer as Array<ArrayBuffer>)
    })
  }

  async terminate(): Promise<void> {
    this.stopped ??= new SinkError({ path: "", reason: "Encode", message: "The encoder thread was stopped." })
    await this.worker.terminate()
  }
}
