import * as Effect from "effect/Effect"
import { parquetRead } from "hyparquet"
import type { SinkError } from "../SinkError.ts"
import { IcebergError } from "./Errors.ts"
import type { TableLocation } from "./Location.ts"
import { columnNamed, decompressors, openParquet, readParquet } from "./ParquetRead.ts"
import { FILE_PATH_ID, POS_ID, type RowLocation } from "./PositionDeletes.ts"
import { type Entry, liveFiles, readSnapshot } from "./SnapshotFiles.ts"
import type { Snapshot } from "./TableMetadata.ts"

/**
 * Where a snapshot's live rows of given partitions are: the data file and row position of each, read
 * from the table itself (the live data files' `partition` column, less the rows its live position
 * delete files remove), never from local state, so that a run on another machine finds them. Reads
 * the partition column and the delete files only; memory grows with the partitions asked for, not
 * with the table.
 */

/** The positions the live position delete files remove, by data file URI. */
export const deletedPositions = (
  table: TableLocation,
  deletes: ReadonlyArray<Entry>
): Effect.Effect<Map<string, Set<number>>, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const deleted = new Map<string, Set<number>>()
    const equality = deletes.find((e) => e.data_file.content !== 1)
    if (equality !== undefined) {
      return yield* new IcebergError({
        table: table.uri,
        reason: "Mismatch",
        message:
          `The table ${table.uri} has equality delete files (${equality.data_file.file_path}), which this tool does not apply; it cannot update that table.`
      })
    }
    yield* Effect.forEach(deletes, (entry) =>
      Effect.gen(function*() {
        const { file_path, file_size_in_bytes } = entry.data_file
        const source = yield* openParquet(table, file_path, file_size_in_bytes)
        const pathColumn = columnNamed(source.metadata, FILE_PATH_ID, "file_path") ?? "file_path"
        const posColumn = columnNamed(source.metadata, POS_ID, "pos") ?? "pos"
        const rows = yield* readParquet(table, file_path, () =>
          new Promise<Array<Array<unknown>>>((resolve, reject) =>
            parquetRead({
              file: source.file,
              metadata: source.metadata,
              columns: [pathColumn, posColumn],
              compressors: decompressors,
              onComplete: resolve
            }).catch(reject)
          ))
        for (const [path, pos] of rows) {
          const file = path as string
          let set = deleted.get(file)
          if (set === undefined) deleted.set(file, set = new Set())
          set.add(Number(pos))
        }
      }), { concurrency: 4, discard: true })
    return deleted
  })

/**
 * Calls `each` with every value of the top-level column `fieldId` (`name` in files without ids) of
 * the data file `file_path` (`file_size_in_bytes` long), and the row's position.
 */
export const scanColumn = (
  table: TableLocation,
  { file_path, file_size_in_bytes }: { readonly file_path: string; readonly file_size_in_bytes: number },
  fieldId: number,
  name: string,
  each: (value: unknown, pos: number) => void
): Effect.Effect<void, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const source = yield* openParquet(table, file_path, file_size_in_bytes)
    const column = columnNamed(source.metadata, fieldId, name)
    if (column === undefined) {
      return yield* new IcebergError({
        table: table.uri,
        reason: "Mismatch",
        message: `The data file ${file_path} of ${table.uri} has no column ${name} (field id ${fieldId}).`
      })
    }
    yield* readParquet(table, file_path, () =>
      parquetRead({
        file: source.file,
        metadata: source.metadata,
        columns: [column],
        compressors: decompressors,
        onChunk: ({ columnData, rowStart }) => {
          for (let i = 0; i < columnData.length; i++) each(columnData[i], rowStart + i)
        }
      }))
  })

/**
 * The live rows of the partitions `wanted` accepts in `snapshot`, by partition id (a partition has
 * one row in a raw table, any number in a decoded one). `partitionFieldId`: the id of the
 * table's `partition` column.
 */
export const locateRows = (
  table: TableLocation,
  snapshot: Snapshot,
  partitionFieldId: number,
  wanted: (partition: string) => boolean
): Effect.Effect<Map<string, Array<RowLocation>>, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const { data, deletes } = liveFiles(yield* readSnapshot(table, snapshot))
    const deleted = yield* deletedPositions(table, deletes)
    const found = new Map<string, Array<RowLocation>>()
    yield* Effect.forEach(data, (entry) => {
      const file = entry.data_file.file_path
      const gone = deleted.get(file)
      return scanColumn(table, entry.data_file, partitionFieldId, "partition", (value, pos) => {
        const partition = value as string
        if (!wanted(partition) || gone?.has(pos) === true) return
        const rows = found.get(partition)
        if (rows === undefined) found.set(partition, [{ file, pos }])
        else rows.push({ file, pos })
      })
    }, { concurrency: 4, discard: true })
    return found
  }).pipe(Effect.withSpan("Iceberg.locateRows"))

/** The partitions of data files (`partitionFieldId`: the id of the `partition` column). */
export const partitionsIn = (
  table: TableLocation,
  files: ReadonlyArray<{ readonly file_path: string; readonly file_size_in_bytes: number }>,
  partitionFieldId: number
): Effect.Effect<Set<string>, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const partitions = new Set<string>()
    yield* Effect.forEach(
      files,
      (file) => scanColumn(table, file, partitionFieldId, "partition", (value) => void partitions.add(value as string)),
      { concurrency: 4, discard: true }
    )
    return partitions
  })
