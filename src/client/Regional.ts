import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { BlobApi, VolatileBlobApi } from "./BlobApi.ts"
import { Lookup } from "./Lookup.ts"
import { MetadataApi } from "./MetadataApi.ts"
import { QueryApi } from "./QueryApi.ts"

/**
 * The APIs that read a catalog's data (metadata, query, blob, volatile blob), bound to one region of
 * a multi-region catalog: each base URL they look up names `region` (lookup's `region` parameter).
 * They share the client's connections, token, retries and lookup cache, so making them per export
 * costs nothing; an export that fails over runs again with the other region's.
 */
export const inRegion = (region: string | undefined) =>
  Layer.mergeAll(MetadataApi.layer, QueryApi.layer, BlobApi.layer, VolatileBlobApi.layer).pipe(
    Layer.provide(Layer.effect(
      Lookup,
      Effect.map(Lookup, (lookup) =>
        Lookup.of({
          baseUrl: (request) =>
            lookup.baseUrl(request.region === undefined && region !== undefined ? { ...request, region } : request),
          apis: (hrn, asked) => lookup.apis(hrn, asked ?? region)
        }))
    ))
  )
