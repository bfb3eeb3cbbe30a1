import * as Headers from "@effect/platform/Headers"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Clock, Context, Duration, Effect, Either, Layer, Random, Ref, Stream } from "effect"
import { Agent } from "undici"
import * as ErrorBody from "../domain/ErrorBody.ts"
import { TOOL } from "../domain/Tool.ts"
import { ApiError, redactUrl, RetryBudgetExhausted, TransportError } from "./Errors.ts"

/**
 * The HTTP stack under every API service: undici (keep-alive, bounded connections, timeouts,
 * TLS >= 1.2, HTTP/1.1) -> manual redirects -> error mapping -> retries with full-jitter backoff
 * honouring Retry-After. Authorization is added above this layer (ApiClient, Auth).
 */

export interface HttpOptionsShape {
  /** Connections per origin; size it to the number of requests the caller runs at once. */
  readonly concurrency: number
  readonly connectTimeout: Duration.DurationInput
  /** Time to the first byte of the response headers. */
  readonly firstByteTimeout: Duration.DurationInput
  /** Longest pause between two body chunks. */
  readonly idleTimeout: Duration.DurationInput
  readonly keepAliveTimeout: Duration.DurationInput
  readonly maxRedirects: number
  readonly userAgent: string
}

export class HttpOptions extends Context.Tag("catalog-export/client/HttpOptions")<HttpOptions, HttpOptionsShape>() {
  static readonly defaults: HttpOptionsShape = {
    concurrency: 16,
    connectTimeout: "10 seconds",
    firstByteTimeout: "60 seconds",
    idleTimeout: "30 seconds",
    keepAliveTimeout: "10 seconds",
    maxRedirects: 10,
    userAgent: `${TOOL.name}/${TOOL.version}`
  }
  static readonly layer = (options: Partial<HttpOptionsShape> = {}) =>
    Layer.succeed(HttpOptions, { ...HttpOptions.defaults, ...options })
}

export interface RetryPolicyShape {
  /** Retries per request (attempts = retries + 1). */
  readonly maxRetries: number
  /** Total time a request may spend retrying; a wait that would pass it fails at once. */
  readonly maxElapsed: Duration.DurationInput
  /** Backoff before retry n is uniform in [0, min(maxDelay, baseDelay * 2^n)]. */
  readonly baseDelay: Duration.DurationInput
  /** Cap of any single wait, Retry-After included. */
  readonly maxDelay: Duration.DurationInput
}

export class RetryPolicy extends Context.Tag("catalog-export/client/RetryPolicy")<RetryPolicy, RetryPolicyShape>() {
  static readonly defaults: RetryPolicyShape = {
    maxRetries: 20,
    maxElapsed: "10 minutes",
    baseDelay: "250 millis",
    maxDelay: "60 seconds"
  }
  static readonly layer = (options: Partial<RetryPolicyShape> = {}) =>
    Layer.succeed(RetryPolicy, { ...RetryPolicy.defaults, ...options })
}

export type HttpFailure = ApiError | TransportError

export interface SendOptions {
  /** Statuses returned as a response instead of failing with ApiError; default 2xx. */
  readonly accept?: (status: number) => boolean
}

/** Decides the wait before each retry of one logical request and fails when the budget is spent. */
export interface RetrySession {
  readonly backoff: <E>(error: E) => Effect.Effect<void, E | RetryBudgetExhausted>
  /** Starts the budget afresh, e.g. after a resumed download made progress. */
  readonly reset: Effect.Effect<void>
}

export interface HttpShape {
  /** One exchange: follows redirects, maps statuses not accepted to ApiError. No retries. The body is left unread. */
  readonly send: (
    request: HttpClientRequest.HttpClientRequest,
    options?: SendOptions
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, HttpFailure>
  /** Runs `effect` again on transient failures (408, 429, 5xx, transport) under the retry policy. */
  readonly retrying: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | RetryBudgetExhausted, R>
  readonly retrySession: Effect.Effect<RetrySession>
  /** Retries made so far by this stack (for run summaries). */
  readonly retryCount: Effect.Effect<number>
}

export class Http extends Context.Tag("catalog-export/client/Http")<Http, HttpShape>() {
  /** The stack over undici, with its options (for use without the rest of the client). */
  static readonly layerUndici = (options: { readonly http?: Partial<HttpOptionsShape>; readonly retry?: Partial<RetryPolicyShape> } = {}) =>
    Http.layer.pipe(
      Layer.provide(undiciLayer),
      Layer.provideMerge(Layer.merge(HttpOptions.layer(options.http), RetryPolicy.layer(options.retry)))
    )

  static readonly layer: Layer.Layer<Http, never, HttpClient.HttpClient | HttpOptions | RetryPolicy> = Layer.effect(
    Http,
    Effect.gen(function* () {
      const options = yield* HttpOptions
      const policy = yield* RetryPolicy
      const client = (yield* HttpClient.HttpClient).pipe(HttpClient.withTracerDisabledWhen(() => true))
      const retries = yield* Ref.make(0)

      const send = (request: HttpClientRequest.HttpClientRequest, sendOptions?: SendOptions) =>
        Effect.gen(function* () {
          const accept = sendOptions?.accept ?? isSuccess
          let current = HttpClientRequest.setHeader(request, "user-agent", options.userAgent)
          for (let hops = 0; ; hops++) {
            const response = yield* client.execute(current).pipe(Effect.mapError((e) => fromClientError(current, e)))
            const location = response.headers["location"]
            if (REDIRECT_STATUSES.has(response.status) && location !== undefined) {
              yield* Effect.ignore(response.arrayBuffer)
              if (hops >= options.maxRedirects) {
                return yield* new ApiError({
                  status: response.status,
                  method: current.method,
                  url: redactUrl(requestUrl(current)),
                  title: "Too many redirects",
                  detail: `more than ${options.maxRedirects} redirects`
                })
              }
              current = yield* followRedirect(current, response.status, location)
              continue
            }
            if (accept(response.status)) return response
            return yield* Effect.fail(yield* apiErrorOf(response))
          }
        })

      const makeSession = Effect.gen(function* () {
        const maxElapsed = Duration.toMillis(policy.maxElapsed)
        const baseDelay = Duration.toMillis(policy.baseDelay)
        const maxDelay = Duration.toMillis(policy.maxDelay)
        let startedAt = yield* Clock.currentTimeMillis
        let attempt = 0
        const session: RetrySession = {
          reset: Effect.map(Clock.currentTimeMillis, (now) => {
            startedAt = now
            attempt = 0
          }),
          backoff: <E>(error: E) =>
            Effect.gen(function* () {
              if (!isTransient(error)) return yield* Effect.fail(error)
              const now = yield* Clock.currentTimeMillis
              const elapsed = now - startedAt
              const ceiling = Math.min(maxDelay, baseDelay * 2 ** attempt)
              const jittered = Math.floor((yield* Random.next) * ceiling)
              const delay = Math.min(maxDelay, error._tag === "ApiError" && error.retryAfterMs !== undefined ? error.retryAfterMs : jittered)
              if (attempt >= policy.maxRetries || elapsed + delay > maxElapsed) {
                return yield* new RetryBudgetExhausted({
                  method: error.method,
                  url: error.url,
                  retries: attempt,
                  elapsedMs: elapsed,
                  lastError: error
                })
              }
              attempt++
              yield* Ref.update(retries, (n) => n + 1)
              yield* Effect.logDebug("retrying request").pipe(
                Effect.annotateLogs({ method: error.method, url: error.url, failure: describeFailure(error), attempt, delayMs: delay })
              )
              yield* Effect.sleep(Duration.millis(delay))
            })
        }
        return session
      })

      // The retry session (budget, clock) is made on the first failure, not for every request.
      const retrying = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.catchAll(effect, (first) =>
          Effect.flatMap(makeSession, (session) => {
            const loop: Effect.Effect<A, E | RetryBudgetExhausted, R> = Effect.catchAll(effect, (error) =>
              Effect.zipRight(session.backoff(error), Effect.suspend(() => loop))
            )
            return Effect.zipRight(session.backoff(first), loop)
          })
        )

      return Http.of({ send, retrying, retrySession: makeSession, retryCount: Ref.get(retries) })
    })
  )
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])

export const isSuccess = (status: number) => status >= 200 && status < 300

const isRetriableStatus = (status: number) => status === 408 || status === 429 || (status >= 500 && status <= 599)

export const isTransient = (error: unknown): error is HttpFailure =>
  (error instanceof ApiError && isRetriableStatus(error.status)) || (error instanceof TransportError && error.retriable)

const describeFailure = (error: HttpFailure) =>
  error._tag === "ApiError" ? String(error.status) : `${error.reason}${error.code === undefined ? "" : ` (${error.code})`}`

/** The full URL a request goes to. */
export const requestUrl = (request: HttpClientRequest.HttpClientRequest): string => {
  const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
  return Either.isRight(url) ? url.right.toString() : request.url
}

const followRedirect = (current: HttpClientRequest.HttpClientRequest, status: number, location: string) =>
  Effect.gen(function* () {
    const from = requestUrl(current)
    let to: URL
    try {
      to = new URL(location, from)
    } catch {
      return yield* new ApiError({
        status,
        method: current.method,
        url: redactUrl(from),
        title: "Invalid redirect",
        detail: "the Location header is not a URL"
      })
    }
    const toGet = status === 303 ? current.method !== "HEAD" : (status === 301 || status === 302) && current.method === "POST"
    let headers = current.headers
    // Credentials must not follow a redirect to another origin (e.g. a presigned storage URL).
    if (new URL(from).origin !== to.origin) headers = Headers.remove(headers, "authorization")
    if (toGet) headers = Headers.remove(headers, ["content-type", "content-length", "content-encoding"])
    const next = HttpClientRequest.setMethod(HttpClientRequest.get(to), toGet ? "GET" : current.method)
    const withHeaders = HttpClientRequest.setHeaders(next, headers)
    return toGet ? HttpClientRequest.setBody(withHeaders, HttpBody.empty) : HttpClientRequest.setBody(withHeaders, current.body)
  })

const NON_RETRIABLE_CODE = /^(ENOTFOUND|ERR_TLS|ERR_SSL|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|EPROTO|UND_ERR_INVALID_ARG|ERR_INVALID)/

const causeCode = (cause: unknown): string | undefined => {
  for (let c: any = cause, i = 0; c !== undefined && c !== null && i < 4; c = c.cause, i++) {
    if (typeof c.code === "string") return c.code
  }
  return undefined
}

const causeMessage = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = cause.cause instanceof Error && cause.cause.message !== cause.message ? `: ${cause.cause.message}` : ""
    return `${cause.message}${inner}`
  }
  return String(cause)
}

export const transportError = (request: HttpClientRequest.HttpClientRequest, cause: unknown, retriable?: boolean) => {
  const code = causeCode(cause)
  return new TransportError({
    method: request.method,
    url: redactUrl(requestUrl(request)),
    reason: causeMessage(cause),
    code,
    retriable: retriable ?? (code === undefined || !NON_RETRIABLE_CODE.test(code))
  })
}

const fromClientError = (request: HttpClientRequest.HttpClientRequest, error: HttpClientError.HttpClientError) =>
  error._tag === "RequestError" && error.reason !== "Transport"
    ? transportError(request, error.cause ?? error.description ?? error.reason, false)
    : transportError(request, error.cause ?? error)

/** A response body failure (connection cut, idle timeout) as a retriable TransportError. */
export const bodyError = (response: HttpClientResponse.HttpClientResponse) => (error: HttpClientError.ResponseError) =>
  transportError(response.request, error.cause ?? error)

export const readText = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string, TransportError> =>
  Effect.mapError(response.text, bodyError(response))

export const readBytes = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<Uint8Array, TransportError> =>
  Effect.mapError(
    Effect.map(response.arrayBuffer, (buffer) => new Uint8Array(buffer)),
    bodyError(response)
  )

export const bodyStream = (response: HttpClientResponse.HttpClientResponse): Stream.Stream<Uint8Array, TransportError> =>
  Stream.mapError(response.stream, bodyError(response))

/** Reads an error response into an ApiError (body shape per facts §10, Retry-After, server Date). */
export const apiErrorOf = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function* () {
    const request = response.request
    const body = request.method === "HEAD" ? "" : yield* Effect.orElseSucceed(response.text, () => "")
    const description = ErrorBody.describe(body, response.headers)
    const now = yield* Clock.currentTimeMillis
    const serverTime = parseHttpDate(response.headers["date"])
    return new ApiError({
      status: response.status,
      method: request.method,
      url: redactUrl(requestUrl(request)),
      title: description.title,
      detail: description.detail,
      code: description.code,
      correlationId: description.correlationId,
      retryAfterMs: parseRetryAfter(response.headers["retry-after"], serverTime ?? now),
      serverTime
    })
  })

export const parseHttpDate = (value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const time = Date.parse(value)
  return Number.isNaN(time) ? undefined : time
}

/** `Retry-After` as milliseconds: delay-seconds, or an HTTP date relative to `now` (the server's Date when known). */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = parseHttpDate(trimmed)
  return at === undefined ? undefined : Math.max(0, at - now)
}

/** undici Agent tuned for many small requests to few origins. */
export const makeAgent = (options: HttpOptionsShape) => {
  const headersTimeout = Duration.toMillis(options.firstByteTimeout)
  const bodyTimeout = Duration.toMillis(options.idleTimeout)
  const agent = new Agent({
    connections: options.concurrency,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: Duration.toMillis(options.keepAliveTimeout),
    keepAliveMaxTimeout: Math.max(Duration.toMillis(options.keepAliveTimeout), 60_000),
    headersTimeout,
    bodyTimeout,
    connect: { timeout: Duration.toMillis(options.connectTimeout), minVersion: "TLSv1.2" }
  })
  // @effect/platform-node passes its own (disabled) timeouts with every request; restore ours.
  const dispatcher = agent.compose((dispatch) => (opts, handler) => dispatch({ ...opts, headersTimeout, bodyTimeout }, handler))
  return { agent, dispatcher }
}

/** HttpClient over a tuned undici Agent, closed with the layer's scope. */
export const undiciLayer: Layer.Layer<HttpClient.HttpClient, never, HttpOptions> = NodeHttpClient.layerUndiciWithoutDispatcher.pipe(
  Layer.provide(
    Layer.scoped(
      NodeHttpClient.Dispatcher,
      Effect.gen(function* () {
        const options = yield* HttpOptions
        const { dispatcher } = yield* Effect.acquireRelease(
          Effect.sync(() => makeAgent(options)),
          ({ agent }) => Effect.promise(() => agent.destroy())
        )
        return dispatcher
      })
    )
  )
)
