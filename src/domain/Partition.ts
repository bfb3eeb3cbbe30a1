import * as Schema from "effect/Schema"

/**
 * A partition's version: a number, or a string holding one, as the interface's query response
 * template shows it (its sample shows a number).
 */
export const PartitionVersion = Schema.Union(Schema.Number, Schema.NumberFromString.pipe(Schema.int()))

/** The version of a partition as listed, number or numeric string; undefined when it is neither. */
export const partitionVersion = (value: unknown): number | undefined =>
  typeof value === "number"
    ? value
    : typeof value === "string" && /^-?\d+$/.test(value.trim())
    ? Number(value)
    : undefined

/** Metadata of one partition. The optional fields appear only when asked for in `additionalFields` and published. */
export const Partition = Schema.Struct({
  partition: Schema.String,
  version: PartitionVersion,
  dataHandle: Schema.String,
  layer: Schema.optional(Schema.String),
  dataSize: Schema.optional(Schema.Number),
  checksum: Schema.optional(Schema.String),
  compressedDataSize: Schema.optional(Schema.Number),
  crc: Schema.optional(Schema.String)
})
export type Partition = typeof Partition.Type

export const AdditionalField = Schema.Literal("dataSize", "checksum", "compressedDataSize", "crc")
export type AdditionalField = typeof AdditionalField.Type
export const ADDITIONAL_FIELDS: ReadonlyArray<AdditionalField> = ["dataSize", "checksum", "compressedDataSize", "crc"]

export const Partitions = Schema.Struct({
  partitions: Schema.Array(Partition),
  next: Schema.optional(Schema.String)
})
export type Partitions = typeof Partitions.Type

export const Parts = Schema.Struct({ parts: Schema.Array(Schema.String) })

export const VersionDependency = Schema.Struct({
  hrn: Schema.String,
  version: Schema.Number,
  direct: Schema.Boolean
})

export const VersionInfo = Schema.Struct({
  version: Schema.Number,
  timestamp: Schema.Number,
  dependencies: Schema.Array(VersionDependency),
  partitionCounts: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number })),
  hasKnownIssues: Schema.optional(Schema.Boolean)
})
export type VersionInfo = typeof VersionInfo.Type

export const VersionInfos = Schema.Struct({ versions: Schema.Array(VersionInfo) })

export const VersionResponse = Schema.Struct({ version: Schema.Number })

export const LayerVersion = Schema.Struct({ layer: Schema.String, version: Schema.Number, timestamp: Schema.Number })
export const LayerVersions = Schema.Struct({ version: Schema.Number, layerVersions: Schema.Array(LayerVersion) })
export type LayerVersions = typeof LayerVersions.Type

/** An empty data handle marks a partition that has no data (deleted in a changes listing). */
export const isDeleted = (p: Pick<Partition, "dataHandle">): boolean => p.dataHandle === ""
