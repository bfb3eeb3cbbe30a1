import type { RecordedFile } from "../WrittenFile.ts"
import { decodeContainer, encodeContainer } from "./Avro.ts"
import { type Metrics, metricsOf } from "./Metrics.ts"
import type { IcebergSchema, NestedField } from "./TableMetadata.ts"

/**
 * Manifests ("Manifests", "Manifest Entry Fields", "Data File Fields"): Avro files listing the data
 * files or the delete files of a snapshot, one `manifest_entry` per file. The tables here are
 * unpartitioned (spec 0, no fields: position deletes apply table-wide, and the partition id column
 * is far too fine to partition by), so every `partition` tuple is empty. New entries leave snapshot
 * id and sequence numbers null, to be inherited from the manifest list ("Sequence Number
 * Inheritance"): a manifest is written once and reused when a commit is retried.
 */

export const FileContent = { data: 0, positionDeletes: 1, equalityDeletes: 2 } as const
export type FileContent = (typeof FileContent)[keyof typeof FileContent]

export const EntryStatus = { existing: 0, added: 1, deleted: 2 } as const
export type EntryStatus = (typeof EntryStatus)[keyof typeof EntryStatus]

/** `data_file` as written (v2 fields; the deprecated and v3 ones left out). */
export interface DataFile extends Metrics {
  readonly content: FileContent
  /** The file's absolute URI. */
  readonly file_path: string
  readonly file_format: string
  readonly partition: Readonly<Record<string, never>>
  readonly record_count: number
  readonly file_size_in_bytes: number
  readonly column_sizes: null
  readonly key_metadata: null
  /** Row group offsets, ascending. */
  readonly split_offsets: ReadonlyArray<number> | null
  readonly equality_ids: null
  readonly sort_order_id: number | null
  /** Position delete files whose deletes all target one data file: that file. */
  readonly referenced_data_file: string | null
}

/** A written data file (at `uri`, its columns of the table schema `fields`) as a manifest records it. */
export const dataFileOf = (uri: string, file: RecordedFile, fields: ReadonlyArray<NestedField>): DataFile => ({
  content: FileContent.data,
  file_path: uri,
  file_format: "PARQUET",
  partition: {},
  record_count: file.rows,
  file_size_in_bytes: file.bytes,
  column_sizes: null,
  ...metricsOf(file.columns ?? [], fields),
  key_metadata: null,
  split_offsets: null,
  equality_ids: null,
  sort_order_id: 0,
  referenced_data_file: null
})

export interface ManifestEntry {
  readonly status: EntryStatus
  /** null: inherited from the manifest list (added entries only). */
  readonly snapshot_id: number | null
  readonly sequence_number: number | null
  readonly file_sequence_number: number | null
  readonly data_file: DataFile
}

const optional = (type: unknown, id: number, name: string) => ({
  name,
  type: ["null", type],
  default: null,
  "field-id": id
})

const mapOf = (name: string, id: number, keyId: number, valueId: number, value: string) =>
  optional(
    {
      type: "array",
      logicalType: "map",
      items: {
        type: "record",
        name: `k${keyId}_v${valueId}`,
        fields: [{ name: "key", type: "int", "field-id": keyId }, { name: "value", type: value, "field-id": valueId }]
      }
    },
    id,
    name
  )

/** The Avro schema of `manifest_entry` (field ids and names as the spec and the reference implementation have them). */
export const MANIFEST_ENTRY_SCHEMA = {
  type: "record",
  name: "manifest_entry",
  fields: [
    { name: "status", type: "int", "field-id": 0 },
    optional("long", 1, "snapshot_id"),
    optional("long", 3, "sequence_number"),
    optional("long", 4, "file_sequence_number"),
    {
      name: "data_file",
      "field-id": 2,
      type: {
        type: "record",
        name: "r2",
        fields: [
          { name: "content", type: "int", "field-id": 134 },
          { name: "file_path", type: "string", "field-id": 100 },
          { name: "file_format", type: "string", "field-id": 101 },
          { name: "partition", type: { type: "record", name: "r102", fields: [] }, "field-id": 102 },
          { name: "record_count", type: "long", "field-id": 103 },
          { name: "file_size_in_bytes", type: "long", "field-id": 104 },
          mapOf("column_sizes", 108, 117, 118, "long"),
          mapOf("value_counts", 109, 119, 120, "long"),
          mapOf("null_value_counts", 110, 121, 122, "long"),
          mapOf("nan_value_counts", 137, 138, 139, "long"),
          mapOf("lower_bounds", 125, 126, 127, "bytes"),
          mapOf("upper_bounds", 128, 129, 130, "bytes"),
          optional("bytes", 131, "key_metadata"),
          optional({ type: "array", items: "long", "element-id": 133 }, 132, "split_offsets"),
          optional({ type: "array", items: "int", "element-id": 136 }, 135, "equality_ids"),
          optional("int", 140, "sort_order_id"),
          optional("string", 143, "referenced_data_file")
        ]
      }
    }
  ]
}

/** The unpartitioned spec every table here has. */
export const UNPARTITIONED = { "spec-id": 0, fields: [] } as const

export type ManifestContent = "data" | "deletes"

/** A manifest's bytes: `entries` (all data files or all delete files), the header as the spec requires. */
export const encodeManifest = (
  schema: IcebergSchema,
  content: ManifestContent,
  entries: ReadonlyArray<ManifestEntry>
): Promise<Uint8Array> =>
  encodeContainer(MANIFEST_ENTRY_SCHEMA, entries, {
    schema: JSON.stringify(schema),
    "schema-id": String(schema["schema-id"]),
    "partition-spec": JSON.stringify(UNPARTITIONED.fields),
    "partition-spec-id": String(UNPARTITIONED["spec-id"]),
    "format-version": "2",
    content
  })

const orNull = <A>(value: A | undefined): A | null => (value === undefined ? null : value)

/** A `data_file` as read from any v2 writer's manifest, in the shape this library writes. */
const readDataFile = (raw: Record<string, unknown>): DataFile => ({
  content: (raw.content ?? 0) as FileContent,
  file_path: raw.file_path as string,
  file_format: raw.file_format as string,
  partition: {},
  record_count: Number(raw.record_count),
  file_size_in_bytes: Number(raw.file_size_in_bytes),
  column_sizes: null,
  value_counts: orNull(raw.value_counts as DataFile["value_counts"]),
  null_value_counts: orNull(raw.null_value_counts as DataFile["null_value_counts"]),
  nan_value_counts: orNull(raw.nan_value_counts as DataFile["nan_value_counts"]),
  lower_bounds: orNull(raw.lower_bounds as DataFile["lower_bounds"]),
  upper_bounds: orNull(raw.upper_bounds as DataFile["upper_bounds"]),
  key_metadata: null,
  split_offsets: orNull(raw.split_offsets as DataFile["split_offsets"]),
  equality_ids: null,
  sort_order_id: orNull(raw.sort_order_id as number | undefined),
  referenced_data_file: orNull(raw.referenced_data_file as string | undefined)
})

/** The entries of a manifest's bytes, snapshot ids and sequence numbers as written (null: inherited). */
export const decodeManifest = async (bytes: Uint8Array): Promise<Array<ManifestEntry>> => {
  const { metadata, records } = await decodeContainer<Record<string, unknown>>(bytes)
  if (metadata["partition-spec"] !== undefined && JSON.parse(metadata["partition-spec"]).length > 0) {
    throw new Error("the manifest is of a partitioned spec; this tool writes and reads unpartitioned tables only")
  }
  return records.map((r) => ({
    status: r.status as EntryStatus,
    snapshot_id: orNull(r.snapshot_id as number | undefined),
    sequence_number: orNull(r.sequence_number as number | undefined),
    file_sequence_number: orNull(r.file_sequence_number as number | undefined),
    data_file: readDataFile(r.data_file as Record<string, unknown>)
  }))
}
