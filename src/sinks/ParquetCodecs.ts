import { snappyCompressor } from "hysnappy"
import { createRequire } from "node:module"
import * as zlib from "node:zlib"
import type * as ZstdNapi from "zstd-napi"

let zstdModule: typeof ZstdNapi | undefined
/**
 * zstd-napi, the one native module, loaded when the first codec needs it: a command that writes and
 * reads no Parquet file (and a command that fails on its input before it does) never loads it.
 */
export const zstdNapi = (): typeof ZstdNapi =>
  zstdModule ??= createRequire(import.meta.url)("zstd-napi") as typeof ZstdNapi

export const parquetCompressions = ["zstd", "snappy", "gzip", "none"] as const
export type ParquetCompression = (typeof parquetCompressions)[number]

/**
 * zstd level 1 measured as fast as or faster than snappy and lz4 here while compressing best of them
 * (test/bench/writers.ts); gzip is for readers that know nothing newer.
 */
export const defaultParquetCompression: ParquetCompression = "zstd"

export type ParquetCodecName = "UNCOMPRESSED" | "SNAPPY" | "ZSTD" | "GZIP" | "BROTLI"

/** A Parquet page codec: its name in the file footer and the function that compresses one page. */
export interface ParquetCodec {
  readonly name: ParquetCodecName
  readonly compress: ((page: Uint8Array) => Uint8Array) | undefined
}

const ZSTD_LEVEL = 1
const GZIP_LEVEL = 1

export const zstdCodec = (level: number): ParquetCodec => {
  // One context per writer: zstd-napi reuses its buffers between pages.
  const compressor = new (zstdNapi().Compressor)()
  compressor.setParameters({ compressionLevel: level })
  return { name: "ZSTD", compress: (page) => compressor.compress(page) }
}

/** A fresh codec for one writer (codecs keep per-writer state such as a zstd context). */
export const parquetCodec = (compression: ParquetCompression): ParquetCodec => {
  switch (compression) {
    case "none":
      return { name: "UNCOMPRESSED", compress: undefined }
    case "snappy":
      return { name: "SNAPPY", compress: snappyCompressor() }
    case "zstd":
      return zstdCodec(ZSTD_LEVEL)
    case "gzip":
      return { name: "GZIP", compress: (page) => zlib.gzipSync(page, { level: GZIP_LEVEL }) }
  }
}
