import type { S3Client } from "@aws-sdk/client-s3"
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand
} from "@aws-sdk/client-s3"
import { createHash, type Hash } from "node:crypto"
import type { ByteOutput, Landing } from "./FileOutput.ts"
import { describeStoreFailure } from "./ObjectStore.ts"
import { SinkFailure } from "./SinkFailure.ts"

/**
 * A file streamed into an object store as it is written: bytes are copied into parts of PART_BYTES,
 * each uploaded (a multipart upload under the file's final key) while the encoder goes on. Nothing is
 * visible under the key until the upload is completed when the file is published; a file smaller
 * than one part is stored with one PUT when it closes. Uploads in flight on this thread are bounded
 * by `backlog()`, which the encoder awaits between batches: never more than a few parts in memory.
 */

/** S3 parts must be at least 5 MiB (but the last); 8 MiB parts allow 80 GB files in 10,000 parts. */
export const PART_BYTES = 8 * 1024 * 1024
/** Part bytes uploading at once on this thread before writers wait. */
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

export class S3Output implements ByteOutput {
  private readonly hash: Hash = createHash("sha256")
  private written = 0
  private part = Buffer.allocUnsafe(PART_BYTES)
  private filled = 0
  private upload: Promise<string> | undefined
  private readonly parts: Array<Promise<{ PartNumber: number; ETag: string }>> = []
  private failure: SinkFailure | undefined
  private closed = false
  private abandoned = false

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly key: string,
    /** The object's URL, for messages. */
    readonly path: string
  ) {}

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
      if (this.filled === PART_BYTES) this.sendPart()
    }
  }

  close(): string {
    this.closed = true
    return this.hash.digest("hex")
  }

  async settle(): Promise<Landing> {
    if (this.failure !== undefined) throw this.failure
    if (this.upload === undefined) {
      const body = this.part.subarray(0, this.filled)
      const stored = await this.send(() =>
        this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.key, Body: body }))
      )
      return { _tag: "Stored", etag: stored.ETag }
    }
    if (this.filled > 0 || this.parts.length === 0) this.sendPart()
    const uploadId = await this.upload
    const parts = await Promise.all(this.parts)
    if (this.failure !== undefined) throw this.failure
    return { _tag: "Upload", uploadId, parts }
  }

  abandon(): void {
    this.closed = true
    if (this.abandoned) return
    this.abandoned = true
    const upload = this.upload
    if (upload === undefined) return
    // Best effort: what is left is aborted by the next commit (or the bucket's lifecycle rule).
    void Promise.allSettled(this.parts).then(() => upload).then(
      (UploadId) => this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId })),
      () => undefined
    ).catch(() => undefined)
  }

  private sendPart(): void {
    const body = this.part.subarray(0, this.filled)
    this.part = Buffer.allocUnsafe(PART_BYTES)
    this.filled = 0
    this.upload ??= this.send(() =>
      this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.key }))
    ).then((r) => r.UploadId!)
    const PartNumber = this.parts.length + 1
    const size = body.byteLength
    inFlight += size
    const sent = this.upload
      .then((UploadId) =>
        this.send(() =>
          this.client.send(
            new UploadPartCommand({ Bucket: this.bucket, Key: this.key, UploadId, PartNumber, Body: body })
          )
        )
      )
      .then((r) => ({ PartNumber, ETag: r.ETag! }))
      .finally(() => released(size))
    // Failures surface at the next write or at settle; never unhandled.
    sent.catch(() => undefined)
    this.parts.push(sent)
  }

  /** A request whose failure fails the file (the client has retried what can be retried). */
  private send<O>(request: () => Promise<O>): Promise<O> {
    return request().catch((cause: unknown) => {
      if (this.failure === undefined) {
        const { path, reason, message } = describeStoreFailure(this.path, "upload", cause)
        this.failure = new SinkFailure(path, reason, message)
      }
      throw this.failure
    })
  }
}
