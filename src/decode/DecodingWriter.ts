import type { Writers } from "../sinks/Files.ts"
import { FormatWriter, type FormatWriterOptions } from "../sinks/FormatWriter.ts"
import type { Slice } from "../sinks/Row.ts"
import type { FileFormat } from "../sinks/WrittenFile.ts"
import type { ColumnBatch } from "./Columns.ts"
import {
  type DecodeCounts,
  type DecodedBatch,
  type DecodeFailure,
  type Decoder,
  decoderOf,
  type DecodeSettings
} from "./Decoder.ts"
import { GeoStats } from "./GeoJson.ts"
import { MAX_REPORTED_FAILURES } from "./Shared.ts"

/**
 * The file writers of decoding exports: rows come in as the export collected them (RowBatch slices,
 * buffered and rolled by FormatWriter exactly as raw rows are) and are decoded one row group at a
 * time, just before it is encoded, so decoded values live only while their row group is written.
 * Decoding happens where encoding happens: on the encoder thread, or inline (Encoder.ts).
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

/** Adds up what the decoded row groups of one writer reported. */
class Tally {
  rows = 0
  failed = 0
  readonly failures: Array<DecodeFailure> = []

  readonly add = (batch: DecodedBatch): void => {
    this.rows += batch.rows
    this.failed += batch.failures.length
    for (const f of batch.failures) if (this.failures.length < MAX_REPORTED_FAILURES) this.failures.push(f)
  }

  counts(): DecodeCounts {
    return { rows: this.rows, failed: this.failed, failures: [...this.failures] }
  }
}

/**
 * The decoding writers of one export writer (a part), each format loaded only when asked for. With
 * both formats every row group is decoded once per format; only the first format's count.
 */
export const decodingWriters = async (
  formats: ReadonlyArray<FileFormat>,
  settings: DecodeSettings
): Promise<Writers> => {
  const decoder = decoderOf(settings.content, settings.options)
  const tally = new Tally()
  const report = (format: FileFormat) => (format === formats[0] ? tally.add : undefined)
  const factories: Writers["factories"] = {}
  if (formats.includes("parquet")) {
    const [{ DecodedParquetWriter }, { parquetCodec }] = await Promise.all([
      import("./DecodedParquet.ts"),
      import("../sinks/ParquetCodecs.ts")
    ])
    factories.parquet = (options, compression) =>
      new DecodedParquetWriter(options, parquetCodec(compression), decoder, report("parquet"))
  }
  if (formats.includes("arrow")) {
    const { DecodedArrowWriter } = await import("./DecodedArrow.ts")
    factories.arrow = (options) => new DecodedArrowWriter(options, decoder, report("arrow"))
  }
  return { factories, decoded: () => tally.counts() }
}
