import * as Effect from "effect/Effect"
import { parquetRead } from "hyparquet"
import { type ColumnSource, ParquetWriter } from "hyparquet-writer"
import * as fs from "node:fs/promises"
import { columnStats } from "../ColumnStats.ts"
import { publish } from "../Destination.ts"
import { loadOutputs } from "../Files.ts"
import { isObjectStore } from "../ObjectStore.ts"
import { parquetCodec, type ParquetCompression } from "../ParquetCodecs.ts"
import { SpillingByteWriter } from "../ParquetFileWriter.ts"
import type { SinkError } from "../SinkError.ts"
import { fromCause } from "../SinkError.ts"
import type { RecordedFile } from "../WrittenFile.ts"
import { commit, type CommitOptions, type Committed } from "./Commit.ts"
import type { IcebergError } from "./Errors.ts"
import { deletedPositions } from "./LiveRows.ts"
import { fileId, keyIn, type TableLocation, uriOf } from "./Location.ts"
import { dataFileOf } from "./Manifest.ts"
import { decompressors, openParquet, readParquet } from "./ParquetRead.ts"
import { type RowLocation, writePositionDeletes } from "./PositionDeletes.ts"
import { type Entry, liveFiles, readSnapshot } from "./SnapshotFiles.ts"
import { proposeSnapshot, type StagedManifest, stageManifest } from "./SnapshotUpdate.ts"
import { currentSchema, currentSnapshot, type Snapshot, type TableMetadata, tagsOf } from "./TableMetadata.ts"

/**
 * Compaction of `main` (snapshot operation `replace`): every data file whose rows are mostly deleted
 * (at least `minDeletedRatio` of them) is written again without the deleted rows, and all position
 * deletes still needed are folded into one delete file; the old files leave the new snapshot. Rows
 * do not change, so `main` and the tags of the compacted snapshot move to the new one and every live
 * tag reads the same rows as before (older tags keep their snapshots and files until they expire).
 * Rewritten files keep their schema (field ids), file metadata, codec and row order.
 */

/** Rewrite a data file once this share of its rows is deleted. */
export const DEFAULT_MIN_DELETED_RATIO = 0.3

export interface CompactionThreshold {
  /** Live delete files `main` reads. */
  readonly deleteFiles: number
  /** Deleted rows as a share of the rows in `main`'s data files. */
  readonly deletedShare: number
}

/** When a nightly run compacts: `main` reads 8 delete files, or a tenth of its rows is deleted. */
export const COMPACTION_DUE: CompactionThreshold = { deleteFiles: 8, deletedShare: 0.1 }

/**
 * Whether `main` has gathered enough deletes to be worth compacting (from its summary: no file read).
 * Each changes run adds one delete file; reads apply every live delete file to the rows they read.
 */
export const compactionDue = (metadata: TableMetadata, due: CompactionThreshold = COMPACTION_DUE): boolean => {
  const summary = currentSnapshot(metadata)?.summary
  if (summary === undefined) return false
  const deleteFiles = Number(summary["total-delete-files"] ?? 0)
  const [records, deletes] = [Number(summary["total-records"] ?? 0), Number(summary["total-position-deletes"] ?? 0)]
  return deleteFiles >= due.deleteFiles || (records > 0 && deletes >= due.deletedShare * records)
}

export interface CompactOptions {
  readonly minDeletedRatio?: number | undefined
  readonly createdBy: string
  readonly commit?: CommitOptions | undefined
}

export interface Compacted {
  /** The data files written again (URIs), with their rows before and after. */
  readonly rewritten: ReadonlyArray<{ readonly from: string; readonly rows: number; readonly live: number }>
  readonly deleteFilesBefore: number
  readonly deleteFilesAfter: number
  readonly committed: Committed | undefined
}

const compressionOf = (codec: string | undefined): ParquetCompression =>
  codec === "ZSTD" ? "zstd" : codec === "SNAPPY" ? "snappy" : codec === "GZIP" ? "gzip" : "none"

/** Writes the live rows of a data file again (none when no row is live); returns the new file. */
const rewriteFile = (
  table: TableLocation,
  entry: Entry,
  deleted: ReadonlySet<number>,
  dirKey: string,
  name: string,
  createdBy: string
): Effect.Effect<{ readonly uri: string; readonly file: RecordedFile } | undefined, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const uri = entry.data_file.file_path
    const source = yield* openParquet(table, uri, entry.data_file.file_size_in_bytes)
    const { metadata } = source
    const live = Number(metadata.num_rows) - deleted.size
    if (live <= 0) return undefined
    const top = metadata.schema.slice(1)
    const columns: Array<{ name: string; firstLeaf: number }> = []
    for (let i = 0, leaf = 0; i < top.length;) {
      const size = subtree(top, i)
      columns.push({ name: top[i]!.name, firstLeaf: leaf })
      leaf += top.slice(i, i + size).filter((e) => (e.num_children ?? 0) === 0).length
      i += size
    }
    const chunkOf = (leaf: number) => metadata.row_groups[0]?.columns[leaf]?.meta_data
    const codec = parquetCodec(compressionOf(chunkOf(0)?.codec))
    const dir = table.dest.at(dirKey)
    if (!isObjectStore(dir)) {
      yield* Effect.tryPromise({
        try: () => fs.mkdir(dir, { recursive: true }),
        catch: (cause) => fromCause(dir, "create", cause)
      })
    }
    const output = yield* Effect.tryPromise({
      try: async () => (await loadOutputs(dir))(name),
      catch: (cause) => fromCause(`${dir}/${name}`, "create", cause)
    })
    const writer = new ParquetWriter({
      writer: new SpillingByteWriter(output),
      schema: metadata.schema,
      codec: codec.name,
      compressors: codec.compress === undefined ? {} : { [codec.name]: codec.compress },
      kvMetadata: metadata.key_value_metadata ?? [],
      createdBy
    })
    let rowStart = 0
    for (const group of metadata.row_groups) {
      const rowEnd = rowStart + Number(group.num_rows)
      const rows = yield* readParquet(
        table,
        uri,
        () =>
          new Promise<Array<Array<unknown>>>((resolve, reject) =>
            parquetRead({
              file: source.file,
              metadata,
              rowStart,
              rowEnd,
              utf8: false,
              compressors: decompressors,
              onComplete: resolve
            }).catch(reject)
          )
      )
      const keep = deleted.size === 0 ? rows : rows.filter((_, i) => !deleted.has(rowStart + i))
      if (keep.length > 0) {
        const columnData: Array<ColumnSource> = columns.map((c, j) => {
          const chunk = chunkOf(c.firstLeaf)
          const dictionary = chunk?.encodings.some((e) => e === "RLE_DICTIONARY" || e === "PLAIN_DICTIONARY") ?? true
          return {
            name: c.name,
            data: keep.map((r) => r[j]),
            // As the source was written: statistics only where it kept them, blobs plain.
            statistics: chunk?.statistics !== undefined,
            ...(dictionary ? {} : { encoding: "PLAIN" as const })
          }
        })
        yield* Effect.try({
          try: () => writer.write({ columnData, rowGroupSize: keep.length }),
          catch: (cause) => fromCause(output.path, "write", cause)
        })
      }
      rowStart = rowEnd
    }
    const sha256 = yield* Effect.try({
      try: () => {
        writer.finish()
        return output.close()
      },
      catch: (cause) => fromCause(output.path, "write", cause)
    })
    const landing = yield* Effect.tryPromise({
      try: () => output.settle(),
      catch: (cause) => fromCause(output.path, "complete", cause)
    })
    const file: RecordedFile = {
      path: name,
      format: "parquet",
      rows: live,
      bytes: output.bytes,
      sha256,
      columns: columnStats(writer)
    }
    yield* publish(dir, { ...file, landing })
    return { uri: uriOf(table, `${dirKey}/${name}`), file }
  })

const subtree = (elements: ReadonlyArray<{ num_children?: number | undefined }>, at: number): number => {
  let size = 1
  for (let i = 0; i < (elements[at]!.num_children ?? 0); i++) size += subtree(elements, at + size)
  return size
}

interface Work {
  readonly snapshot: Snapshot
  readonly rewritten: Compacted["rewritten"]
  readonly removed: ReadonlySet<string>
  readonly added: ReadonlyArray<StagedManifest>
  readonly keys: ReadonlyArray<string>
  readonly deleteFilesBefore: number
  readonly deleteFilesAfter: number
}

/** The compaction of `snapshot`; none when there is nothing worth doing. */
const compactionOf = (
  table: TableLocation,
  metadata: TableMetadata,
  snapshot: Snapshot,
  options: CompactOptions
): Effect.Effect<Work | undefined, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const ratio = options.minDeletedRatio ?? DEFAULT_MIN_DELETED_RATIO
    const { data, deletes } = liveFiles(yield* readSnapshot(table, snapshot))
    const deleted = yield* deletedPositions(table, deletes)
    const candidates = data.filter((e) => {
      const gone = deleted.get(e.data_file.file_path)?.size ?? 0
      return gone > 0 && gone >= ratio * e.data_file.record_count
    })
    if (candidates.length === 0 && deletes.length <= 1) return undefined
    const dirKey = keyIn(table, `data/compact-${fileId()}`)
    const schema = currentSchema(metadata)
    const written: Array<{ uri: string; file: RecordedFile }> = []
    const rewritten: Array<{ from: string; rows: number; live: number }> = []
    for (const [i, entry] of candidates.entries()) {
      const gone = deleted.get(entry.data_file.file_path)!
      const out = yield* rewriteFile(
        table,
        entry,
        gone,
        dirKey,
        `part-${String(i).padStart(5, "0")}.parquet`,
        options.createdBy
      )
      if (out !== undefined) written.push(out)
      rewritten.push({ from: entry.data_file.file_path, rows: entry.data_file.record_count, live: out?.file.rows ?? 0 })
    }
    const rewrittenPaths = new Set(candidates.map((e) => e.data_file.file_path))
    const remaining: Array<RowLocation> = []
    for (const [file, positions] of deleted) {
      if (rewrittenPaths.has(file)) continue
      for (const pos of positions) remaining.push({ file, pos })
    }
    const folded = yield* writePositionDeletes(table, remaining, options.createdBy)
    const dataFiles = written.map(({ file, uri }) => dataFileOf(uri, file, schema.fields))
    const dataManifest = yield* stageManifest(table, schema, "data", dataFiles)
    const deleteManifest = folded === undefined
      ? undefined
      : yield* stageManifest(table, schema, "deletes", [folded.file])
    const added = [dataManifest, deleteManifest].filter((m): m is StagedManifest => m !== undefined)
    return {
      snapshot,
      rewritten,
      removed: new Set([...rewrittenPaths, ...deletes.map((e) => e.data_file.file_path)]),
      added,
      keys: [
        ...written.map((w) => `${dirKey}/${w.file.path}`),
        ...(folded === undefined ? [] : [folded.key]),
        ...added.map((m) => m.key)
      ],
      deleteFilesBefore: deletes.length,
      deleteFilesAfter: folded === undefined ? 0 : 1
    }
  })

/** Compacts the table's `main` snapshot; none when it has nothing to compact. */
export const compact = Effect.fn("Iceberg.compact")(
  function*(table: TableLocation, options: CompactOptions) {
    let work: Work | undefined
    const abandoned: Array<string> = []
    let attempt = 0
    const committed = yield* commit(table, (current) =>
      Effect.gen(function*() {
        attempt++
        const metadata = current.metadata
        const snapshot = metadata === undefined ? undefined : currentSnapshot(metadata)
        if (metadata === undefined || snapshot === undefined) return undefined
        // Another writer moved main: what was rewritten for the old one is of no use.
        if (work !== undefined && work.snapshot["snapshot-id"] !== snapshot["snapshot-id"]) {
          abandoned.push(...work.keys)
          work = undefined
        }
        work ??= yield* compactionOf(table, metadata, snapshot, options)
        if (work === undefined) return undefined
        const tags = tagsOf(metadata).filter((t) => t.snapshot["snapshot-id"] === snapshot["snapshot-id"])
        const ours = Object.fromEntries(
          Object.entries(snapshot.summary).filter(([k]) => k.startsWith("catalog-export."))
        )
        return yield* proposeSnapshot(table, metadata, {
          operation: "replace",
          base: snapshot,
          added: work.added,
          removed: work.removed,
          main: true,
          tags: tags.map((t) => t.name),
          summary: { ...ours, "catalog-export.compacted-from": String(snapshot["snapshot-id"]) },
          schema: currentSchema(metadata),
          lastColumnId: metadata["last-column-id"]
        }, attempt)
      }), options.commit)
    if (abandoned.length > 0) yield* Effect.ignore(table.dest.remove(abandoned))
    return {
      rewritten: committed === undefined ? [] : work?.rewritten ?? [],
      deleteFilesBefore: work?.deleteFilesBefore ?? 0,
      deleteFilesAfter: work?.deleteFilesAfter ?? 0,
      committed
    } satisfies Compacted
  }
)
