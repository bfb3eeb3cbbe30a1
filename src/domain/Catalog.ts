import * as Schema from "effect/Schema"

/** Layer types the platform knows. Requests use versioned/volatile/stream; responses add the rest. */
export const LayerType = Schema.Literal("versioned", "volatile", "stream", "index", "objectstore", "interactivemap")
export type LayerType = typeof LayerType.Type

/** `tile` is the interface's name of the HERE tile scheme, `heretile` the platform's. */
export const PartitioningScheme = Schema.Literal("generic", "heretile", "tile")
export type PartitioningScheme = typeof PartitioningScheme.Type

export const Partitioning = Schema.Struct({
  scheme: Schema.String,
  tileLevels: Schema.optional(Schema.Array(Schema.Number))
})
export type Partitioning = typeof Partitioning.Type

export const Owner = Schema.Struct({
  creator: Schema.optional(Schema.Struct({ id: Schema.String })),
  organisation: Schema.optional(Schema.Struct({ id: Schema.String }))
})

export const Coverage = Schema.Struct({ adminAreas: Schema.optional(Schema.Array(Schema.String)) })

export const Volume = Schema.Struct({
  volumeType: Schema.optional(Schema.String),
  maxMemoryPolicy: Schema.optional(Schema.String)
})

export const Digest = Schema.Literal("MD5", "SHA-1", "SHA-256")
export type Digest = typeof Digest.Type

/** A layer as GET returns it. Only `id` and `layerType` are needed to export; the rest is tolerated when absent. */
export const Layer = Schema.Struct({
  id: Schema.String,
  hrn: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  summary: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  coverage: Schema.optional(Coverage),
  owner: Schema.optional(Owner),
  schema: Schema.optional(Schema.Struct({ hrn: Schema.String })),
  partitioningScheme: Schema.optional(Schema.String),
  partitioning: Schema.optional(Partitioning),
  contentType: Schema.optional(Schema.String),
  contentEncoding: Schema.optional(Schema.String),
  digest: Schema.optional(Schema.String),
  crc: Schema.optional(Schema.String),
  volume: Schema.optional(Volume),
  tags: Schema.optional(Schema.Array(Schema.String)),
  billingTags: Schema.optional(Schema.Array(Schema.String)),
  created: Schema.optional(Schema.String),
  layerType: Schema.String,
  ttl: Schema.optional(Schema.Number)
})
export type Layer = typeof Layer.Type

export const AutomaticVersionDeletion = Schema.Struct({
  numberOfVersionsToKeep: Schema.optional(Schema.Number)
})

export const Catalog = Schema.Struct({
  id: Schema.String,
  hrn: Schema.String,
  name: Schema.optional(Schema.String),
  summary: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  coverage: Schema.optional(Coverage),
  owner: Schema.optional(Owner),
  tags: Schema.optional(Schema.Array(Schema.String)),
  billingTags: Schema.optional(Schema.Array(Schema.String)),
  created: Schema.optional(Schema.String),
  layers: Schema.Array(Layer),
  version: Schema.optional(Schema.Number),
  notifications: Schema.optional(Schema.Struct({ enabled: Schema.Boolean })),
  replication: Schema.optional(Schema.Unknown),
  automaticVersionDeletion: Schema.optional(AutomaticVersionDeletion)
})
export type Catalog = typeof Catalog.Type

/** `GET /catalogs` summary item. */
export const CatalogSummary = Schema.Struct({
  href: Schema.String,
  hrn: Schema.String,
  title: Schema.optional(Schema.String),
  type: Schema.optional(Schema.String)
})
export type CatalogSummary = typeof CatalogSummary.Type

export const CatalogList = <A, I>(item: Schema.Schema<A, I>) =>
  Schema.Struct({
    results: Schema.Struct({
      items: Schema.Array(item),
      next: Schema.optional(Schema.String),
      previous: Schema.optional(Schema.String)
    })
  })

/** The partitioning scheme of a layer: `partitioning.scheme` first, then the deprecated `partitioningScheme`. */
export const partitioningOf = (layer: Layer): string =>
  layer.partitioning?.scheme ?? layer.partitioningScheme ?? "generic"

/** HERE tile partitioning, by either of its names (the interface says `tile`, the platform `heretile`). */
export const isHereTile = (layer: Layer): boolean => {
  const scheme = partitioningOf(layer)
  return scheme === "heretile" || scheme === "tile"
}

/** The answer of an asynchronous config operation (202): where to poll its status. */
export const StatusLink = Schema.Struct({
  href: Schema.String,
  configToken: Schema.optional(Schema.String),
  title: Schema.optional(Schema.String),
  type: Schema.optional(Schema.String)
})
export type StatusLink = typeof StatusLink.Type

/** A status resource: `pending` (with `steps` for layer deletion), `success`, or `failure`. */
export const OperationStatus = Schema.Struct({
  status: Schema.String,
  steps: Schema.optional(Schema.Array(Schema.Struct({ name: Schema.String, state: Schema.String }))),
  item: Schema.optional(Schema.Unknown),
  reason: Schema.optional(Schema.String)
})
export type OperationStatus = typeof OperationStatus.Type
