import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { EncoderError, EncoderWorkload } from "../encoder/Encoder.ts"
import * as RollingWriter from "../encoder/RollingWriter.ts"
import type { Destination } from "../sinks/Destination.ts"
import { type RowBatch, RowBatchBuilder, singleRow } from "../sinks/RowBatch.ts"
import { CrashProbe, type CrashProbeShape } from "../telemetry/CrashProbe.ts"
import { type Checkpoint, checkpointKey } from "./Checkpoints.ts"
import { type Decoding, partSummary } from "./Decoding.ts"
import { writeJson } from "./Json.ts"

/**
 * The files of one part being written (`PartWriter`); what a finished part leaves is in Checkpoints.ts.
 */

export interface PartWriterOptions extends Omit<RollingWriter.Options, "dir" | "shard" | "decode"> {
  /** Rows collected before they are handed to the encoder. */
  readonly batchBytes: number
  /** Decode the blobs (`--decode`); absent: the raw columns. */
  readonly decoding?: Decoding | undefined
  /** The region of a multi-region catalog the part is read from, for its checkpoint. */
  readonly region?: string | undefined
  /**
   * Rows of an Iceberg table: a deleted partition is no row; its id goes to the checkpoint (the
   * commit position-deletes its old row).
   */
  readonly tableRows?: boolean | undefined
}

/** Rows whose blob is at least this large go to the encoder as a batch of their own, without a copy. */
export const LARGE_ROW_BYTES = 1024 * 1024

/**
 * The files of one part being written: rows are collected synchronously (the fetch loop calls `add`
 * per blob) into batches that `write` hands to the encoder; `finish` writes the checkpoint.
 */
export class PartWriter {
  private readonly batch: RowBatchBuilder
  /** Table rows: the deleted partitions listed. */
  private readonly deletedIds: Array<string> | undefined
  partitions = 0
  deleted = 0
  bytes = 0

  private constructor(
    readonly part: number,
    private readonly dest: Destination,
    private readonly dir: string,
    /** The part's files, being opened while the first rows are fetched. */
    private readonly writer: Effect.Effect<RollingWriter.RollingWriter, EncoderError>,
    private readonly options: PartWriterOptions,
    private readonly probe: CrashProbeShape
  ) {
    // Room for a full batch and the blob that fills it, so the buffer rarely grows.
    this.batch = new RowBatchBuilder(options.batchBytes + 64 * 1024)
    this.deletedIds = options.tableRows === true ? [] : undefined
  }

  /**
   * `run` names this run's files apart from any other run's. Returns at once: the files are opened
   * meanwhile (on the encoder thread, starting it takes ~175 ms), so the part's first blob requests do
   * not wait for them; an error opening them fails the first `write` or `finish`.
   */
  static open = (
    dest: Destination,
    dir: string,
    part: number,
    run: string,
    options: PartWriterOptions,
    workload: EncoderWorkload
  ) =>
    Effect.zipWith(
      Effect.forkScoped(RollingWriter.make({
        ...options,
        dir: dest.at(dir),
        shard: `${part}-${run}`,
        workload,
        decode: options.decoding?.settings
      })),
      CrashProbe,
      (opening, probe) => new PartWriter(part, dest, dir, Fiber.join(opening), options, probe)
    )

  add(
    partition: string,
    version: number,
    dataHandle: string,
    dataSize: number | null,
    checksum: string | null,
    data: Uint8Array | null
  ): void {
    if (data === null && this.deletedIds !== undefined) {
      // An Iceberg table's deleted partition is no row: the commit position-deletes its old one.
      this.partitions++
      this.deleted++
      this.deletedIds.push(partition)
      return
    }
    this.batch.add(partition, version, dataHandle, dataSize, checksum, data)
    this.count(data)
  }

  /** A row of a large blob, as a batch of its own whose buffer is the blob's (no copy where the blob owns its buffer). */
  single(
    partition: string,
    version: number,
    dataHandle: string,
    dataSize: number | null,
    checksum: string | null,
    data: Uint8Array
  ): RowBatch {
    this.count(data)
    return singleRow(partition, version, dataHandle, dataSize, checksum, data)
  }

  /** Rows collected and not yet taken. */
  get collected(): number {
    return this.batch.length
  }

  private count(data: Uint8Array | null): void {
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
    return this.writer.pipe(
      Effect.flatMap((writer) => writer.write(batch)),
      Effect.map(() => this.probe.reached("written"))
    )
  }

  /** Completes the part's files and makes them visible, then records them in its checkpoint. */
  readonly finish: Effect.Effect<Checkpoint, EncoderError> = Effect.gen(this, function*() {
    if (this.batch.length > 0) yield* this.write(this.take())
    const writer = yield* this.writer
    const files = yield* writer.finish
    const identity = this.options.decoding?.identity
    const decoded = writer.decoded()
    const checkpoint: Checkpoint = {
      part: this.part,
      files: files.map((f) => ({ ...f })),
      partitions: this.partitions,
      deleted: this.deleted,
      bytes: this.bytes,
      ...(this.options.region === undefined ? {} : { region: this.options.region }),
      ...(identity === undefined || decoded === undefined
        ? {}
        : { decode: partSummary(identity, decoded, this.partitions, this.deleted) }),
      ...(this.deletedIds === undefined ? {} : { deletedPartitions: this.deletedIds })
    }
    yield* writeJson(this.dest, checkpointKey(this.dir, this.part), checkpoint)
    this.probe.reached("checkpoint")
    return checkpoint
  })
}
