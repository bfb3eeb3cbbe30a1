import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type AdditionalField, type Partition, Partitions } from "../domain/Partition.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/** Query API v1: partitions by id. Unknown ids are silently left out by the service. */

/** The service takes at most this many ids per request. */
export const MAX_IDS_PER_REQUEST = 100

export interface PartitionsByIdOptions {
  /** Catalog version; omit for volatile layers. */
  readonly version?: number
  readonly additionalFields?: ReadonlyArray<AdditionalField>
  readonly billingTag?: string
}

export interface QueryApiShape {
  /** Any number of ids, requested in batches of 100 (repeated `partition=` parameters). */
  readonly partitionsById: (
    hrn: string,
    layer: string,
    ids: ReadonlyArray<string>,
    options?: PartitionsByIdOptions
  ) => Effect.Effect<ReadonlyArray<Partition>, LookupFailure>
}

export class QueryApi extends Context.Tag("catalog-export/client/QueryApi")<QueryApi, QueryApiShape>() {
  static readonly layer: Layer.Layer<QueryApi, never, ApiClient | Lookup> = Layer.effect(
    QueryApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup

      const partitionsById = Effect.fn("QueryApi.partitionsById")(function*(
        hrn: string,
        layer: string,
        ids: ReadonlyArray<string>,
        options: PartitionsByIdOptions = {}
      ) {
        if (ids.length === 0) return []
        const root = yield* lookup.baseUrl({ api: "query", version: "v1", hrn })
        const params: Array<[string, string]> = []
        if (options.version !== undefined) params.push(["version", String(options.version)])
        if (options.additionalFields !== undefined && options.additionalFields.length > 0) {
          params.push(["additionalFields", options.additionalFields.join(",")])
        }
        if (options.billingTag !== undefined) params.push(["billingTag", options.billingTag])
        const batches: Array<ReadonlyArray<string>> = []
        for (let i = 0; i < ids.length; i += MAX_IDS_PER_REQUEST) batches.push(ids.slice(i, i + MAX_IDS_PER_REQUEST))
        const pages = yield* Effect.forEach(batches, (batch) =>
          api.json(
            HttpClientRequest.get(joinUrl(root, `/layers/${segment(layer)}/partitions`)).pipe(
              HttpClientRequest.setUrlParams([...batch.map((id) => ["partition", id] as const), ...params])
            ),
            Partitions
          ))
        return pages.flatMap((page) => page.partitions)
      })

      return QueryApi.of({ partitionsById })
    })
  )
}
