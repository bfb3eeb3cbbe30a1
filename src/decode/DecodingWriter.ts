import { FormatWriter, type FormatWriterOptions } from "../sinks/FormatWriter.ts"
import type { Slice } from "../sinks/Row.ts"
import type { ColumnBatch } from "./Columns.ts"
import type { DecodedBatch, Decoder } from "./Decoder.ts"
import { GeoStats } from "./GeoJson.ts"

/**
 * The file writers of decoding exports: rows come in as the export collected them (RowBatch slices,
 * buffered and rolled by FormatWriter exactly as raw rows are) and are decoded one row group at a
 * time, just before it is encoded, so decoded values live only while their row group is written.
 * Decoding happens where encoding happens: on the encoder thread, or inline (encoder/Encoder.ts).
 * DecodingWriters.ts makes them.
 */

export abstract class DecodingWriter extends FormatWriter {
  /** The file's geometries so far: its GeoParquet metadata covers every row written to it. */
  protected readonly geo = new GeoStats()
  private written = 0

  constructor(
    options: FormatWriterOptions,
    protected readonly decoder: Decoder,
    private readonly onDecoded: ((batch: DecodedBatch) => void) | undefined
  ) {
    super(options)
  }

  /** Writes one row group (record batch) of decoded rows. */
  protected abstract writeColumns(batch: ColumnBatch): void

  override get rows(): number {
    return this.written
  }

  protected writeRowGroup(rows: ReadonlyArray<Slice>): void {
    const decoded = this.decoder.decode(rows, this.geo)
    this.onDecoded?.(decoded)
    this.written += decoded.rows
    if (decoded.rows > 0) this.writeColumns(decoded)
  }
}
