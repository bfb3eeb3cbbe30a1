import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { IcebergError } from "./Errors.ts"

/**
 * The table metadata file (`metadata/v<K>.metadata.json`) of an Apache Iceberg v2 table, as the spec
 * names its fields ("Table Metadata Fields", "Appendix C: JSON serialization"). Decoding keeps every
 * field it does not know (other writers add some, and a commit must carry them on), so a table
 * written by another v2 writer round-trips. Ids are JSON numbers: snapshot ids beyond 2^53 (which
 * JSON.parse cannot keep exact) are refused rather than silently changed; the ids this library
 * assigns stay below.
 */

// --- types (Schemas and Data Types, Appendix C) ---------------------------------------------------

export interface NestedField {
  readonly id: number
  readonly name: string
  readonly required: boolean
  readonly type: IcebergType
  readonly doc?: string | undefined
}

export interface StructType {
  readonly type: "struct"
  readonly fields: ReadonlyArray<NestedField>
}

export interface ListType {
  readonly type: "list"
  readonly "element-id": number
  readonly element: IcebergType
  readonly "element-required": boolean
}

export interface MapType {
  readonly type: "map"
  readonly "key-id": number
  readonly key: IcebergType
  readonly "value-id": number
  readonly value: IcebergType
  readonly "value-required": boolean
}

/** A primitive type by its name (`long`, `string`, `decimal(9,2)`, ...) or a nested type. */
export type IcebergType = string | StructType | ListType | MapType

export const NestedField: Schema.Schema<NestedField> = Schema.Struct({
  id: Schema.Number,
  name: Schema.String,
  required: Schema.Boolean,
  type: Schema.suspend((): Schema.Schema<IcebergType> => IcebergType),
  doc: Schema.optional(Schema.String)
})

export const StructType: Schema.Schema<StructType> = Schema.Struct({
  type: Schema.Literal("struct"),
  fields: Schema.Array(NestedField)
})

const ListType: Schema.Schema<ListType> = Schema.Struct({
  type: Schema.Literal("list"),
  "element-id": Schema.Number,
  element: Schema.suspend((): Schema.Schema<IcebergType> => IcebergType),
  "element-required": Schema.Boolean
})

const MapType: Schema.Schema<MapType> = Schema.Struct({
  type: Schema.Literal("map"),
  "key-id": Schema.Number,
  key: Schema.suspend((): Schema.Schema<IcebergType> => IcebergType),
  "value-id": Schema.Number,
  value: Schema.suspend((): Schema.Schema<IcebergType> => IcebergType),
  "value-required": Schema.Boolean
})

export const IcebergType: Schema.Schema<IcebergType> = Schema.Union(Schema.String, StructType, ListType, MapType)

/** A table schema: a struct with an id. */
export const IcebergSchema = Schema.Struct({
  type: Schema.Literal("struct"),
  "schema-id": Schema.Number,
  "identifier-field-ids": Schema.optional(Schema.Array(Schema.Number)),
  fields: Schema.Array(NestedField)
})
export type IcebergSchema = typeof IcebergSchema.Type

// --- partitioning, sorting ------------------------------------------------------------------------

export const PartitionField = Schema.Struct({
  "source-id": Schema.optional(Schema.Number),
  "source-ids": Schema.optional(Schema.Array(Schema.Number)),
  "field-id": Schema.Number,
  name: Schema.String,
  transform: Schema.String
})

export const PartitionSpec = Schema.Struct({ "spec-id": Schema.Number, fields: Schema.Array(PartitionField) })
export type PartitionSpec = typeof PartitionSpec.Type

export const SortOrder = Schema.Struct({ "order-id": Schema.Number, fields: Schema.Array(Schema.Unknown) })
export type SortOrder = typeof SortOrder.Type

// --- snapshots and references ---------------------------------------------------------------------

const SnapshotId = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n), {
    message: () =>
      "a snapshot id beyond 2^53, which this tool cannot keep exact (written by another tool); expire or rewrite that snapshot with the tool that made it"
  })
)

export const Operation = Schema.Literal("append", "replace", "overwrite", "delete")
export type Operation = typeof Operation.Type

export const Snapshot = Schema.Struct({
  "snapshot-id": SnapshotId,
  "parent-snapshot-id": Schema.optional(SnapshotId),
  "sequence-number": Schema.Number,
  "timestamp-ms": Schema.Number,
  "manifest-list": Schema.String,
  summary: Schema.Struct({ operation: Operation }, Schema.Record({ key: Schema.String, value: Schema.String })),
  "schema-id": Schema.optional(Schema.Number)
})
export type Snapshot = typeof Snapshot.Type

export const SnapshotRef = Schema.Struct({
  "snapshot-id": SnapshotId,
  type: Schema.Literal("tag", "branch"),
  "min-snapshots-to-keep": Schema.optional(Schema.Number),
  "max-snapshot-age-ms": Schema.optional(Schema.Number),
  "max-ref-age-ms": Schema.optional(Schema.Number)
})
export type SnapshotRef = typeof SnapshotRef.Type

export const SnapshotLogEntry = Schema.Struct({ "snapshot-id": SnapshotId, "timestamp-ms": Schema.Number })
export const MetadataLogEntry = Schema.Struct({ "metadata-file": Schema.String, "timestamp-ms": Schema.Number })
export type MetadataLogEntry = typeof MetadataLogEntry.Type

// --- the table ------------------------------------------------------------------------------------

export const TableMetadata = Schema.Struct({
  "format-version": Schema.Literal(2),
  "table-uuid": Schema.String,
  location: Schema.String,
  "last-sequence-number": Schema.Number,
  "last-updated-ms": Schema.Number,
  "last-column-id": Schema.Number,
  schemas: Schema.Array(IcebergSchema),
  "current-schema-id": Schema.Number,
  "partition-specs": Schema.Array(PartitionSpec),
  "default-spec-id": Schema.Number,
  "last-partition-id": Schema.Number,
  properties: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  // Java wrote -1 for "none" in v2 tables.
  "current-snapshot-id": Schema.optional(Schema.NullOr(Schema.Number)),
  snapshots: Schema.optional(Schema.Array(Snapshot)),
  "snapshot-log": Schema.optional(Schema.Array(SnapshotLogEntry)),
  "metadata-log": Schema.optional(Schema.Array(MetadataLogEntry)),
  "sort-orders": Schema.Array(SortOrder),
  "default-sort-order-id": Schema.Number,
  refs: Schema.optional(Schema.Record({ key: Schema.String, value: SnapshotRef }))
})
export type TableMetadata = typeof TableMetadata.Type

const decode = Schema.decodeUnknownEither(TableMetadata, { onExcessProperty: "preserve", errors: "first" })

/** The table metadata in `text` (the file `file` of the table at `table`), every field kept. */
export const parseMetadata = (table: string, file: string, text: string): Effect.Effect<TableMetadata, IcebergError> =>
  Effect.gen(function*() {
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (cause) =>
        new IcebergError({
          table,
          reason: "Corrupt",
          message: `The table metadata ${file} is not JSON (${
            String(cause)
          }); restore it from a backup or remove the table.`,
          cause
        })
    })
    const version = (json as { "format-version"?: unknown })?.["format-version"]
    if (version !== 2) {
      return yield* new IcebergError({
        table,
        reason: "Mismatch",
        message: `${table} is an Iceberg table of format version ${
          String(version)
        }; this tool reads and writes version 2 only. Export into another location.`
      })
    }
    const decoded = decode(json)
    if (Either.isLeft(decoded)) {
      return yield* new IcebergError({
        table,
        reason: "Corrupt",
        message: `The table metadata ${file} is not valid Iceberg v2 metadata: ${
          ParseResult.TreeFormatter.formatErrorSync(decoded.left)
        }.`
      })
    }
    return decoded.right
  })

export const formatMetadata = (metadata: TableMetadata): string => JSON.stringify(metadata, null, 2)

// --- reading it -----------------------------------------------------------------------------------

export const snapshotsOf = (metadata: TableMetadata): ReadonlyArray<Snapshot> => metadata.snapshots ?? []

export const snapshotById = (metadata: TableMetadata, id: number): Snapshot | undefined =>
  snapshotsOf(metadata).find((s) => s["snapshot-id"] === id)

export const currentSnapshotId = (metadata: TableMetadata): number | undefined => {
  const id = metadata.refs?.main?.["snapshot-id"] ?? metadata["current-snapshot-id"]
  return id === null || id === undefined || id === -1 ? undefined : id
}

/** The snapshot `main` points to (the table's current one). */
export const currentSnapshot = (metadata: TableMetadata): Snapshot | undefined => {
  const id = currentSnapshotId(metadata)
  return id === undefined ? undefined : snapshotById(metadata, id)
}

/** The table's tags: name and snapshot. */
export const tagsOf = (
  metadata: TableMetadata
): ReadonlyArray<{ readonly name: string; readonly snapshot: Snapshot }> =>
  Object.entries(metadata.refs ?? {}).flatMap(([name, ref]) => {
    if (ref.type !== "tag") return []
    const snapshot = snapshotById(metadata, ref["snapshot-id"])
    return snapshot === undefined ? [] : [{ name, snapshot }]
  })

export const currentSchema = (metadata: TableMetadata): IcebergSchema =>
  metadata.schemas.find((s) => s["schema-id"] === metadata["current-schema-id"]) ?? metadata.schemas[0]!
