import { RecordBatchFileWriter, type Schema } from "apache-arrow"
import { FileByteQueue } from "../sinks/ArrowFileWriter.ts"
import type { FormatWriterOptions } from "../sinks/FormatWriter.ts"
import { arrowRecordBatch, arrowSchema } from "./ArrowColumns.ts"
import type { ColumnBatch } from "./Columns.ts"
import type { DecodedBatch, Decoder } from "./Decoder.ts"
import { DecodingWriter } from "./DecodingWriter.ts"

/** An Arrow IPC file of decoded rows (structs and lists; the geometry column marked `geoarrow.wkb`). */
export class DecodedArrowWriter extends DecodingWriter {
  private readonly schema: Schema
  private readonly writer = new RecordBatchFileWriter()

  constructor(options: FormatWriterOptions, decoder: Decoder, onDecoded: ((batch: DecodedBatch) => void) | undefined) {
    super(options, decoder, onDecoded)
    this.schema = arrowSchema(decoder.columns, new Map(Object.entries(options.metadata)))
    this.writer.reset(new FileByteQueue(this.output), this.schema)
  }

  protected writeColumns(batch: ColumnBatch): void {
    this.writer.write(arrowRecordBatch(this.schema, batch))
  }

  protected writeFooter(): void {
    this.writer.close()
  }
}
