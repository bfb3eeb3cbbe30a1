import { decodeContainer, encodeContainer } from "./Avro.ts"

/**
 * Manifest lists ("Manifest Lists"): one Avro file per snapshot naming its manifests, each with the
 * sequence number and snapshot its new entries inherit, and file and row counts by status.
 */

export interface ManifestFile {
  /** The manifest's absolute URI. */
  readonly manifest_path: string
  readonly manifest_length: number
  readonly partition_spec_id: number
  /** 0: data files, 1: delete files. */
  readonly content: 0 | 1
  /** The sequence number of the snapshot that added the manifest (inherited by its added entries). */
  readonly sequence_number: number
  /** The least data sequence number of the manifest's live files. */
  readonly min_sequence_number: number
  readonly added_snapshot_id: number
  readonly added_files_count: number
  readonly existing_files_count: number
  readonly deleted_files_count: number
  readonly added_rows_count: number
  readonly existing_rows_count: number
  readonly deleted_rows_count: number
  readonly partitions: null
  readonly key_metadata: null
}

const field = (name: string, type: unknown, id: number) => ({ name, type, "field-id": id })

export const MANIFEST_FILE_SCHEMA = {
  type: "record",
  name: "manifest_file",
  fields: [
    field("manifest_path", "string", 500),
    field("manifest_length", "long", 501),
    field("partition_spec_id", "int", 502),
    field("content", "int", 517),
    field("sequence_number", "long", 515),
    field("min_sequence_number", "long", 516),
    field("added_snapshot_id", "long", 503),
    field("added_files_count", "int", 504),
    field("existing_files_count", "int", 505),
    field("deleted_files_count", "int", 506),
    field("added_rows_count", "long", 512),
    field("existing_rows_count", "long", 513),
    field("deleted_rows_count", "long", 514),
    {
      ...field("partitions", [
        "null",
        {
          type: "array",
          "element-id": 508,
          items: {
            type: "record",
            name: "r508",
            fields: [
              field("contains_null", "boolean", 509),
              { ...field("contains_nan", ["null", "boolean"], 518), default: null },
              { ...field("lower_bound", ["null", "bytes"], 510), default: null },
              { ...field("upper_bound", ["null", "bytes"], 511), default: null }
            ]
          }
        }
      ], 507),
      default: null
    },
    { ...field("key_metadata", ["null", "bytes"], 519), default: null }
  ]
}

export interface ManifestListOf {
  readonly snapshotId: number
  readonly parentSnapshotId: number | undefined
  readonly sequenceNumber: number
}

export const encodeManifestList = (snapshot: ManifestListOf, files: ReadonlyArray<ManifestFile>): Promise<Uint8Array> =>
  encodeContainer(MANIFEST_FILE_SCHEMA, files, {
    "snapshot-id": String(snapshot.snapshotId),
    "parent-snapshot-id": snapshot.parentSnapshotId === undefined ? "null" : String(snapshot.parentSnapshotId),
    "sequence-number": String(snapshot.sequenceNumber),
    "format-version": "2"
  })

export const decodeManifestList = async (bytes: Uint8Array): Promise<Array<ManifestFile>> => {
  const { records } = await decodeContainer<Record<string, unknown>>(bytes)
  return records.map((r) => ({
    manifest_path: r.manifest_path as string,
    manifest_length: Number(r.manifest_length),
    partition_spec_id: Number(r.partition_spec_id),
    content: (r.content ?? 0) as 0 | 1,
    sequence_number: Number(r.sequence_number ?? 0),
    min_sequence_number: Number(r.min_sequence_number ?? 0),
    added_snapshot_id: Number(r.added_snapshot_id),
    added_files_count: Number(r.added_files_count ?? 0),
    existing_files_count: Number(r.existing_files_count ?? 0),
    deleted_files_count: Number(r.deleted_files_count ?? 0),
    added_rows_count: Number(r.added_rows_count ?? 0),
    existing_rows_count: Number(r.existing_rows_count ?? 0),
    deleted_rows_count: Number(r.deleted_rows_count ?? 0),
    partitions: null,
    key_metadata: null
  }))
}
