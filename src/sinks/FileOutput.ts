import { createHash, type Hash } from "node:crypto"
import * as fs from "node:fs"

/**
 * A file written front to back with blocking writes, hashing (sha256) and counting the bytes as they go.
 * Writes are blocking on purpose: the encoders are synchronous, and a write into the page cache
 * costs less than a round trip through the event loop.
 */
export class FileOutput {
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
