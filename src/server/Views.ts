import type { CatalogRow, LayerRow } from "./db/CatalogsRepo.ts"

/** The stored configuration of a layer plus what the service adds on GET. */
export const layerView = (layer: LayerRow, owner: unknown): Record<string, unknown> => {
  const config = JSON.parse(layer.config) as Record<string, any>
  const scheme = config.partitioning?.scheme ?? config.partitioningScheme ?? "generic"
  return {
    ...config,
    id: layer.id,
    hrn: `${layer.catalog_hrn}:${layer.id}`,
    layerType: layer.layer_type,
    partitioningScheme: scheme,
    partitioning: { ...(config.partitioning ?? {}), scheme },
    tags: config.tags ?? [],
    billingTags: config.billingTags ?? [],
    created: layer.created,
    owner
  }
}

export const catalogView = (catalog: CatalogRow, layers: ReadonlyArray<LayerRow>): Record<string, unknown> => {
  const config = JSON.parse(catalog.config) as Record<string, any>
  const owner = config.owner ?? {}
  return {
    ...config,
    id: catalog.id,
    hrn: catalog.hrn,
    owner,
    tags: config.tags ?? [],
    billingTags: config.billingTags ?? [],
    created: catalog.created,
    replication: config.replication ?? {},
    layers: layers.map((layer) => layerView(layer, owner)),
    version: config.version ?? 1,
    notifications: config.notifications ?? { enabled: false }
  }
}

export const originOf = (headers: Record<string, string | undefined>): string =>
  `${headers["x-forwarded-proto"] ?? "http"}://${headers["host"] ?? "127.0.0.1"}`

export const layerConfigOf = (layer: LayerRow): Record<string, any> => JSON.parse(layer.config)

/** `gzip` when the layer stores compressed blobs, else null. */
export const contentEncodingOf = (layer: LayerRow): string | null =>
  layerConfigOf(layer).contentEncoding === "gzip" ? "gzip" : null
