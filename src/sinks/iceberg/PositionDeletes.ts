import * as Effect from "effect/Effect"
import { ByteWriter, ParquetWriter } from "hyparquet-writer"
import { compareUtf8 } from "../ColumnStats.ts"
import { zstdCodec } from "../ParquetCodecs.ts"
import type { SinkError } from "../SinkError.ts"
import { IcebergError } from "./Errors.ts"
import { keyIn, newFileName, type TableLocation, uriOf } from "./Location.ts"
import { type DataFile, FileContent } from "./Manifest.ts"
import { serialize } from "./SingleValue.ts"

/**
 * Position delete files ("Position Delete Files"): Parquet files of (`file_path`, `pos`) pairs, field
 * ids 2147483546 and 2147483545, sorted by path then position, each pair removing one row of a data
 * file from the snapshots that carry the delete file. Metrics cover both columns, the paths not
 * truncated, so readers can tell which data files a delete file touches.
 */

export const FILE_PATH_ID = 2147483546
export const POS_ID = 2147483545

/** A row of a data file: the file's URI and the row's position in it (from 0). */
export interface RowLocation {
  readonly file: string
  readonly pos: number
}

const SCHEMA = {
  type: "struct",
  "schema-id": 0,
  fields: [
    { id: FILE_PATH_ID, name: "file_path", required: true, type: "string" },
    { id: POS_ID, name: "pos", required: true, type: "long" }
  ]
}

/** `rows` sorted as the spec requires: by file path (UTF-8 order), then position. */
export const sortRows = (rows: ReadonlyArray<RowLocation>): Array<RowLocation> =>
  [...rows].sort((a, b) => (a.file === b.file ? a.pos - b.pos : compareUtf8(a.file, b.file)))

/** The bytes of a position delete file for `sorted` (sorted, not empty). */
const encode = (sorted: ReadonlyArray<RowLocation>, createdBy: string): Uint8Array => {
  const codec = zstdCodec(1)
  const out = new ByteWriter()
  const writer = new ParquetWriter({
    writer: out,
    schema: [
      { name: "schema", num_children: 2 },
      {
        name: "file_path",
        type: "BYTE_ARRAY",
        converted_type: "UTF8",
        repetition_type: "REQUIRED",
        field_id: FILE_PATH_ID
      },
      { name: "pos", type: "INT64", repetition_type: "REQUIRED", field_id: POS_ID }
    ],
    codec: codec.name,
    compressors: { [codec.name]: codec.compress! },
    kvMetadata: [{ key: "iceberg.schema", value: JSON.stringify(SCHEMA) }],
    createdBy
  })
  writer.write({
    columnData: [
      { name: "file_path", data: sorted.map((r) => r.file) },
      { name: "pos", data: sorted.map((r) => BigInt(r.pos)) }
    ],
    rowGroupSize: sorted.length
  })
  writer.finish()
  return new Uint8Array(out.getBuffer())
}

/**
 * Writes a position delete file for `rows` below the table's `data/` and returns its manifest
 * `data_file`; none for no rows.
 */
export const writePositionDeletes = (
  table: TableLocation,
  rows: ReadonlyArray<RowLocation>,
  createdBy: string
): Effect.Effect<{ readonly key: string; readonly file: DataFile } | undefined, SinkError | IcebergError> =>
  Effect.gen(function*() {
    if (rows.length === 0) return undefined
    const sorted = sortRows(rows)
    const bytes = yield* Effect.try({
      try: () => encode(sorted, createdBy),
      catch: (cause) =>
        new IcebergError({
          table: table.uri,
          reason: "Corrupt",
          message: `Could not encode a position delete file for ${table.uri}: ${String(cause)}`,
          cause
        })
    })
    const key = keyIn(table, `data/${newFileName("deletes", "parquet")}`)
    yield* table.dest.write(key, bytes)
    const first = sorted[0]!
    const last = sorted[sorted.length - 1]!
    let [minPos, maxPos] = [first.pos, first.pos]
    for (const r of sorted) [minPos, maxPos] = [Math.min(minPos, r.pos), Math.max(maxPos, r.pos)]
    const count = sorted.length
    const file: DataFile = {
      content: FileContent.positionDeletes,
      file_path: uriOf(table, key),
      file_format: "PARQUET",
      partition: {},
      record_count: count,
      file_size_in_bytes: bytes.byteLength,
      column_sizes: null,
      value_counts: [{ key: FILE_PATH_ID, value: count }, { key: POS_ID, value: count }],
      null_value_counts: [{ key: FILE_PATH_ID, value: 0 }, { key: POS_ID, value: 0 }],
      nan_value_counts: null,
      lower_bounds: [{ key: FILE_PATH_ID, value: serialize("string", first.file)! }, {
        key: POS_ID,
        value: serialize("long", minPos)!
      }],
      upper_bounds: [{ key: FILE_PATH_ID, value: serialize("string", last.file)! }, {
        key: POS_ID,
        value: serialize("long", maxPos)!
      }],
      key_metadata: null,
      split_offsets: null,
      equality_ids: null,
      sort_order_id: null,
      referenced_data_file: first.file === last.file ? first.file : null
    }
    return { key, file }
  })
