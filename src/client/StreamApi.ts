import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type StreamMessage, StreamMessages, type StreamOffset, StreamSubscription } from "../domain/Stream.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/**
 * Stream API v2 consumer: subscribe to a stream layer, read messages, commit what was processed,
 * unsubscribe. Reads go to the subscription's `nodeBaseURL`, not to the lookup base URL.
 */

export interface SubscribeOptions {
  readonly mode?: "serial" | "parallel"
  /** Consumer group; committed offsets are kept per group. */
  readonly groupId?: string
  /** Where a group without committed offsets starts: `earliest` (default) or `latest`. */
  readonly autoOffsetReset?: "earliest" | "latest"
  /** Messages per read (default 500). */
  readonly maxPollRecords?: number
}

/** A live consumer on one layer. */
export interface Consumer extends StreamSubscription {
  readonly catalogHrn: string
  readonly layerId: string
  readonly mode: "serial" | "parallel"
}

export interface StreamApiShape {
  readonly subscribe: (
    hrn: string,
    layerId: string,
    options?: SubscribeOptions
  ) => Effect.Effect<Consumer, LookupFailure>
  /** The next messages after the consumer's position (empty when it has read everything). */
  readonly read: (consumer: Consumer) => Effect.Effect<ReadonlyArray<StreamMessage>, LookupFailure>
  /** Commits the offsets of the last messages processed (the service resumes after them). */
  readonly commit: (consumer: Consumer, offsets: ReadonlyArray<StreamOffset>) => Effect.Effect<void, LookupFailure>
  /** Moves the consumer to the given offsets. */
  readonly seek: (consumer: Consumer, offsets: ReadonlyArray<StreamOffset>) => Effect.Effect<void, LookupFailure>
  readonly unsubscribe: (consumer: Consumer) => Effect.Effect<void, LookupFailure>
}

/** The offset to commit per stream partition: the last message of each. */
export const lastOffsets = (messages: ReadonlyArray<StreamMessage>): ReadonlyArray<StreamOffset> => {
  const last = new Map<number, number>()
  for (const m of messages) last.set(m.offset.partition, Math.max(last.get(m.offset.partition) ?? -1, m.offset.offset))
  return [...last].map(([partition, offset]) => ({ partition, offset }))
}

export class StreamApi extends Context.Tag("catalog-export/client/StreamApi")<StreamApi, StreamApiShape>() {
  static readonly layer: Layer.Layer<StreamApi, never, ApiClient | Lookup> = Layer.effect(
    StreamApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup

      const at = (consumer: Consumer, path: string, request: (url: string) => HttpClientRequest.HttpClientRequest) =>
        request(joinUrl(consumer.nodeBaseURL, `/layers/${segment(consumer.layerId)}${path}`)).pipe(
          HttpClientRequest.setUrlParams({ subscriptionId: consumer.subscriptionId, mode: consumer.mode })
        )

      const subscribe = Effect.fn("StreamApi.subscribe")(
        function*(hrn: string, layerId: string, options: SubscribeOptions = {}) {
          const root = yield* lookup.baseUrl({ api: "stream", version: "v2", hrn })
          const mode = options.mode ?? "serial"
          const properties: Record<string, unknown> = {}
          if (options.groupId !== undefined) properties["group.id"] = options.groupId
          if (options.autoOffsetReset !== undefined) properties["auto.offset.reset"] = options.autoOffsetReset
          if (options.maxPollRecords !== undefined) properties["max.poll.records"] = options.maxPollRecords
          const request = HttpClientRequest.post(joinUrl(root, `/layers/${segment(layerId)}/subscribe`)).pipe(
            HttpClientRequest.setUrlParam("mode", mode),
            HttpClientRequest.bodyUnsafeJson({ kafkaConsumerProperties: properties })
          )
          const subscription = yield* api.json(request, StreamSubscription)
          return { ...subscription, catalogHrn: hrn, layerId, mode } satisfies Consumer
        }
      )

      const read = Effect.fn("StreamApi.read")(function*(consumer: Consumer) {
        return (yield* api.json(at(consumer, "/partitions", HttpClientRequest.get), StreamMessages)).messages
      })

      const commit = Effect.fn("StreamApi.commit")(function*(consumer: Consumer, offsets: ReadonlyArray<StreamOffset>) {
        if (offsets.length === 0) return
        yield* api.discard(
          at(consumer, "/offsets", HttpClientRequest.put).pipe(HttpClientRequest.bodyUnsafeJson({ offsets }))
        )
      })

      const seek = Effect.fn("StreamApi.seek")(function*(consumer: Consumer, offsets: ReadonlyArray<StreamOffset>) {
        yield* api.discard(
          at(consumer, "/seek", HttpClientRequest.put).pipe(HttpClientRequest.bodyUnsafeJson({ offsets }))
        )
      })

      const unsubscribe = Effect.fn("StreamApi.unsubscribe")(function*(consumer: Consumer) {
        yield* api.discard(at(consumer, "/subscribe", HttpClientRequest.del))
      })

      return StreamApi.of({ subscribe, read, commit, seek, unsubscribe })
    })
  )
}
