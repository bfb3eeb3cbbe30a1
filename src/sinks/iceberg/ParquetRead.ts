import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import {
  type AsyncBuffer,
  cachedAsyncBuffer,
  type Compressors,
  type FileMetaData,
  parquetMetadataAsync
} from "hyparquet"
import * as zlib from "node:zlib"
import { zstdNapi } from "../ParquetCodecs.ts"
import { SinkError } from "../SinkError.ts"
import { IcebergError } from "./Errors.ts"
import { keyOrFail, type TableLocation } from "./Location.ts"

/**
 * Reading the Parquet files a table records, with hyparquet, through the Destination: only the
 * byte ranges a read needs (the footer, the chunks of the columns asked for), so finding a column of
 * a large file costs a few ranged reads, locally or on a store.
 */

/** The page codecs the export writes (snappy is hyparquet's own). */
export const decompressors: Compressors = {
  ZSTD: (input) => new (zstdNapi().Decompressor)().decompress(input),
  GZIP: (input) => zlib.gunzipSync(input)
}

/** A file as hyparquet reads it: `size` bytes at `uri`, each slice a ranged read. */
export interface ParquetSource {
  readonly uri: string
  readonly file: AsyncBuffer
  readonly metadata: FileMetaData
}

const toArrayBuffer = (bytes: Uint8Array): ArrayBuffer =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? (bytes.buffer as ArrayBuffer)
    : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)

/** Runs hyparquet on `source`; its failures are the destination's (a read that failed) or a corrupt file. */
export const readParquet = <A>(
  table: TableLocation,
  uri: string,
  read: () => Promise<A>
): Effect.Effect<A, SinkError | IcebergError> =>
  Effect.tryPromise({
    try: read,
    catch: (cause) =>
      cause instanceof SinkError || cause instanceof IcebergError ? cause : new IcebergError({
        table: table.uri,
        reason: "Corrupt",
        message: `The table ${table.uri} references ${uri}, which is not a readable Parquet file (${String(cause)}). ` +
          "Restore the file, or expire the snapshots that use it.",
        cause
      })
  })

/** Opens a Parquet file the table records (its footer read). */
export const openParquet = (
  table: TableLocation,
  uri: string,
  size: number
): Effect.Effect<ParquetSource, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const key = yield* keyOrFail(table, uri)
    const file = cachedAsyncBuffer({
      byteLength: size,
      slice: (start, end) =>
        Effect.runPromiseExit(table.dest.readRange(key, start, end ?? size)).then((exit) =>
          Exit.isSuccess(exit) ? toArrayBuffer(exit.value) : Promise.reject(Cause.squash(exit.cause))
        )
    })
    // Geometry columns stay bytes (no GeoParquet decoding), as they are written.
    const metadata = yield* readParquet(table, uri, () => parquetMetadataAsync(file, { geoparquet: false }))
    return { uri, file, metadata }
  })

/** The name of the top-level column with field id `id` in a file (by `name` in files without ids). */
export const columnNamed = (metadata: FileMetaData, id: number, name: string): string | undefined => {
  let child = 1
  for (let i = 0; i < (metadata.schema[0]?.num_children ?? 0); i++) {
    const element = metadata.schema[child]!
    if (element.field_id === id || (element.field_id === undefined && element.name === name)) return element.name
    child += subtreeSize(metadata, child)
  }
  return undefined
}

const subtreeSize = (metadata: FileMetaData, at: number): number => {
  let size = 1
  for (let i = 0; i < (metadata.schema[at]!.num_children ?? 0); i++) size += subtreeSize(metadata, at + size)
  return size
}
