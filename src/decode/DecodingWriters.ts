import type { Writers } from "../sinks/Files.ts"
import type { FileFormat } from "../sinks/WrittenFile.ts"
import { type DecodeCounts, type DecodedBatch, type DecodeFailure, decoderOf, type DecodeSettings } from "./Decoder.ts"
import { MAX_REPORTED_FAILURES } from "./Shared.ts"

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

/** The file writers of one decoding export writer (a part), and what they decoded so far. */
export interface DecodingWriters {
  readonly factories: Writers
  readonly decoded: () => DecodeCounts
}

/**
 * The decoding writers of one export writer (a part), each format loaded only when asked for. With
 * both formats every row group is decoded once per format; only the first format's count.
 */
export const decodingWriters = async (
  formats: ReadonlyArray<FileFormat>,
  settings: DecodeSettings
): Promise<DecodingWriters> => {
  const decoder = decoderOf(settings.content, settings.options)
  const tally = new Tally()
  const report = (format: FileFormat) => (format === formats[0] ? tally.add : undefined)
  const factories: Writers = {}
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
