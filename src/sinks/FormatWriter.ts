import { type ByteOutput, FileOutput } from "./FileOutput.ts"
import type { FieldIds } from "./ParquetFieldIds.ts"
import { checkRows, type Slice } from "./Row.ts"
import { type RowBatch, rowBytes } from "./RowBatch.ts"
import type { ColumnStats } from "./WrittenFile.ts"

export interface FormatWriterOptions {
  readonly path: string
  /** Where the bytes go; default a local file at `path`. */
  readonly output?: ByteOutput
  readonly heretile: boolean
  /** file key-value metadata (Parquet footer, Arrow schema metadata) */
  readonly metadata: Readonly<Record<string, string>>
  /** buffered row bytes that make one Parquet row group / Arrow record batch */
  readonly rowGroupBytes: number
  readonly createdBy: string
  /** Parquet: the field id of each column (Iceberg tables); the file's column statistics come back with it. */
  readonly fieldIds?: FieldIds | undefined
}

export interface WrittenContent {
  readonly rows: number
  readonly bytes: number
  readonly sha256: string
  /** Files written with field ids: their columns' statistics. */
  readonly columns?: ReadonlyArray<ColumnStats> | undefined
}

/**
 * One output file being written, synchronously (the Effect wrapping lives in RollingWriter, the thread
 * in Encoder). Rows are buffered as slices of the batches they came in, and written as one row group
 * (record batch) per `rowGroupBytes`, so memory holds about one row group.
 */
export abstract class FormatWriter {
  readonly output: ByteOutput
  private pending: Array<Slice> = []
  private bufferedBytes = 0
  private flushedRowBytes = 0
  private rowCount = 0

  constructor(protected readonly options: FormatWriterOptions) {
    this.output = options.output ?? FileOutput.create(options.path)
  }

  protected abstract writeRowGroup(rows: ReadonlyArray<Slice>): void
  protected abstract writeFooter(): void
  /** After the footer: the columns' statistics, where the format keeps them. */
  protected columnStats(): ReadonlyArray<ColumnStats> | undefined {
    return undefined
  }

  /** Rows in the file (a decoding writer writes rows of its own: features, exploded elements). */
  get rows(): number {
    return this.rowCount
  }

  /** Row bytes buffered for the next row group. */
  get buffered(): number {
    return this.bufferedBytes
  }

  /** Row bytes that fill the row group being buffered. */
  get groupRoom(): number {
    return this.options.rowGroupBytes - this.bufferedBytes
  }

  /** Bytes on disk per row byte written so far (1 before the first row group). */
  get ratio(): number {
    return this.flushedRowBytes > 0 ? this.output.bytes / this.flushedRowBytes : 1
  }

  /** Bytes on disk plus the expected size of the buffered rows, at the compression seen so far. */
  get estimatedBytes(): number {
    return this.output.bytes + Math.ceil(this.bufferedBytes * this.ratio)
  }

  /** Adds rows `from`..`to` of `batch`; `bytes` is what they stand for (sum of rowBytes). */
  add(batch: RowBatch, from: number, to: number, bytes: number): void {
    if (to <= from) return
    checkRows(batch, from, to)
    this.pending.push({ batch, from, to })
    this.bufferedBytes += bytes
    this.rowCount += to - from
    if (this.bufferedBytes >= this.options.rowGroupBytes) this.flush()
  }

  /** Writes the buffered rows and the footer, closes the file. */
  finish(): WrittenContent {
    this.flush()
    this.writeFooter()
    const sha256 = this.output.close()
    const columns = this.columnStats()
    return { rows: this.rows, bytes: this.output.bytes, sha256, ...(columns === undefined ? {} : { columns }) }
  }

  /** Closes the file as it is (incomplete). Never throws. */
  abandon(): void {
    this.pending = []
    this.output.abandon()
  }

  /** Writes the buffered rows as a row group now. */
  flush(): void {
    if (this.pending.length === 0) return
    const rows = this.pending
    this.pending = []
    this.writeRowGroup(rows)
    this.flushedRowBytes += this.bufferedBytes
    this.bufferedBytes = 0
  }
}

/** Sum of rowBytes of rows `from`..`to`. */
export const rangeBytes = (batch: RowBatch, from: number, to: number): number => {
  let bytes = 0
  for (let i = from; i < to; i++) bytes += rowBytes(batch, i)
  return bytes
}
