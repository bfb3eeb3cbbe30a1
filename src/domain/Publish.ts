import * as Schema from "effect/Schema"

/** Partition ids: the platform's character set, at most 500 characters. Nothing that could name a path. */
export const PARTITION_ID = /^[A-Za-z0-9_\-.:]{1,500}$/

export const PublicationState = Schema.Literal(
  "initialized",
  "submitted",
  "cancelled",
  "failed",
  "succeeded",
  "expired"
)

export const Publication = Schema.Struct({
  id: Schema.String,
  catalogId: Schema.optional(Schema.String),
  catalogVersion: Schema.Number,
  layerIds: Schema.Array(Schema.String),
  details: Schema.Struct({
    state: PublicationState,
    message: Schema.String,
    started: Schema.Number,
    modified: Schema.Number,
    expires: Schema.Number
  })
})
export type Publication = typeof Publication.Type

/** What a publisher uploads per partition; `data` (base64) inlines small blobs. */
export const PublishPartition = Schema.Struct({
  partition: Schema.String,
  dataHandle: Schema.optional(Schema.String),
  checksum: Schema.optional(Schema.String),
  dataSize: Schema.optional(Schema.Number),
  compressedDataSize: Schema.optional(Schema.Number),
  crc: Schema.optional(Schema.String),
  data: Schema.optional(Schema.String),
  timestamp: Schema.optional(Schema.Number)
})
export type PublishPartition = typeof PublishPartition.Type

export const PublishPartitions = Schema.Struct({ partitions: Schema.Array(PublishPartition) })
