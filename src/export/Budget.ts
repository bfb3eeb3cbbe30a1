import * as os from "node:os"
import type { Partition } from "../domain/Partition.ts"

/**
 * The byte budget of an export (`--buffer-bytes`): the blob bytes it holds at once, whether in
 * flight (counted at the size the listing gives, from the moment the request starts), in rows being
 * collected, or in batches waiting for the encoder. A download starts only while the budget has room
 * for it, however high the concurrency limit is; a blob larger than the whole budget still starts
 * when nothing else is in flight or waiting, and goes alone. Plain numbers, updated per blob and per
 * batch by the fetch stage and the writer (Fetch.ts, Export.ts).
 *
 * Besides the budget, the encoder holds the row group it is writing and its copy of a large value
 * in a Parquet page (src/sinks), and the process its code and heap: docs/exporting.md#large-blobs
 * says what memory to give a container.
 */

const MiB = 1024 * 1024

/** The default budget's bounds: a quarter of the memory the process may use, within these. */
const DEFAULT_MIN = 16 * MiB
const DEFAULT_MAX = 256 * MiB

/** A blob whose size the listing does not give counts as this much until it arrives. */
export const UNKNOWN_BLOB_BYTES = 256 * 1024

/** Batches waiting for the encoder beyond this (or two of the largest rows, if more) hold new downloads back. */
const QUEUED_BYTES = 4 * MiB

/**
 * A quarter of the memory this process may use (the container's limit where there is one, else the
 * machine's memory), at least 16 MiB and at most 256 MiB: enough for a few hundred blobs of a
 * megabyte in flight, and far more than small blobs need.
 */
export const defaultBufferBytes = (): number => {
  const constrained = typeof process.constrainedMemory === "function" ? process.constrainedMemory() : 0
  const memory = constrained > 0 ? Math.min(constrained, os.totalmem()) : os.totalmem()
  return Math.max(DEFAULT_MIN, Math.min(DEFAULT_MAX, Math.floor(memory / 4)))
}

/** What a listed partition's blob counts as while it is being fetched. */
export const reservedFor = (partition: Partition): number => partition.dataSize ?? UNKNOWN_BLOB_BYTES

export class ByteBudget {
  /** Blob bytes held: downloads started and not yet arrived (as reserved), rows not yet taken by the encoder. */
  held = 0
  /** Of `held`, the rows in batches waiting for the encoder. */
  queued = 0
  /** The most `held` has been: what the run needed of its budget (the run report's `buffer.peak`). */
  peak = 0
  /** The largest row so far: the encoder's queue may hold two of them, so it never waits for the network. */
  private largestRow = 0

  constructor(readonly limit: number) {}

  /**
   * Whether a download of `bytes` may start, given how many downloads are started and not done
   * (`started`); reserves the bytes when it may.
   */
  reserve(bytes: number, started: number): boolean {
    const alone = started === 0 && this.queued === 0
    if (!alone && (this.held + bytes > this.limit || this.queued > Math.max(QUEUED_BYTES, 2 * this.largestRow))) {
      return false
    }
    this.held += bytes
    if (this.held > this.peak) this.peak = this.held
    return true
  }

  /** A blob for which `reserved` bytes were counted arrived as a row of `bytes` (unpacked: gzip layers). */
  arrived(reserved: number, bytes: number): void {
    this.held += bytes - reserved
    if (this.held > this.peak) this.peak = this.held
    if (bytes > this.largestRow) this.largestRow = bytes
  }

  /** A download is given up (its bytes are dropped: a checksum mismatch). */
  release(bytes: number): void {
    this.held -= bytes
  }

  /** A batch with `bytes` of blob data now waits for the encoder. */
  enqueued(bytes: number): void {
    this.queued += bytes
  }

  /** The encoder took a batch with `bytes` of blob data. */
  taken(bytes: number): void {
    this.queued -= bytes
    this.held -= bytes
  }
}
