import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/**
 * Partition metadata as the metadata and query APIs list it. Two decoders read it and must agree
 * (test/client/partitions-conformance.test.ts): the `Partitions` schema below (QueryApi, any JSON
 * answer) and, for listings, MetadataApi's `toPartition` over PartitionsParser, which applies the same
 * rules a partition at a time with `partitionVersion` and `isAddressableHandle`. Unknown fields are
 * dropped; a known optional field that is null counts as absent, one of another type is refused.
 */

/**
 * The version of a partition as listed: an integer, as a JSON number or a string of decimal digits;
 * undefined when it is neither (or too large to be exact).
 */
export const partitionVersion = (value: unknown): number | undefined => {
  const version = typeof value === "number"
    ? value
    : typeof value === "string" && /^\s*-?\d+\s*$/.test(value)
    ? Number(value)
    : undefined
  return version !== undefined && Number.isSafeInteger(version) ? version : undefined
}

/**
 * A partition's version: a number, or a string holding a decimal integer, as the interface's query
 * response template shows it (its sample shows a number).
 */
export const PartitionVersion = Schema.transformOrFail(Schema.Union(Schema.Number, Schema.String), Schema.Number, {
  strict: true,
  decode: (value, _, ast) => {
    const version = partitionVersion(value)
    return version === undefined
      ? ParseResult.fail(new ParseResult.Type(ast, value, "a version is a number or a string of a decimal integer"))
      : ParseResult.succeed(version)
  },
  encode: ParseResult.succeed
})

/** "." and ".." are dot segments in a URL path, resolved away: no blob URL can address such a handle. */
export const isAddressableHandle = (handle: string): boolean => handle !== "." && handle !== ".."

const DataHandle = Schema.String.pipe(
  Schema.filter(isAddressableHandle, { message: () => "a data handle no blob URL can address (a dot segment)" })
)

/** A field that appears only when asked for; null counts as absent. */
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { nullable: true })

/** Metadata of one partition. The optional fields appear only when asked for in `additionalFields` and published. */
export const Partition = Schema.Struct({
  partition: Schema.String,
  version: PartitionVersion,
  dataHandle: DataHandle,
  layer: optional(Schema.String),
  dataSize: optional(Schema.Number),
  checksum: optional(Schema.String),
  compressedDataSize: optional(Schema.Number),
  crc: optional(Schema.String)
})
export type Partition = typeof Partition.Type

export const AdditionalField = Schema.Literal("dataSize", "checksum", "compressedDataSize", "crc")
export type AdditionalField = typeof AdditionalField.Type
export const ADDITIONAL_FIELDS: ReadonlyArray<AdditionalField> = ["dataSize", "checksum", "compressedDataSize", "crc"]

export const Partitions = Schema.Struct({
  partitions: Schema.Array(Partition),
  next: optional(Schema.String)
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
