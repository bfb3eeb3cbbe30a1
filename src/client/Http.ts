import * as Headers from "@effect/platform/Headers"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Clock, Context, Duration, Effect, Either, FiberRef, Layer, Random, Stream } from "effect"
import { Agent, type Dispatcher, EnvHttpProxyAgent } from "undici"
import * as ErrorBody from "../domain/ErrorBody.ts"
import { TOOL } from "../domain/Tool.ts"
import * as Metrics from "../telemetry/Metrics.ts"
import { ApiError, redactUrl, RegionUnavailable, RetryBudgetExhausted, TransportError } from "./Errors.ts"
import { isOutage, isTransient, outageLimit, retryDelay, retryLimits, RetryPolicy, type RetryPolicyShape, retryReason, RetryTally } from "./Retry.ts"

export { isRetriableStatus, isTransient, RetryPolicy, type RetryPolicyShape } from "./Retry.ts"

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

export type HttpFailure = ApiError | TransportError

export interface SendOptions {
  /** Statuses returned as a response instead of failing with ApiError; default 2xx. */
  readonly accept?: (status: number) => boolean
}

/** Decides the wait before each retry of one logical request and fails when the budget is spent. */
export interface RetrySession {
  readonly backoff: <E>(error: E) => Effect.Effect<void, E | RetryBudgetExhausted | RegionUnavailable>
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
  readonly retrying: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | RetryBudgetExhausted | RegionUnavailable, R>
  readonly retrySession: Effect.Effect<RetrySession>
  /** Retries made so far by this stack (for run summaries). */
  readonly retryCount: Effect.Effect<number>
  /** Counts a retry made outside `retrying` (the blob fetcher's own loop), by `retryReason`. */
  readonly recordRetry: (reason: string) => void
  /** The undici dispatcher under the stack, for hot paths that drive it directly (BlobFetcher). */
  readonly dispatcher: Dispatcher
}

/** The undici Agent every request of the client goes through. */
export class UndiciDispatcher extends Context.Tag("catalog-export/client/UndiciDispatcher")<UndiciDispatcher, Dispatcher>() {}

export class Http extends Context.Tag("catalog-export/client/Http")<Http, HttpShape>() {
  /** The stack over undici, with its options (for use without the rest of the client). */
  static readonly layerUndici = (options: { readonly http?: Partial<HttpOptionsShape>; readonly retry?: Partial<RetryPolicyShape> } = {}) =>
    Http.layer.pipe(
      Layer.provide(undiciLayer),
      Layer.provideMerge(Layer.merge(HttpOptions.layer(options.http), RetryPolicy.layer(options.retry)))
    )

  static readonly layer: Layer.Layer<Http, never, HttpClient.HttpClient | UndiciDispatcher | HttpOptions | RetryPolicy> = Layer.effect(
    Http,
    Effect.gen(function* () {
      const options = yield* HttpOptions
      const limits = retryLimits(yield* RetryPolicy)
      const client = (yield* HttpClient.HttpClient).pipe(HttpClient.withTracerDisabledWhen(() => true))
      const dispatcher = yield* UndiciDispatcher
      let retries = 0
      const recordRetry = (reason: string) => {
        retries++
        Metrics.retried(reason)
      }

      const send = (request: HttpClientRequest.HttpClientRequest, sendOptions?: SendOptions) =>
        Effect.gen(function* () {
          const accept = sendOptions?.accept ?? isSuccess
          let current = HttpClientRequest.setHeader(request, "user-agent", options.userAgent)
          for (let hops = 0; ; hops++) {
            const sentAt = Metrics.requestTiming.enabled ? performance.now() : 0
            const response = yield* client.execute(current).pipe(Effect.mapError((e) => fromClientError(current, e)))
            if (Metrics.requestTiming.enabled) Metrics.apiAnswered(performance.now() - sentAt)
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
        let startedAt = yield* Clock.currentTimeMillis
        let attempt = 0
        let outages = 0
        const limit = yield* FiberRef.get(outageLimit)
        const session: RetrySession = {
          reset: Effect.map(Clock.currentTimeMillis, (now) => {
            startedAt = now
            attempt = 0
            outages = 0
          }),
          backoff: <E>(error: E) =>
            Effect.gen(function* () {
              if (!isTransient(error)) return yield* Effect.fail(error)
              outages = isOutage(error) ? outages + 1 : 0
              if (limit !== undefined && outages >= limit) {
                return yield* new RegionUnavailable({ method: error.method, url: error.url, failures: outages, lastError: error })
              }
              const elapsed = (yield* Clock.currentTimeMillis) - startedAt
              const retryAfterMs = error._tag === "ApiError" ? error.retryAfterMs : undefined
              const delay = retryDelay(limits, attempt, elapsed, retryAfterMs, yield* Random.next)
              if (delay === undefined) {
                return yield* new RetryBudgetExhausted({ method: error.method, url: error.url, retries: attempt, elapsedMs: elapsed, lastError: error })
              }
              attempt++
              const reason = retryReason(error)
              recordRetry(reason)
              ;(yield* RetryTally).retried(reason)
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
            const loop: Effect.Effect<A, E | RetryBudgetExhausted | RegionUnavailable, R> = Effect.catchAll(effect, (error) =>
              Effect.zipRight(session.backoff(error), Effect.suspend(() => loop))
            )
            return Effect.zipRight(session.backoff(first), loop)
          })
        )

      return Http.of({
        send,
        retrying,
        retrySession: makeSession,
        retryCount: Effect.sync(() => retries),
        recordRetry,
        dispatcher
      })
    })
  )
}

export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])

export const isSuccess = (status: number) => status >= 200 && status < 300

export const describeFailure = (error: HttpFailure) =>
  error._tag === "ApiError" ? String(error.status) : `${error.reason}${error.code === undefined ? "" : ` (${error.code})`}`

/** The full URL a request goes to. */
export const requestUrl = (request: HttpClientRequest.HttpClientRequest): string => {
  const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
  return Either.isRight(url) ? url.right.toString() : request.url
}

export interface Redirect {
  readonly url: URL
  readonly method: string
  /** Credentials never follow a redirect to another origin (e.g. a presigned storage URL). */
  readonly dropAuthorization: boolean
  /** 303, and 301/302 after a POST, turn the request into a body-less GET. */
  readonly toGet: boolean
}

/** Where a redirect answer sends a request; undefined when the Location is not a URL. */
export const redirectOf = (method: string, status: number, from: string, location: string): Redirect | undefined => {
  let url: URL
  try {
    url = new URL(location, from)
  } catch {
    return undefined
  }
  const toGet = status === 303 ? method !== "HEAD" : (status === 301 || status === 302) && method === "POST"
  return { url, method: toGet ? "GET" : method, dropAuthorization: new URL(from).origin !== url.origin, toGet }
}

const followRedirect = (current: HttpClientRequest.HttpClientRequest, status: number, location: string) =>
  Effect.gen(function* () {
    const from = requestUrl(current)
    const redirect = redirectOf(current.method, status, from, location)
    if (redirect === undefined) {
      return yield* new ApiError({
        status,
        method: current.method,
        url: redactUrl(from),
        title: "Invalid redirect",
        detail: "the Location header is not a URL"
      })
    }
    let headers = current.headers
    if (redirect.dropAuthorization) headers = Headers.remove(headers, "authorization")
    if (redirect.toGet) headers = Headers.remove(headers, ["content-type", "content-length", "content-encoding"])
    const next = HttpClientRequest.setMethod(HttpClientRequest.get(redirect.url), redirect.method as HttpClientRequest.HttpClientRequest["method"])
    const withHeaders = HttpClientRequest.setHeaders(next, headers)
    return redirect.toGet ? HttpClientRequest.setBody(withHeaders, HttpBody.empty) : HttpClientRequest.setBody(withHeaders, current.body)
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

/** A failure to get a complete answer, classified retriable unless it is DNS, TLS or an invalid request. */
export const transportFailure = (method: string, url: string, cause: unknown, retriable?: boolean) => {
  const code = causeCode(cause)
  return new TransportError({
    method,
    url: redactUrl(url),
    reason: causeMessage(cause),
    code,
    retriable: retriable ?? (code === undefined || !NON_RETRIABLE_CODE.test(code))
  })
}

export const transportError = (request: HttpClientRequest.HttpClientRequest, cause: unknown, retriable?: boolean) =>
  transportFailure(request.method, requestUrl(request), cause, retriable)

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
    return apiErrorFrom(request.method, requestUrl(request), response.status, response.headers, body, yield* Clock.currentTimeMillis)
  })

/** An error answer as an ApiError: its body described (facts §10), Retry-After relative to the server's Date when known. */
export const apiErrorFrom = (
  method: string,
  url: string,
  status: number,
  headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>,
  body: string,
  now: number
) => {
  const header = (name: string) => {
    const value = headers[name]
    return typeof value === "string" ? value : value?.[0]
  }
  const description = ErrorBody.describe(body, { "x-correlation-id": header("x-correlation-id"), "x-request-id": header("x-request-id") })
  const serverTime = parseHttpDate(header("date"))
  return new ApiError({
    status,
    method,
    url: redactUrl(url),
    title: description.title,
    detail: description.detail,
    code: description.code,
    correlationId: description.correlationId,
    retryAfterMs: parseRetryAfter(header("retry-after"), serverTime ?? now),
    serverTime
  })
}

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

/** Connections per origin beyond `concurrency`: room for the listings of an export's parts and the odd lookup. */
const CONTROL_CONNECTIONS = 8

/** Whether the standard proxy variables ask for one (then NO_PROXY / no_proxy says which hosts go direct). */
export const proxyConfigured = (env: NodeJS.ProcessEnv = process.env) =>
  [env.HTTPS_PROXY, env.https_proxy, env.HTTP_PROXY, env.http_proxy].some((v) => v !== undefined && v !== "")

/**
 * undici Agent tuned for many small requests to few origins; behind HTTPS_PROXY / HTTP_PROXY (and
 * NO_PROXY) an EnvHttpProxyAgent with the same pool, timeouts and TLS floor, towards the proxy and
 * through its CONNECT tunnel to the service alike. Extra CA certificates (a corporate proxy's) come
 * from NODE_EXTRA_CA_CERTS, which Node reads at start.
 */
export const makeAgent = (options: HttpOptionsShape) => {
  const headersTimeout = Duration.toMillis(options.firstByteTimeout)
  const bodyTimeout = Duration.toMillis(options.idleTimeout)
  const tls = { timeout: Duration.toMillis(options.connectTimeout), minVersion: "TLSv1.2" as const }
  const agentOptions = {
    // Listings, lookups and token requests run beside the `concurrency` blob downloads, often on the
    // same origin (the local service): they get connections of their own rather than one of those.
    connections: options.concurrency + CONTROL_CONNECTIONS,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: Duration.toMillis(options.keepAliveTimeout),
    keepAliveMaxTimeout: Math.max(Duration.toMillis(options.keepAliveTimeout), 60_000),
    headersTimeout,
    bodyTimeout,
    connect: tls
  }
  const agent: Dispatcher = proxyConfigured() ? new EnvHttpProxyAgent({ ...agentOptions, proxyTls: tls, requestTls: tls }) : new Agent(agentOptions)
  // @effect/platform-node passes its own (disabled) timeouts with every request; restore ours.
  const dispatcher = agent.compose((dispatch) => (opts, handler) => dispatch({ ...opts, headersTimeout, bodyTimeout }, handler))
  return { agent, dispatcher }
}

/** HttpClient over a tuned undici Agent (closed with the layer's scope), and the Agent itself. */
export const undiciLayer: Layer.Layer<HttpClient.HttpClient | UndiciDispatcher, never, HttpOptions> = Layer.unwrapScoped(
  Effect.gen(function* () {
    const options = yield* HttpOptions
    const { agent, dispatcher } = yield* Effect.acquireRelease(
      Effect.sync(() => makeAgent(options)),
      ({ agent }) => Effect.promise(() => agent.destroy())
    )
    return Layer.merge(
      NodeHttpClient.layerUndiciWithoutDispatcher.pipe(Layer.provide(Layer.succeed(NodeHttpClient.Dispatcher, dispatcher))),
      Layer.succeed(UndiciDispatcher, agent)
    )
  })
)
