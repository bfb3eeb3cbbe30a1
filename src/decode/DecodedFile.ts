import { AsyncByteQueue, RecordBatchFileWriter, type Schema as ArrowSchema } from "apache-arrow"
import { fileWriter, ParquetWriter } from "hyparquet-writer"
import * as fs from "node:fs"
import { arrowRecordBatch, arrowSchema, type ColumnBatch, footerSchema, parquetColumnData, parquetSchema } from "./Columns.ts"
import type { Decoder } from "./Decoder.ts"
import { GeoStats } from "./GeoJson.ts"

/**
 * One file of decoded rows, Parquet or Arrow IPC, written batch by batch: each `write` is one row group
 * (record batch). Nested columns go to Parquet through hyparquet-writer's Dremel encoder (explicit
 * schema with groups and 3-level lists), to Arrow through apache-arrow's builders. GeoParquet's `geo`
 * metadata needs the bounding box and types of every geometry in the file, so it is written with the
 * footer; Arrow files mark the geometry column `geoarrow.wkb` instead.
 */

export interface ParquetCodecLike {
  readonly name: "UNCOMPRESSED" | "SNAPPY" | "ZSTD" | "GZIP" | "BROTLI"
  readonly compress: ((page: Uint8Array) => Uint8Array) | undefined
}

export interface DecodedFileOptions {
  readonly path: string
  readonly format: "parquet" | "arrow"
  readonly decoder: Decoder
  /** file key-value metadata (catalog, layer, version, ...) */
  readonly metadata: Readonly<Record<string, string>>
  readonly codec?: ParquetCodecLike
  readonly createdBy?: string
}

export interface DecodedFileWriter {
  /** geometry statistics of the file so far: pass to `decoder.decode` so the footer covers every row */
  readonly geo: GeoStats
  readonly write: (batch: ColumnBatch) => void
  readonly finish: () => void
}

export const openDecodedFile = (options: DecodedFileOptions): DecodedFileWriter =>
  options.format === "parquet" ? parquetFile(options) : arrowFile(options)

const parquetFile = (options: DecodedFileOptions): DecodedFileWriter => {
  const { decoder } = options
  const codec = options.codec ?? { name: "UNCOMPRESSED", compress: undefined }
  const geo = new GeoStats()
  const kvMetadata = Object.entries(options.metadata).map(([key, value]) => ({ key, value }))
  const schema = parquetSchema(decoder.columns)
  const writer = new ParquetWriter({
    writer: fileWriter(options.path),
    schema,
    codec: codec.name,
    compressors: codec.compress === undefined ? {} : { [codec.name]: codec.compress },
    kvMetadata,
    createdBy: options.createdBy ?? "catalog-export"
  })
  return {
    geo,
    write: (batch) => {
      if (batch.rows > 0) void writer.write({ columnData: parquetColumnData(decoder.columns, batch), rowGroupSize: batch.rows })
    },
    finish: () => {
      for (const [key, value] of Object.entries(decoder.fileMetadata(geo))) kvMetadata.push({ key, value })
      footerSchema(schema)
      void writer.finish()
    }
  }
}

/** Arrow's writer pushes its output into a queue; this one writes every chunk to the file. */
class FileQueue extends AsyncByteQueue {
  constructor(private readonly fd: number) {
    super()
  }

  override write(value: unknown): void {
    if (!ArrayBuffer.isView(value)) throw new TypeError("Arrow writer produced a chunk that is not bytes")
    if (value.byteLength > 0) fs.writeSync(this.fd, new Uint8Array(value.buffer, value.byteOffset, value.byteLength))
  }
}

const arrowFile = (options: DecodedFileOptions): DecodedFileWriter => {
  const fd = fs.openSync(options.path, "w")
  const schema: ArrowSchema = arrowSchema(options.decoder.columns, new Map(Object.entries(options.metadata)))
  const writer = new RecordBatchFileWriter()
  writer.reset(new FileQueue(fd), schema)
  return {
    geo: new GeoStats(),
    write: (batch) => {
      if (batch.rows > 0) writer.write(arrowRecordBatch(schema, batch))
    },
    finish: () => {
      writer.close()
      fs.closeSync(fd)
    }
  }
}
