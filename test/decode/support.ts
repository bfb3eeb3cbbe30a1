import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DecodedArrowWriter } from "../../src/decode/DecodedArrow.ts"
import { DecodedParquetWriter } from "../../src/decode/DecodedParquet.ts"
import type { DecodedBatch, DecodeFailure, Decoder } from "../../src/decode/Decoder.ts"
import { parquetCodec } from "../../src/sinks/ParquetCodecs.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import type { TestRow } from "../sinks/support.ts"

/** A row as the export collects it (blob decompressed, null for a deletion). */
export type PartitionInput = TestRow

export const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "decode-test-"))

export const partition = (
  id: string,
  data: Uint8Array | null,
  extra: Partial<PartitionInput> = {}
): PartitionInput => ({
  partition: id,
  partitionVersion: 3,
  dataHandle: data === null ? "" : `handle-${id}`,
  dataSize: data?.byteLength ?? null,
  checksum: null,
  data,
  ...extra
})

/**
 * Writes the partitions to one file through the export's decoding writers, one row group per
 * `batchSize` partitions; returns the failures seen.
 */
export const writeDecoded = async (
  decoder: Decoder,
  file: string,
  format: "parquet" | "arrow",
  partitions: ReadonlyArray<PartitionInput>,
  batchSize = 3
) => {
  const failures: Array<DecodeFailure> = []
  const onDecoded = (batch: DecodedBatch) => void failures.push(...batch.failures)
  const options = {
    path: file,
    heretile: false,
    metadata: { layer_id: "test" },
    rowGroupBytes: 2 ** 30,
    createdBy: "test"
  }
  const writer = format === "parquet"
    ? new DecodedParquetWriter(options, parquetCodec("zstd"), decoder, onDecoded)
    : new DecodedArrowWriter(options, decoder, onDecoded)
  for (let i = 0; i < partitions.length; i += batchSize) {
    const batch = batchOf(partitions.slice(i, i + batchSize))
    writer.add(batch, 0, batch.length, batch.bytes)
    writer.flush()
  }
  writer.finish()
  return failures
}

/** A small ISO WKB reader, independent of the writer's: WKB bytes back to a GeoJSON geometry. */
export const readWkb = (bytes: Uint8Array): { type: string; coordinates?: unknown; geometries?: Array<unknown> } => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = 0
  const NAMES = [
    "",
    "Point",
    "LineString",
    "Polygon",
    "MultiPoint",
    "MultiLineString",
    "MultiPolygon",
    "GeometryCollection"
  ]
  const geometry = (): any => {
    const little = view.getUint8(at) === 1
    at += 1
    const code = view.getUint32(at, little)
    at += 4
    const dims = code >= 3000 ? 4 : code >= 2000 || code >= 1000 ? 3 : 2
    const type = NAMES[code % 1000]!
    const u32 = () => {
      const v = view.getUint32(at, little)
      at += 4
      return v
    }
    const point = () =>
      Array.from({ length: dims }, () => {
        const v = view.getFloat64(at, little)
        at += 8
        return v
      })
    const points = () => Array.from({ length: u32() }, point)
    const rings = () => Array.from({ length: u32() }, points)
    switch (type) {
      case "Point":
        return { type, coordinates: point() }
      case "LineString":
        return { type, coordinates: points() }
      case "Polygon":
        return { type, coordinates: rings() }
      case "MultiPoint":
      case "MultiLineString":
      case "MultiPolygon":
        return { type, coordinates: Array.from({ length: u32() }, () => geometry().coordinates) }
      case "GeometryCollection":
        return { type, geometries: Array.from({ length: u32() }, geometry) }
    }
    throw new Error(`unknown WKB type ${code}`)
  }
  const g = geometry()
  if (at !== bytes.byteLength) throw new Error(`WKB has ${bytes.byteLength - at} trailing bytes`)
  return g
}
