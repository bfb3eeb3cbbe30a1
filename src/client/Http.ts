import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import type { Dispatcher } from "undici"
import * as Metrics from "../telemetry/Metrics.ts"
import { apiErrorOf, fromClientError, type HttpFailure, requestUrl } from "./ErrorMapping.ts"
import { type RegionUnavailable, type RetryBudgetExhausted, TransportError } from "./Errors.ts"
import { HttpOptions, type HttpOptionsShape, UndiciDispatcher, undiciLayer } from "./HttpOptions.ts"
import { followRedirect, REDIRECT_STATUSES, redirectRefused } from "./Redirects.ts"
import {
  retryEffect,
  retryLimits,
  type RetryLog,
  retryLogger,
  RetryPolicy,
  type RetryPolicyShape,
  retrySchedule,
  retryStream
} from "./Retry.ts"

/**
 * The HTTP stack under every API service: undici (HttpOptions.ts) -> redirects (Redirects.ts) ->
 * error mapping (ErrorMapping.ts) -> the retry policy (Retry.ts). Authorization is added above this
 * layer (ApiClient, Auth); bodies are read with Bodies.ts.
 */

export interface SendOptions {
  /** Statuses returned as a response instead of failing with ApiError; default 2xx. */
  readonly accept?: (status: number) => boolean
  /**
   * A connection refused (nothing listens there) is final, not retried: for a service not known to
   * answer yet, where it means a wrong URL rather than a passing outage (Lookup's first request).
   */
  readonly refusedIsFinal?: boolean
}

export interface HttpShape {
  /** One exchange: follows redirects, maps statuses not accepted to ApiError. No retries. The body is left unread. */
  readonly send: (
    request: HttpClientRequest.HttpClientRequest,
    options?: SendOptions
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, HttpFailure>
  /** Runs `effect` again on transient failures (408, 429, 5xx, transport) under the retry policy. */
  readonly retrying: <A, E, R>(
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | RetryBudgetExhausted | RegionUnavailable, R>
  /**
   * Runs `stream` again on transient failures under the retry policy, its budget starting afresh
   * whenever an element comes through (a resumable download that made progress).
   */
  readonly retryingStream: <A, E, R>(
    stream: Stream.Stream<A, E, R>
  ) => Stream.Stream<A, E | RetryBudgetExhausted | RegionUnavailable, R>
  /** The undici dispatcher under the stack, for hot paths that drive it directly (BlobFetcher). */
  readonly dispatcher: Dispatcher
  /** How this client's retries are logged (the first of each kind on stderr), for those that retry outside `retrying` (BlobFetcher). */
  readonly logRetry: RetryLog
}

export class Http extends Context.Tag("catalog-export/client/Http")<Http, HttpShape>() {
  /** The stack over undici, with its options (for use without the rest of the client). */
  static readonly layerUndici = (
    options: { readonly http?: Partial<HttpOptionsShape>; readonly retry?: Partial<RetryPolicyShape> } = {}
  ) =>
    Http.layer.pipe(
      Layer.provide(undiciLayer),
      Layer.provideMerge(Layer.merge(HttpOptions.layer(options.http), RetryPolicy.layer(options.retry)))
    )

  static readonly layer: Layer.Layer<
    Http,
    never,
    HttpClient.HttpClient | UndiciDispatcher | HttpOptions | RetryPolicy
  > = Layer.effect(
    Http,
    Effect.gen(function*() {
      const options = yield* HttpOptions
      const limits = retryLimits(yield* RetryPolicy)
      const logRetry = retryLogger(limits)
      const schedule = retrySchedule(limits, logRetry)
      const client = (yield* HttpClient.HttpClient).pipe(HttpClient.withTracerDisabledWhen(() => true))

      const send = (request: HttpClientRequest.HttpClientRequest, sendOptions?: SendOptions) =>
        Effect.gen(function*() {
          const accept = sendOptions?.accept ?? isSuccess
          let current = HttpClientRequest.setHeader(request, "user-agent", options.userAgent)
          for (let hops = 0;; hops++) {
            const sentAt = Metrics.requestTiming.enabled ? performance.now() : 0
            const response = yield* client.execute(current).pipe(
              Effect.mapError((e) => {
                const failure = fromClientError(current, e)
                return sendOptions?.refusedIsFinal === true && failure.code === "ECONNREFUSED"
                  ? new TransportError({
                    method: failure.method,
                    url: failure.url,
                    reason: failure.reason,
                    code: failure.code,
                    retriable: false
                  })
                  : failure
              })
            )
            if (Metrics.requestTiming.enabled) Metrics.apiAnswered(performance.now() - sentAt)
            const location = response.headers["location"]
            if (REDIRECT_STATUSES.has(response.status) && location !== undefined) {
              yield* Effect.ignore(response.arrayBuffer)
              if (hops >= options.maxRedirects) {
                return yield* redirectRefused(
                  current.method,
                  requestUrl(current),
                  response.status,
                  "too many",
                  options.maxRedirects
                )
              }
              current = yield* followRedirect(current, response.status, location, options.maxRedirects)
              continue
            }
            if (accept(response.status)) return response
            return yield* Effect.fail(yield* apiErrorOf(response))
          }
        })

      return Http.of({
        send,
        retrying: retryEffect(schedule),
        retryingStream: retryStream(schedule),
        dispatcher: yield* UndiciDispatcher,
        logRetry
      })
    })
  )
}

export const isSuccess = (status: number) => status >= 200 && status < 300
