/**
 * Rows column by column (DESIGN.md "Columns"), as the export collects them and the writers take them.
 * No object per row: each column is one array, and every blob's bytes are copied into one growing
 * buffer, so a batch is a few arrays that can be handed to the encoder thread (the buffer transferred,
 * not copied). The tile_* columns are derived from the partition ids by the writers.
 */
export interface RowBatch {
  readonly length: number
  readonly partition: Array<string>
  /** int64; a bigint where a value may exceed 2^53 */
  readonly partitionVersion: Array<bigint | number>
  readonly dataHandle: Array<string>
  readonly dataSize: Array<bigint | number | null>
  readonly checksum: Array<string | null>
  /** All blobs back to back: row i's bytes are `data[dataOffsets[i], dataOffsets[i + 1])`. */
  readonly data: Uint8Array
  readonly dataOffsets: Int32Array
  /** 1 where row i has no blob (a deleted partition), as opposed to an empty one. */
  readonly dataNull: Uint8Array
  /** What the rows stand for in memory and on disk before compression (see `rowBytes`). */
  readonly bytes: number
}

// Counts the fixed-width columns and bookkeeping too, so rows without data still fill a row group.
const ROW_OVERHEAD_BYTES = 96

/** Bytes row `i` of a batch stands for; drives row-group flushing and file rolling. */
export const rowBytes = (batch: RowBatch, i: number): number =>
  ROW_OVERHEAD_BYTES + batch.partition[i]!.length + batch.dataHandle[i]!.length + (batch.checksum[i]?.length ?? 0) +
  batch.dataOffsets[i + 1]! - batch.dataOffsets[i]!

/** Row `i`'s blob, as a view of the batch's buffer; null for a deleted partition. */
export const dataAt = (batch: RowBatch, i: number): Uint8Array | null =>
  batch.dataNull[i] === 1 ? null : batch.data.subarray(batch.dataOffsets[i]!, batch.dataOffsets[i + 1]!)

const MIN_CAPACITY = 64 * 1024
const MAX_BYTES = 2 ** 31 - 1

/** Collects rows one by one into a batch; `take` hands the batch over and starts an empty one. */
export class RowBatchBuilder {
  /** `capacity`: the blob bytes a batch is expected to reach, allocated at once. */
  constructor(private readonly capacity = MIN_CAPACITY) {}

  private partition: Array<string> = []
  private partitionVersion: Array<bigint | number> = []
  private dataHandle: Array<string> = []
  private dataSize: Array<bigint | number | null> = []
  private checksum: Array<string | null> = []
  private data = new Uint8Array(0)
  private dataEnd = 0
  private offsets: Array<number> = [0]
  private nulls: Array<number> = []
  private byteCount = 0

  get length(): number {
    return this.partition.length
  }

  /** See RowBatch.bytes. */
  get bytes(): number {
    return this.byteCount
  }

  add(
    partition: string,
    partitionVersion: bigint | number,
    dataHandle: string,
    dataSize: bigint | number | null,
    checksum: string | null,
    data: Uint8Array | null
  ): void {
    const size = data?.byteLength ?? 0
    if (this.dataEnd + size > this.data.byteLength) this.grow(this.dataEnd + size)
    if (data !== null) this.data.set(data, this.dataEnd)
    this.dataEnd += size
    this.partition.push(partition)
    this.partitionVersion.push(partitionVersion)
    this.dataHandle.push(dataHandle)
    this.dataSize.push(dataSize)
    this.checksum.push(checksum)
    this.offsets.push(this.dataEnd)
    this.nulls.push(data === null ? 1 : 0)
    this.byteCount += ROW_OVERHEAD_BYTES + partition.length + dataHandle.length + (checksum?.length ?? 0) + size
  }

  take(): RowBatch {
    // A batch taken early would carry the unused part of its buffer along.
    const data = this.dataEnd * 2 < this.data.byteLength
      ? this.data.slice(0, this.dataEnd)
      : this.data.subarray(0, this.dataEnd)
    const batch: RowBatch = {
      length: this.partition.length,
      partition: this.partition,
      partitionVersion: this.partitionVersion,
      dataHandle: this.dataHandle,
      dataSize: this.dataSize,
      checksum: this.checksum,
      data,
      dataOffsets: Int32Array.from(this.offsets),
      dataNull: Uint8Array.from(this.nulls),
      bytes: this.byteCount
    }
    this.partition = []
    this.partitionVersion = []
    this.dataHandle = []
    this.dataSize = []
    this.checksum = []
    this.data = new Uint8Array(0)
    this.dataEnd = 0
    this.offsets = [0]
    this.nulls = []
    this.byteCount = 0
    return batch
  }

  private grow(needed: number): void {
    if (needed > MAX_BYTES) throw new RangeError("a batch cannot hold more than 2 GiB of blobs; write smaller batches")
    const next = new Uint8Array(Math.min(MAX_BYTES, Math.max(this.capacity, needed, this.data.byteLength * 2)))
    next.set(this.data.subarray(0, this.dataEnd))
    this.data = next
  }
}

/**
 * A batch of one row whose buffer is the blob's own when the blob owns all of it (a large blob
 * received into a buffer of its size): no copy, and handing the batch to the encoder thread moves it.
 * A blob that is a view of a larger buffer is copied, so that moving the batch moves only its bytes.
 */
export const singleRow = (
  partition: string,
  partitionVersion: bigint | number,
  dataHandle: string,
  dataSize: bigint | number | null,
  checksum: string | null,
  data: Uint8Array
): RowBatch => ({
  length: 1,
  partition: [partition],
  partitionVersion: [partitionVersion],
  dataHandle: [dataHandle],
  dataSize: [dataSize],
  checksum: [checksum],
  data: data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice(),
  dataOffsets: Int32Array.of(0, data.byteLength),
  dataNull: Uint8Array.of(0),
  bytes: ROW_OVERHEAD_BYTES + partition.length + dataHandle.length + (checksum?.length ?? 0) + data.byteLength
})

/** A batch of the given rows (tests, tools). */
export const batchOf = (
  rows: ReadonlyArray<{
    readonly partition: string
    readonly partitionVersion: bigint | number
    readonly dataHandle: string
    readonly dataSize: bigint | number | null
    readonly checksum: string | null
    readonly data: Uint8Array | null
  }>
): RowBatch => {
  const builder = new RowBatchBuilder()
  for (const r of rows) builder.add(r.partition, r.partitionVersion, r.dataHandle, r.dataSize, r.checksum, r.data)
  return builder.take()
}
