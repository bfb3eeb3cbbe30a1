import { createHash, type Hash } from "node:crypto"
import type { ByteOutput, Landing } from "./FileOutput.ts"
import { SinkFailure, type SinkFailureFields } from "./SinkFailure.ts"

/**
 * A file streamed into an object store as it is written: bytes are copied into parts of PART_BYTES,
 * each sent (an S3 multipart upload's part, an Azure block) while the encoder goes on. Nothing is
 * visible under the file's key until the parts are committed when the file is published; a file
 * smaller than one part is stored whole with one request when it closes. Parts in flight on this
 * thread, of every store, are bounded by `backlog()`, which the encoder awaits between batches:
 * never more than a few parts in memory. The stores' outputs (S3Output, AzureOutput) say how a part
 * is sent, how a small file is stored and what committing the parts takes.
 */

/** S3 parts must be at least 5 MiB (but the last); 8 MiB parts allow 80 GB files in 10,000 parts (Azure: 400 GB in 50,000 blocks). */
export const PART_BYTES = 8 * 1024 * 1024
/** Part bytes sending at once on this thread before writers wait. */
const MAX_IN_FLIGHT = 4 * PART_BYTES

let inFlight = 0
const waiting: Array<() => void> = []
const released = (bytes: number) => {
  inFlight -= bytes
  if (inFlight <= MAX_IN_FLIGHT) { for (const resume of waiting.splice(0)) resume() }
}

/** A promise to await before more bytes are written when uploads are behind; undefined when they are not. */
export const backlog = (): Promise<void> | undefined =>
  inFlight <= MAX_IN_FLIGHT ? undefined : new Promise<void>((resume) => waiting.push(resume))

export abstract class PartedOutput<Part> implements ByteOutput {
  private readonly hash: Hash = createHash("sha256")
  private written = 0
  private part = Buffer.allocUnsafe(PART_BYTES)
  private filled = 0
  private readonly parts: Array<Promise<Part>> = []
  private failure: SinkFailure | undefined
  private closed = false
  private abandoned = false

  constructor(
    /** The object's URL, for messages. */
    readonly path: string
  ) {}

  /** Sends part `number` (from 1) of the file. */
  protected abstract sendPart(number: number, body: Uint8Array): Promise<Part>
  /** Stores a file of less than one part whole under its key (visible at once: it is complete). */
  protected abstract storeWhole(body: Uint8Array): Promise<Landing>
  /** What committing the sent parts takes (done when the file is published). */
  protected abstract landing(parts: ReadonlyArray<Part>): Promise<Landing>
  /** Gives up the sent parts, best effort; never throws. */
  protected abstract discard(parts: Promise<unknown>): void
  /** What a failed request of the store means. */
  protected abstract describe(cause: unknown): SinkFailureFields

  get bytes(): number {
    return this.written
  }

  write(chunk: Uint8Array): void {
    if (this.failure !== undefined) throw this.failure
    if (this.closed) throw new Error(`${this.path} is already closed`)
    this.hash.update(chunk)
    this.written += chunk.byteLength
    // Copied: writers reuse their buffers once write returns.
    for (let done = 0; done < chunk.byteLength;) {
      const n = Math.min(chunk.byteLength - done, PART_BYTES - this.filled)
      this.part.set(chunk.subarray(done, done + n), this.filled)
      this.filled += n
      done += n
      if (this.filled === PART_BYTES) this.startPart()
    }
  }

  close(): string {
    this.closed = true
    return this.hash.digest("hex")
  }

  async settle(): Promise<Landing> {
    if (this.failure !== undefined) throw this.failure
    if (this.parts.length === 0) return this.guard(this.storeWhole(this.part.subarray(0, this.filled)))
    if (this.filled > 0) this.startPart()
    const parts = await Promise.all(this.parts)
    if (this.failure !== undefined) throw this.failure
    return this.guard(this.landing(parts))
  }

  abandon(): void {
    this.closed = true
    if (this.abandoned) return
    this.abandoned = true
    if (this.parts.length > 0) this.discard(Promise.allSettled(this.parts))
  }

  private startPart(): void {
    const body = this.part.subarray(0, this.filled)
    this.part = Buffer.allocUnsafe(PART_BYTES)
    this.filled = 0
    const size = body.byteLength
    inFlight += size
    const sent = this.guard(this.sendPart(this.parts.length + 1, body)).finally(() => released(size))
    // Failures surface at the next write or at settle; never unhandled.
    sent.catch(() => undefined)
    this.parts.push(sent)
  }

  /** A request whose failure fails the file (the client has retried what can be retried). */
  protected guard<O>(request: Promise<O>): Promise<O> {
    return request.catch((cause: unknown) => {
      if (this.failure === undefined) {
        const { path, reason, message } = this.describe(cause)
        this.failure = new SinkFailure(path, reason, message)
      }
      throw this.failure
    })
  }
}
