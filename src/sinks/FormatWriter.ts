import { FileOutput } from "./FileOutput.ts"
import { checkRow, rowBytes, type Row } from "./Row.ts"

export interface FormatWriterOptions {
  readonly path: string
  readonly heretile: boolean
  /** file key-value metadata (Parquet footer, Arrow schema metadata) */
  readonly metadata: Readonly<Record<string, string>>
  /** buffered row bytes that make one Parquet row group / Arrow record batch */
  readonly rowGroupBytes: number
  readonly createdBy: string
}

export interface WrittenContent {
  readonly rows: number
  readonly bytes: number
  readonly sha256: string
}

/**
 * One output file being written, synchronously (the Effect wrapping lives in RollingWriter).
 * Rows are buffered and written as one row group (record batch) per `rowGroupBytes`, so memory
 * holds about one row group.
 */
export abstract class FormatWriter {
  protected readonly output: FileOutput
  private buffered: Array<Row> = []
  private bufferedBytes = 0
  private flushedRowBytes = 0
  private rowCount = 0

  constructor(protected readonly options: FormatWriterOptions) {
    this.output = FileOutput.create(options.path)
  }

  protected abstract writeRowGroup(rows: ReadonlyArray<Row>): void
  protected abstract writeFooter(): void

  get rows(): number {
    return this.rowCount
  }

  /** Bytes on disk plus the expected size of the buffered rows, at the compression seen so far. */
  get estimatedBytes(): number {
    const ratio = this.flushedRowBytes > 0 ? this.output.bytes / this.flushedRowBytes : 1
    return this.output.bytes + Math.ceil(this.bufferedBytes * ratio)
  }

  add(row: Row): void {
    checkRow(row)
    this.buffered.push(row)
    this.bufferedBytes += rowBytes(row)
    this.rowCount++
    if (this.bufferedBytes >= this.options.rowGroupBytes) this.flush()
  }

  /** Writes the buffered rows and the footer, closes the file. */
  finish(): WrittenContent {
    this.flush()
    this.writeFooter()
    const sha256 = this.output.close()
    return { rows: this.rowCount, bytes: this.output.bytes, sha256 }
  }

  /** Closes the file as it is (incomplete). Never throws. */
  abandon(): void {
    this.buffered = []
    this.output.abandon()
  }

  private flush(): void {
    if (this.buffered.length === 0) return
    const rows = this.buffered
    this.buffered = []
    this.writeRowGroup(rows)
    this.flushedRowBytes += this.bufferedBytes
    this.bufferedBytes = 0
  }
}
