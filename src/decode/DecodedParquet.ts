import { ParquetWriter, type SchemaElement } from "hyparquet-writer"
import { columnStats } from "../sinks/ColumnStats.ts"
import type { FormatWriterOptions } from "../sinks/FormatWriter.ts"
import type { ParquetCodec } from "../sinks/ParquetCodecs.ts"
import { withFieldIds } from "../sinks/ParquetFieldIds.ts"
import { SpillingByteWriter } from "../sinks/ParquetFileWriter.ts"
import type { ColumnStats } from "../sinks/WrittenFile.ts"
import { type ColumnBatch, footerSchema, parquetColumnData, parquetSchema } from "./Columns.ts"
import type { DecodedBatch, Decoder } from "./Decoder.ts"
import { DecodingWriter } from "./DecodingWriter.ts"

/**
 * A Parquet file of decoded rows: nested columns through hyparquet-writer's Dremel encoder (explicit
 * schema with groups and 3-level lists). GeoParquet's `geo` metadata needs the bounding box and types
 * of every geometry in the file, so it goes into the footer.
 */
export class DecodedParquetWriter extends DecodingWriter {
  private readonly schema: Array<SchemaElement>
  private readonly kvMetadata: Array<{ key: string; value: string }>
  private readonly writer: ParquetWriter

  constructor(
    options: FormatWriterOptions,
    codec: ParquetCodec,
    decoder: Decoder,
    onDecoded: ((batch: DecodedBatch) => void) | undefined
  ) {
    super(options, decoder, onDecoded)
    const schema = parquetSchema(decoder.columns)
    this.schema = options.fieldIds === undefined ? schema : withFieldIds(schema, options.fieldIds)
    this.kvMetadata = Object.entries(options.metadata).map(([key, value]) => ({ key, value }))
    this.writer = new ParquetWriter({
      writer: new SpillingByteWriter(this.output),
      schema: this.schema,
      codec: codec.name,
      compressors: codec.compress === undefined ? {} : { [codec.name]: codec.compress },
      kvMetadata: this.kvMetadata,
      createdBy: options.createdBy
    })
  }

  protected writeColumns(batch: ColumnBatch): void {
    this.writer.write({ columnData: parquetColumnData(this.decoder.columns, batch), rowGroupSize: batch.rows })
  }

  protected writeFooter(): void {
    for (const [key, value] of Object.entries(this.decoder.fileMetadata(this.geo))) this.kvMetadata.push({ key, value })
    footerSchema(this.schema)
    this.writer.finish()
  }

  protected override columnStats(): ReadonlyArray<ColumnStats> | undefined {
    return this.options.fieldIds === undefined ? undefined : columnStats(this.writer)
  }
}
