import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Publication, type PublishPartition } from "../domain/Publish.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/** Publish API v2: init a publication, upload partition metadata in batches, submit or cancel. */

export const DEFAULT_BATCH_SIZE = 10_000

export interface VersionDependency {
  readonly hrn: string
  readonly version: number
  readonly direct: boolean
}

export interface PublishApiShape {
  readonly initPublication: (
    hrn: string,
    layerIds: ReadonlyArray<string>,
    versionDependencies?: ReadonlyArray<VersionDependency>
  ) => Effect.Effect<Publication, LookupFailure>
  readonly uploadPartitions: (
    hrn: string,
    layerId: string,
    publicationId: string,
    partitions: Iterable<PublishPartition>,
    options?: { readonly batchSize?: number }
  ) => Effect.Effect<void, LookupFailure>
  readonly submitPublication: (hrn: string, publicationId: string) => Effect.Effect<void, LookupFailure>
  readonly cancelPublication: (hrn: string, publicationId: string) => Effect.Effect<void, LookupFailure>
  readonly getPublication: (hrn: string, publicationId: string) => Effect.Effect<Publication, LookupFailure>
}

export class PublishApi extends Context.Tag("catalog-export/client/PublishApi")<PublishApi, PublishApiShape>() {
  static readonly layer: Layer.Layer<PublishApi, never, ApiClient | Lookup> = Layer.effect(
    PublishApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const base = (hrn: string) => lookup.baseUrl({ api: "publish", version: "v2", hrn })
      const publicationUrl = (root: string, id: string) => joinUrl(root, `/publications/${segment(id)}`)

      const initPublication = Effect.fn("PublishApi.initPublication")(function*(
        hrn: string,
        layerIds: ReadonlyArray<string>,
        versionDependencies?: ReadonlyArray<VersionDependency>
      ) {
        const root = yield* base(hrn)
        const body = versionDependencies === undefined ? { layerIds } : { layerIds, versionDependencies }
        return yield* api.json(
          HttpClientRequest.post(joinUrl(root, "/publications")).pipe(HttpClientRequest.bodyUnsafeJson(body)),
          Publication
        )
      })

      const uploadPartitions = Effect.fn("PublishApi.uploadPartitions")(function*(
        hrn: string,
        layerId: string,
        publicationId: string,
        partitions: Iterable<PublishPartition>,
        options?: { readonly batchSize?: number }
      ) {
        const root = yield* base(hrn)
        const url = joinUrl(root, `/layers/${segment(layerId)}/publications/${segment(publicationId)}/partitions`)
        const batchSize = Math.max(1, options?.batchSize ?? DEFAULT_BATCH_SIZE)
        let batch: Array<PublishPartition> = []
        const flush = (items: Array<PublishPartition>) =>
          api.discard(HttpClientRequest.post(url).pipe(HttpClientRequest.bodyUnsafeJson({ partitions: items })))
        for (const partition of partitions) {
          batch.push(partition)
          if (batch.length >= batchSize) {
            yield* flush(batch)
            batch = []
          }
        }
        if (batch.length > 0) yield* flush(batch)
      })

      const submitPublication = Effect.fn("PublishApi.submitPublication")(
        function*(hrn: string, publicationId: string) {
          yield* api.discard(HttpClientRequest.put(publicationUrl(yield* base(hrn), publicationId)))
        }
      )

      const cancelPublication = Effect.fn("PublishApi.cancelPublication")(
        function*(hrn: string, publicationId: string) {
          yield* api.discard(HttpClientRequest.del(publicationUrl(yield* base(hrn), publicationId)))
        }
      )

      const getPublication = Effect.fn("PublishApi.getPublication")(function*(hrn: string, publicationId: string) {
        return yield* api.json(HttpClientRequest.get(publicationUrl(yield* base(hrn), publicationId)), Publication)
      })

      return PublishApi.of({ initPublication, uploadPartitions, submitPublication, cancelPublication, getPublication })
    })
  )
}
