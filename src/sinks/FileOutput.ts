import { createHash, type Hash } from "node:crypto"
import * as fs from "node:fs"

/**
 * Where a file writer's bytes go, synchronously (the encoders are synchronous): a local file
 * (`FileOutput`) or an object-store upload (`PartedOutput`: `S3Output`, `AzureOutput`). `settle` is
 * awaited once per finished file.
 */
export interface ByteOutput {
  /** What messages name: the file, or the object's URL. */
  readonly path: string
  readonly bytes: number
  write(chunk: Uint8Array): void
  /** No more writes; returns the sha256 (hex) of everything written. */
  close(): string
  /** Gives the file up as it is; never throws. */
  abandon(): void
  /** After `close`: the bytes are durable where they went, and what making them visible takes. */
  settle(): Promise<Landing>
}

/**
 * What a closed file needs to become visible under its final name: a rename of the local `.partial`
 * file, the completion of a multipart upload (S3, GCS), the commit of its staged blocks (Azure), or
 * nothing (an object stored whole).
 */
export type Landing =
  | { readonly _tag: "Partial"; readonly partialPath: string }
  | {
    readonly _tag: "Upload"
    readonly uploadId: string
    readonly parts: ReadonlyArray<{ readonly PartNumber: number; readonly ETag: string }>
  }
  | { readonly _tag: "Blocks"; readonly blockIds: ReadonlyArray<string> }
  | { readonly _tag: "Stored"; readonly etag: string | undefined }

/**
 * A file written front to back with blocking writes, hashing (sha256) and counting the bytes as they go.
 * Writes are blocking on purpose: the encoders are synchronous, and a write into the page cache
 * costs less than a round trip through the event loop.
 */
export class FileOutput implements ByteOutput {
  private readonly hash: Hash = createHash("sha256")
  private fd: number | undefined
  private written = 0

  private constructor(
    readonly path: string,
    fd: number
  ) {
    this.fd = fd
  }

  /** Creates or truncates `path` (a leftover `.partial` of a killed run is overwritten). */
  static create(path: string): FileOutput {
    return new FileOutput(path, fs.openSync(path, "w"))
  }

  get bytes(): number {
    return this.written
  }

  write(chunk: Uint8Array): void {
    if (this.fd === undefined) throw new Error(`${this.path} is already closed`)
    let done = 0
    while (done < chunk.byteLength) {
      done += fs.writeSync(this.fd, chunk, done, chunk.byteLength - done)
    }
    this.hash.update(chunk)
    this.written += chunk.byteLength
  }

  /** Closes the file and returns the sha256 (hex) of everything written. */
  close(): string {
    const fd = this.takeDescriptor()
    if (fd !== undefined) fs.closeSync(fd)
    return this.hash.digest("hex")
  }

  /** Flushes the closed file to disk; it keeps its (`.partial`) name until renamed. */
  settle(): Promise<Landing> {
    const fd = fs.openSync(this.path, "r+")
    try {
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    return Promise.resolve({ _tag: "Partial", partialPath: this.path })
  }

  /** Releases the descriptor, ignoring errors: the file is being given up and stays as it is. */
  abandon(): void {
    const fd = this.takeDescriptor()
    if (fd === undefined) return
    try {
      fs.closeSync(fd)
    } catch {
      // nothing more can be done for a file that is left behind as .partial
    }
  }

  private takeDescriptor(): number | undefined {
    const fd = this.fd
    this.fd = undefined
    return fd
  }
}
