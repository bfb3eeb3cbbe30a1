import * as Effect from "effect/Effect"
import type { SinkError } from "../SinkError.ts"
import type { IcebergError } from "./Errors.ts"
import { decodeRecorded, type TableLocation } from "./Location.ts"
import { decodeManifest, type ManifestEntry } from "./Manifest.ts"
import { decodeManifestList, type ManifestFile } from "./ManifestList.ts"
import type { Snapshot } from "./TableMetadata.ts"

/**
 * What a snapshot holds: its manifest list, manifests and their entries, with the values new entries
 * inherit from the manifest list filled in ("Sequence Number Inheritance"). Live files are the
 * entries not DELETED ("Scan Planning").
 */

/** A manifest entry with its snapshot id and sequence numbers resolved. */
export interface Entry extends ManifestEntry {
  readonly snapshot_id: number
  readonly sequence_number: number
  readonly file_sequence_number: number
}

export interface ManifestWithEntries {
  readonly manifest: ManifestFile
  readonly entries: ReadonlyArray<Entry>
}

const resolve = (manifest: ManifestFile, entry: ManifestEntry): Entry => ({
  ...entry,
  snapshot_id: entry.snapshot_id ?? manifest.added_snapshot_id,
  sequence_number: entry.sequence_number ?? manifest.sequence_number,
  file_sequence_number: entry.file_sequence_number ?? manifest.sequence_number
})

export const readManifestList = (table: TableLocation, snapshot: Snapshot) =>
  decodeRecorded(table, snapshot["manifest-list"], decodeManifestList)

export const readManifest = (
  table: TableLocation,
  manifest: ManifestFile
): Effect.Effect<ManifestWithEntries, SinkError | IcebergError> =>
  Effect.map(
    decodeRecorded(table, manifest.manifest_path, decodeManifest),
    (entries) => ({ manifest, entries: entries.map((e) => resolve(manifest, e)) })
  )

export const isLive = (entry: ManifestEntry) => entry.status !== 2

/** A snapshot's manifests and their entries (all of them: live and deleted). */
export const readSnapshot = Effect.fn("Iceberg.readSnapshot")(
  function*(table: TableLocation, snapshot: Snapshot) {
    const manifests = yield* readManifestList(table, snapshot)
    return yield* Effect.forEach(manifests, (m) => readManifest(table, m), { concurrency: 8 })
  }
)

export interface LiveFiles {
  readonly data: ReadonlyArray<Entry>
  readonly deletes: ReadonlyArray<Entry>
}

/** The data files and delete files a snapshot's readers read. */
export const liveFiles = (manifests: ReadonlyArray<ManifestWithEntries>): LiveFiles => {
  const data: Array<Entry> = []
  const deletes: Array<Entry> = []
  for (const { entries } of manifests) {
    for (const entry of entries) {
      if (!isLive(entry)) continue
      if (entry.data_file.content === 0) data.push(entry)
      else deletes.push(entry)
    }
  }
  return { data, deletes }
}
