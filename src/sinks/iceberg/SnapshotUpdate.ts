import * as Effect from "effect/Effect"
import { randomInt } from "node:crypto"
import type { SinkError } from "../SinkError.ts"
import type { Proposal } from "./Commit.ts"
import { IcebergError } from "./Errors.ts"
import { fileId, keyIn, type TableLocation, uriOf } from "./Location.ts"
import { type DataFile, encodeManifest, EntryStatus, type ManifestContent, type ManifestEntry } from "./Manifest.ts"
import { encodeManifestList, type ManifestFile } from "./ManifestList.ts"
import { type Entry, isLive, readManifest, readManifestList } from "./SnapshotFiles.ts"
import type { IcebergSchema, Operation, Snapshot, TableMetadata } from "./TableMetadata.ts"
import { snapshotsOf } from "./TableMetadata.ts"

/**
 * Producing a snapshot ("Snapshots", "Manifest Lists"): the new files' manifests are written once
 * (their entries inherit snapshot id and sequence number, so a retried commit reuses them); each
 * attempt then carries the base snapshot's manifests over unchanged, rewrites only the manifests that
 * hold a removed file (the removed ones as DELETED, the rest as EXISTING), writes the manifest list
 * and returns the next table metadata with the snapshot, its references and its summary.
 */

/** A manifest of new files, written once for every attempt of a commit. */
export interface StagedManifest {
  readonly key: string
  readonly uri: string
  readonly length: number
  readonly content: ManifestContent
  readonly files: number
  readonly rows: number
  readonly bytes: number
}

/** Writes a manifest of `files` (all data files or all delete files) added by the coming snapshot; none for no files. */
export const stageManifest = (
  table: TableLocation,
  schema: IcebergSchema,
  content: ManifestContent,
  files: ReadonlyArray<DataFile>
): Effect.Effect<StagedManifest | undefined, SinkError | IcebergError> =>
  Effect.gen(function*() {
    if (files.length === 0) return undefined
    const entries: Array<ManifestEntry> = files.map((data_file) => ({
      status: EntryStatus.added,
      snapshot_id: null,
      sequence_number: null,
      file_sequence_number: null,
      data_file
    }))
    const bytes = yield* encode(table, () => encodeManifest(schema, content, entries))
    const key = keyIn(table, `metadata/${fileId()}-m0.avro`)
    yield* table.dest.write(key, bytes)
    let rows = 0
    let size = 0
    for (const f of files) {
      rows += f.record_count
      size += f.file_size_in_bytes
    }
    return { key, uri: uriOf(table, key), length: bytes.byteLength, content, files: files.length, rows, bytes: size }
  })

const encode = (table: TableLocation, run: () => Promise<Uint8Array>) =>
  Effect.tryPromise({
    try: run,
    catch: (cause) =>
      new IcebergError({
        table: table.uri,
        reason: "Corrupt",
        message: `Could not encode an Avro file for ${table.uri}: ${String(cause)}`,
        cause
      })
  })

/** What the next snapshot is. */
export interface SnapshotChange {
  readonly operation: Operation
  /** The snapshot the new one starts from (its parent): its live files carry over, less `removed`. None: an empty start. */
  readonly base: Snapshot | undefined
  /** Manifests of the new data and delete files (stageManifest). */
  readonly added: ReadonlyArray<StagedManifest>
  /** URIs of the base's live data and delete files that the new snapshot no longer has. */
  readonly removed: ReadonlySet<string>
  /** Moves `main` (the table's current snapshot) to the new snapshot. */
  readonly main: boolean
  /** Tags set to the new snapshot (new, or moved). */
  readonly tags: ReadonlyArray<string>
  /** Fields of the summary besides the standard ones (this tool's: catalog, layer, version, mode). */
  readonly summary: Readonly<Record<string, string>>
  /** The schema the new files are written with: the table's current one, or its update. */
  readonly schema: IcebergSchema
  readonly lastColumnId: number
  /** Files written for this attempt only (delete files computed against this base): removed if the attempt loses. */
  readonly attemptFiles?: ReadonlyArray<string>
}

const MAX_ID = 2 ** 53 - 1

/** A positive snapshot id no snapshot of the table has, below 2^53 (exact in JSON readers everywhere). */
const newSnapshotId = (metadata: TableMetadata | undefined): number => {
  const taken = new Set(snapshotsOf(metadata ?? ({} as TableMetadata)).map((s) => s["snapshot-id"]))
  for (;;) {
    const id = randomInt(1, 2 ** 47) * 64 + randomInt(0, 64)
    if (id <= MAX_ID && !taken.has(id)) return id
  }
}

interface Counts {
  dataFiles: number
  deleteFiles: number
  dataRows: number
  positionDeletes: number
}

const liveCounts = (manifests: ReadonlyArray<ManifestFile>): Counts => {
  const counts: Counts = { dataFiles: 0, deleteFiles: 0, dataRows: 0, positionDeletes: 0 }
  for (const m of manifests) {
    const files = m.added_files_count + m.existing_files_count
    const rows = m.added_rows_count + m.existing_rows_count
    if (m.content === 0) {
      counts.dataFiles += files
      counts.dataRows += rows
    } else {
      counts.deleteFiles += files
      counts.positionDeletes += rows
    }
  }
  return counts
}

/** A base manifest holding removed files, rewritten: removed files DELETED by `snapshotId`, the other live ones EXISTING. */
const rewrite = (
  table: TableLocation,
  schema: IcebergSchema,
  manifest: ManifestFile,
  entries: ReadonlyArray<Entry>,
  removed: ReadonlySet<string>,
  snapshotId: number,
  sequenceNumber: number
) =>
  Effect.gen(function*() {
    const kept: Array<ManifestEntry> = []
    let [existingFiles, existingRows, deletedFiles, deletedRows, bytes] = [0, 0, 0, 0, 0]
    let minSequence = Number.POSITIVE_INFINITY
    for (const entry of entries.filter(isLive)) {
      const gone = removed.has(entry.data_file.file_path)
      kept.push({
        ...entry,
        status: gone ? EntryStatus.deleted : EntryStatus.existing,
        ...(gone ? { snapshot_id: snapshotId } : {})
      })
      if (gone) {
        deletedFiles++
        deletedRows += entry.data_file.record_count
        bytes += entry.data_file.file_size_in_bytes
      } else {
        existingFiles++
        existingRows += entry.data_file.record_count
        minSequence = Math.min(minSequence, entry.sequence_number)
      }
    }
    const content: ManifestContent = manifest.content === 0 ? "data" : "deletes"
    const encoded = yield* encode(table, () => encodeManifest(schema, content, kept))
    const key = keyIn(table, `metadata/${fileId()}-m1.avro`)
    yield* table.dest.write(key, encoded)
    const file: ManifestFile = {
      ...manifest,
      manifest_path: uriOf(table, key),
      manifest_length: encoded.byteLength,
      sequence_number: sequenceNumber,
      min_sequence_number: Number.isFinite(minSequence) ? minSequence : sequenceNumber,
      added_snapshot_id: snapshotId,
      added_files_count: 0,
      existing_files_count: existingFiles,
      deleted_files_count: deletedFiles,
      added_rows_count: 0,
      existing_rows_count: existingRows,
      deleted_rows_count: deletedRows
    }
    return { key, file, deletedFiles, deletedRows, bytes }
  })

/** Checks that the change's schema fits the table's: the same schema, or an update of its current one. */
const schemaConflict = (metadata: TableMetadata | undefined, schema: IcebergSchema, table: TableLocation) => {
  if (metadata === undefined) return undefined
  const same = metadata.schemas.find((s) => s["schema-id"] === schema["schema-id"])
  if (same !== undefined) return JSON.stringify(same.fields) === JSON.stringify(schema.fields) ? undefined : schema
  const current = metadata.schemas.find((s) => s["schema-id"] === metadata["current-schema-id"])
  const newestId = Math.max(...metadata.schemas.map((s) => s["schema-id"]))
  const keepsCurrent = current?.fields.every((f) => schema.fields.some((g) => g.id === f.id && g.name === f.name)) ??
    true
  const newIds = schema.fields.filter((f) => !(current?.fields ?? []).some((g) => g.id === f.id))
  return schema["schema-id"] === newestId + 1 && keepsCurrent &&
      newIds.every((f) => f.id > metadata["last-column-id"])
    ? undefined
    : new IcebergError({
      table: table.uri,
      reason: "Conflict",
      message:
        `The schema of the table ${table.uri} changed while this run wrote its files (another writer added columns). Run the same command again: it writes the files anew with the table's columns.`
    })
}

/**
 * The proposal (Commit.ts) of `change` on top of `metadata` (undefined: the table's first commit,
 * then `initial` is the table without snapshots): writes the rewritten manifests and the manifest
 * list, and returns the next metadata.
 */
export const proposeSnapshot = (
  table: TableLocation,
  metadata: TableMetadata,
  change: SnapshotChange,
  attempt: number
): Effect.Effect<Proposal & { readonly snapshot: Snapshot }, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const conflict = schemaConflict(metadata, change.schema, table)
    if (conflict instanceof IcebergError) return yield* conflict
    const snapshotId = newSnapshotId(metadata)
    const sequenceNumber = metadata["last-sequence-number"] + 1
    const attemptFiles: Array<string> = [...(change.attemptFiles ?? [])]

    // The base's manifests: carried over, or rewritten when they hold a removed file.
    const manifests: Array<ManifestFile> = []
    const removed = { dataFiles: 0, deleteFiles: 0, dataRows: 0, positionDeletes: 0, bytes: 0, manifests: 0 }
    let kept = 0
    const baseManifests = change.base === undefined ? [] : yield* readManifestList(table, change.base)
    const found = new Set<string>()
    for (const manifest of baseManifests) {
      if (manifest.added_files_count + manifest.existing_files_count === 0) continue
      if (change.removed.size === 0) {
        manifests.push(manifest)
        kept++
        continue
      }
      const { entries } = yield* readManifest(table, manifest)
      const hits = entries.filter((e) => isLive(e) && change.removed.has(e.data_file.file_path))
      if (hits.length === 0) {
        manifests.push(manifest)
        kept++
        continue
      }
      for (const e of hits) found.add(e.data_file.file_path)
      const rewritten = yield* rewrite(
        table,
        change.schema,
        manifest,
        entries,
        change.removed,
        snapshotId,
        sequenceNumber
      )
      attemptFiles.push(rewritten.key)
      manifests.push(rewritten.file)
      removed.manifests++
      removed.bytes += rewritten.bytes
      if (manifest.content === 0) {
        removed.dataFiles += rewritten.deletedFiles
        removed.dataRows += rewritten.deletedRows
      } else {
        removed.deleteFiles += rewritten.deletedFiles
        removed.positionDeletes += rewritten.deletedRows
      }
    }
    const missing = [...change.removed].filter((uri) => !found.has(uri))
    if (missing.length > 0) {
      return yield* Effect.dieMessage(
        `removing files the base snapshot does not have: ${missing.slice(0, 3).join(", ")}`
      )
    }

    // The new files' manifests first, as the reference implementation lists them.
    const added = { dataFiles: 0, deleteFiles: 0, dataRows: 0, positionDeletes: 0, bytes: 0 }
    const fresh: Array<ManifestFile> = change.added.map((staged) => {
      added.bytes += staged.bytes
      if (staged.content === "data") {
        added.dataFiles += staged.files
        added.dataRows += staged.rows
      } else {
        added.deleteFiles += staged.files
        added.positionDeletes += staged.rows
      }
      return {
        manifest_path: staged.uri,
        manifest_length: staged.length,
        partition_spec_id: 0,
        content: staged.content === "data" ? 0 : 1,
        sequence_number: sequenceNumber,
        min_sequence_number: sequenceNumber,
        added_snapshot_id: snapshotId,
        added_files_count: staged.files,
        existing_files_count: 0,
        deleted_files_count: 0,
        added_rows_count: staged.rows,
        existing_rows_count: 0,
        deleted_rows_count: 0,
        partitions: null,
        key_metadata: null
      }
    })
    const list = [...fresh, ...manifests]
    const listBytes = yield* encode(table, () =>
      encodeManifestList({
        snapshotId,
        parentSnapshotId: change.base?.["snapshot-id"],
        sequenceNumber
      }, list))
    const listKey = keyIn(table, `metadata/snap-${snapshotId}-${attempt}-${fileId()}.avro`)
    yield* table.dest.write(listKey, listBytes)
    attemptFiles.push(listKey)

    const total = liveCounts(list)
    const baseSize = Number(change.base?.summary["total-files-size"] ?? 0)
    const summary: Record<string, string> = {
      ...change.summary,
      "added-data-files": String(added.dataFiles),
      "added-records": String(added.dataRows),
      "added-files-size": String(added.bytes),
      "added-delete-files": String(added.deleteFiles),
      "added-position-delete-files": String(added.deleteFiles),
      "added-position-deletes": String(added.positionDeletes),
      "deleted-data-files": String(removed.dataFiles),
      "deleted-records": String(removed.dataRows),
      "removed-delete-files": String(removed.deleteFiles),
      "removed-position-delete-files": String(removed.deleteFiles),
      "removed-position-deletes": String(removed.positionDeletes),
      "removed-files-size": String(removed.bytes),
      "total-data-files": String(total.dataFiles),
      "total-delete-files": String(total.deleteFiles),
      "total-records": String(total.dataRows),
      "total-position-deletes": String(total.positionDeletes),
      "total-equality-deletes": "0",
      "total-files-size": String(baseSize + added.bytes - removed.bytes),
      "manifests-created": String(fresh.length + removed.manifests),
      "manifests-kept": String(kept),
      "manifests-replaced": String(removed.manifests)
    }
    const now = Date.now()
    const snapshot: Snapshot = {
      "snapshot-id": snapshotId,
      ...(change.base === undefined ? {} : { "parent-snapshot-id": change.base["snapshot-id"] }),
      "sequence-number": sequenceNumber,
      "timestamp-ms": now,
      "manifest-list": uriOf(table, listKey),
      summary: { operation: change.operation, ...summary },
      "schema-id": change.schema["schema-id"]
    }
    const hasSchema = metadata.schemas.some((s) => s["schema-id"] === change.schema["schema-id"])
    const refs = { ...metadata.refs }
    for (const tag of change.tags) refs[tag] = { "snapshot-id": snapshotId, type: "tag" }
    if (change.main) refs.main = { ...metadata.refs?.main, "snapshot-id": snapshotId, type: "branch" }
    const next: TableMetadata = {
      ...metadata,
      "last-sequence-number": sequenceNumber,
      "last-column-id": Math.max(metadata["last-column-id"], change.lastColumnId),
      schemas: hasSchema ? metadata.schemas : [...metadata.schemas, change.schema],
      "current-schema-id": hasSchema ? metadata["current-schema-id"] : change.schema["schema-id"],
      snapshots: [...snapshotsOf(metadata), snapshot],
      refs,
      ...(change.main
        ? {
          "current-snapshot-id": snapshotId,
          "snapshot-log": [...(metadata["snapshot-log"] ?? []), { "snapshot-id": snapshotId, "timestamp-ms": now }]
        }
        : {})
    }
    return { metadata: next, attemptFiles, snapshot }
  })
