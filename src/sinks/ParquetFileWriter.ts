import { ByteWriter, type ColumnSource, ParquetWriter, type SchemaElement } from "hyparquet-writer"
import { columnStats } from "./ColumnStats.ts"
import type { ByteOutput } from "./FileOutput.ts"
import { FormatWriter, type FormatWriterOptions } from "./FormatWriter.ts"
import type { ParquetCodec } from "./ParquetCodecs.ts"
import { withFieldIds } from "./ParquetFieldIds.ts"
import { gather, type Slice, tileColumns, toInt64, toNullableInt64 } from "./Row.ts"
import { dataAt } from "./RowBatch.ts"
import type { ColumnStats } from "./WrittenFile.ts"

const BUFFER_BYTES = 1 << 20

/**
 * hyparquet-writer's byte sink, spilling to the file whenever its fixed buffer fills, so the encoded
 * file never sits in memory. Large chunks (compressed pages) go straight to the file without a copy.
 */
export class SpillingByteWriter extends ByteWriter {
  constructor(private readonly output: ByteOutput) {
    super(BUFFER_BYTES)
  }

  override ensure(size: number): void {
    if (this.index + size <= this.buffer.byteLength) return
    this.spill()
    if (size > this.buffer.byteLength) super.ensure(size)
  }

  override appendBytes(value: Uint8Array): void {
    if (value.byteLength < BUFFER_BYTES / 4) return super.appendBytes(value)
    this.spill()
    this.output.write(value)
    this.offset += value.byteLength
  }

  /** Called by ParquetWriter after each row group: the group reaches the file before more rows are taken. */
  flush(): void {
    this.spill()
  }

  override finish(): void {
    this.spill()
  }

  private spill(): void {
    if (this.index === 0) return
    this.output.write(new Uint8Array(this.buffer, 0, this.index))
    this.index = 0
  }
}

const utf8 = (name: string, required: boolean): SchemaElement => ({
  name,
  type: "BYTE_ARRAY",
  converted_type: "UTF8",
  repetition_type: required ? "REQUIRED" : "OPTIONAL"
})

const parquetSchema = (heretile: boolean): Array<SchemaElement> => {
  const columns: Array<SchemaElement> = [
    utf8("partition", true),
    { name: "partition_version", type: "INT64", repetition_type: "REQUIRED" },
    utf8("data_handle", true),
    { name: "data_size", type: "INT64", repetition_type: "OPTIONAL" },
    utf8("checksum", false),
    { name: "data", type: "BYTE_ARRAY", repetition_type: "OPTIONAL" }
  ]
  if (heretile) {
    for (const name of ["tile_level", "tile_x", "tile_y"]) {
      columns.push({ name, type: "INT32", repetition_type: "OPTIONAL" })
    }
    for (const name of ["tile_west", "tile_south", "tile_east", "tile_north"]) {
      columns.push({ name, type: "DOUBLE", repetition_type: "OPTIONAL" })
    }
  }
  return [{ name: "root", num_children: columns.length }, ...columns]
}

const columnData = (rows: ReadonlyArray<Slice>, heretile: boolean): Array<ColumnSource> => {
  const partitions = gather(rows, (b, i) => b.partition[i]!)
  const columns: Array<ColumnSource> = [
    { name: "partition", data: partitions },
    { name: "partition_version", data: gather(rows, (b, i) => toInt64(b.partitionVersion[i]!)) },
    // Handles, checksums and blobs are unique and random-looking: min/max statistics would prune
    // nothing and only grow the footer, and a dictionary never pays off for blobs.
    { name: "data_handle", data: gather(rows, (b, i) => b.dataHandle[i]!), statistics: false },
    { name: "data_size", data: gather(rows, (b, i) => toNullableInt64(b.dataSize[i]!)) },
    { name: "checksum", data: gather(rows, (b, i) => b.checksum[i]!), statistics: false },
    { name: "data", data: gather(rows, dataAt), encoding: "PLAIN", statistics: false }
  ]
  if (heretile) {
    const tiles = tileColumns(partitions)
    columns.push(
      { name: "tile_level", data: tiles.level },
      { name: "tile_x", data: tiles.x },
      { name: "tile_y", data: tiles.y },
      { name: "tile_west", data: tiles.west },
      { name: "tile_south", data: tiles.south },
      { name: "tile_east", data: tiles.east },
      { name: "tile_north", data: tiles.north }
    )
  }
  return columns
}

export interface ParquetFileWriterOptions extends FormatWriterOptions {
  readonly codec: ParquetCodec
}

export class ParquetFileWriter extends FormatWriter {
  private readonly writer: ParquetWriter

  constructor(options: ParquetFileWriterOptions) {
    super(options)
    const { codec, fieldIds } = options
    const schema = parquetSchema(options.heretile)
    this.writer = new ParquetWriter({
      writer: new SpillingByteWriter(this.output),
      schema: fieldIds === undefined ? schema : withFieldIds(schema, fieldIds),
      codec: codec.name,
      compressors: codec.compress === undefined ? {} : { [codec.name]: codec.compress },
      kvMetadata: Object.entries(options.metadata).map(([key, value]) => ({ key, value })),
      createdBy: options.createdBy
    })
  }

  protected writeRowGroup(rows: ReadonlyArray<Slice>): void {
    const columns = columnData(rows, this.options.heretile)
    this.writer.write({ columnData: columns, rowGroupSize: columns[0]!.data.length })
  }

  protected writeFooter(): void {
    this.writer.finish()
  }

  protected override columnStats(): ReadonlyArray<ColumnStats> | undefined {
    return this.options.fieldIds === undefined ? undefined : columnStats(this.writer)
  }
}
