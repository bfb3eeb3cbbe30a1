import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Auth } from "./Auth.ts"
import { bodyStream, readBytes, readText } from "./Bodies.ts"
import { requestUrl } from "./ErrorMapping.ts"
import { ApiError, redactUrl, type RequestFailure, ResponseDecodeError, TransportError } from "./Errors.ts"
import { Http, type SendOptions } from "./Http.ts"
import { sameOrigin } from "./Redirects.ts"

/**
 * Authorized requests to the Data APIs: bearer token on every request, retries per the policy,
 * and on a 401 one retry with a freshly issued token.
 */

export type ResumeFailure = RequestFailure | ResponseDecodeError

export interface ResumeOptions<A = Uint8Array, E = never> {
  /** First byte wanted (default 0) and last byte, inclusive (default: to the end). */
  readonly range?: { readonly start: number; readonly end?: number }
  /**
   * Where to continue after a cut connection (absolute offset). Defaults to the bytes delivered so
   * far; a parser that can only restart at element boundaries rewinds itself here.
   */
  readonly resumeAt?: () => number
  /** Whether the bytes seen form the whole document; a clean end of an incomplete body is a cut too. */
  readonly isComplete?: () => boolean
  /**
   * What the bytes become (e.g. the partitions parsed from them). The retry budget starts afresh
   * whenever one comes through: progress is counted in them, so a body cut again and again before
   * the next complete element is given up on like any failing request. Default: the bytes.
   */
  readonly decode?: (bytes: Stream.Stream<Uint8Array, ResumeFailure>) => Stream.Stream<A, E | ResumeFailure>
}

export interface ApiClientShape {
  /** Sends the request authorized and retried, then runs `use` on the response; `use` is part of each attempt. */
  readonly use: <A, E>(
    request: HttpClientRequest.HttpClientRequest,
    use: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A, E>,
    options?: SendOptions
  ) => Effect.Effect<A, E | RequestFailure>
  /** Sends the request authorized and retried; the body is left for the caller. */
  readonly execute: (
    request: HttpClientRequest.HttpClientRequest,
    options?: SendOptions
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, RequestFailure>
  /** Sends the request and decodes the JSON answer (reading the body is part of each attempt). */
  readonly json: <A, I>(
    request: HttpClientRequest.HttpClientRequest,
    schema: Schema.Schema<A, I>,
    options?: SendOptions
  ) => Effect.Effect<A, RequestFailure | ResponseDecodeError>
  /** Sends the request and returns the whole body. */
  readonly bytes: (
    request: HttpClientRequest.HttpClientRequest,
    options?: SendOptions
  ) => Effect.Effect<
    { readonly response: HttpClientResponse.HttpClientResponse; readonly bytes: Uint8Array },
    RequestFailure
  >
  /** Sends the request and drops the body; for 204-style answers. */
  readonly discard: (
    request: HttpClientRequest.HttpClientRequest,
    options?: SendOptions
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, RequestFailure>
  /**
   * Streams the body of a GET (decoded by `options.decode`); a cut connection continues with
   * `Range: bytes=N-` (206, or 200 with N bytes skipped) under the retry policy.
   */
  readonly resumable: <A = Uint8Array, E = never>(
    request: HttpClientRequest.HttpClientRequest,
    options?: ResumeOptions<A, E>
  ) => Stream.Stream<A, E | ResumeFailure>
}

export class ApiClient extends Context.Tag("catalog-export/client/ApiClient")<ApiClient, ApiClientShape>() {
  static readonly layer: Layer.Layer<ApiClient, never, Http | Auth> = Layer.effect(
    ApiClient,
    Effect.gen(function*() {
      const http = yield* Http
      const auth = yield* Auth

      const use = <A, E>(
        request: HttpClientRequest.HttpClientRequest,
        f: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<A, E>,
        options?: SendOptions
      ): Effect.Effect<A, E | RequestFailure> => {
        const once = (token: Redacted.Redacted<string>) =>
          Effect.flatMap(http.send(HttpClientRequest.bearerToken(request, token), options), f)
        // The token is taken afresh for every attempt: a request retried for longer than a token
        // lives (Retry-After waits) must not keep sending the one it started with.
        const attempt = Effect.flatMap(
          auth.token,
          (token) =>
            Effect.catchIf(
              once(token),
              (e) => isUnauthorized(e, request),
              () => Effect.zipRight(auth.invalidate(token), Effect.flatMap(auth.token, once))
            )
        )
        return http.retrying(attempt)
      }

      const execute = (request: HttpClientRequest.HttpClientRequest, options?: SendOptions) =>
        use(request, Effect.succeed, options)

      const json = <A, I>(
        request: HttpClientRequest.HttpClientRequest,
        schema: Schema.Schema<A, I>,
        options?: SendOptions
      ) => {
        const decode = Schema.decodeUnknown(schema, { onExcessProperty: "ignore" })
        const read = (response: HttpClientResponse.HttpClientResponse) =>
          Effect.gen(function*() {
            const text = yield* readText(response)
            const decodeError = (reason: string) =>
              new ResponseDecodeError({
                method: response.request.method,
                url: redactUrl(requestUrl(response.request)),
                status: response.status,
                reason
              })
            let body: unknown
            try {
              body = text === "" ? undefined : JSON.parse(text)
            } catch (e) {
              return yield* decodeError(`invalid JSON (${e instanceof Error ? e.message : String(e)})`)
            }
            return yield* Effect.mapError(
              decode(body),
              (e) => decodeError(ParseResult.TreeFormatter.formatErrorSync(e))
            )
          })
        return use(HttpClientRequest.acceptJson(request), read, options)
      }

      const bytes = (request: HttpClientRequest.HttpClientRequest, options?: SendOptions) =>
        use(request, (response) => Effect.map(readBytes(response), (bytes) => ({ response, bytes })), options)

      const discard = (request: HttpClientRequest.HttpClientRequest, options?: SendOptions) =>
        use(request, (response) => Effect.as(Effect.ignore(response.arrayBuffer), response), options)

      const resumable = <A = Uint8Array, E = never>(
        request: HttpClientRequest.HttpClientRequest,
        options: ResumeOptions<A, E> = {}
      ) =>
        Stream.suspend(() => {
          const first = options.range?.start ?? 0
          const last = options.range?.end
          let delivered = first
          let expectedEnd: number | undefined // exclusive
          let attempts = 0
          const resumeAt = options.resumeAt ?? (() => delivered)
          const isComplete = options.isComplete ?? (() => expectedEnd === undefined || delivered >= expectedEnd)
          // Without `decode`, A is its default, Uint8Array.
          const decode = options.decode ?? ((bytes) => bytes as unknown as Stream.Stream<A, ResumeFailure>)

          /** One request for the bytes from `offset` on; ending before the document is complete is a cut. */
          const from = (offset: number): Stream.Stream<Uint8Array, ResumeFailure> =>
            Stream.unwrap(
              Effect.gen(function*() {
                const ranged = offset > 0 || last !== undefined
                  ? HttpClientRequest.setHeader(request, "range", `bytes=${offset}-${last ?? ""}`)
                  : request
                const response = yield* execute(ranged)
                const start = response.status === 206 ? contentRangeStart(response.headers["content-range"]) : 0
                if (start === undefined || start > offset) {
                  yield* Effect.ignore(response.arrayBuffer)
                  return yield* new ResponseDecodeError({
                    method: ranged.method,
                    url: redactUrl(requestUrl(ranged)),
                    status: response.status,
                    reason: `asked for bytes from ${offset}, got Content-Range "${
                      response.headers["content-range"] ?? ""
                    }"`
                  })
                }
                expectedEnd = expectedEndOf(response, start, last)
                delivered = offset
                let skip = offset - start
                const body = bodyStream(response).pipe(
                  Stream.map((chunk) => {
                    if (skip > 0) {
                      const dropped = Math.min(skip, chunk.length)
                      skip -= dropped
                      chunk = chunk.subarray(dropped)
                    }
                    if (expectedEnd !== undefined && delivered + chunk.length > expectedEnd) {
                      chunk = chunk.subarray(0, Math.max(0, expectedEnd - delivered))
                    }
                    delivered += chunk.length
                    return chunk
                  }),
                  Stream.filter((chunk) => chunk.length > 0)
                )
                return Stream.concat(
                  body,
                  Stream.suspend(() =>
                    isComplete()
                      ? Stream.empty
                      : Stream.fail(transportCut(ranged, "the response ended before the document was complete"))
                  )
                )
              })
            )

          // Each attempt after the first continues where the last one's usable bytes ended.
          const attempt = Stream.suspend(() => {
            if (attempts++ === 0) return decode(from(first))
            const offset = resumeAt()
            return Stream.unwrap(
              Effect.as(
                Effect.logDebug("resuming a cut download").pipe(
                  Effect.annotateLogs({ url: redactUrl(requestUrl(request)), offset })
                ),
                decode(from(offset))
              )
            )
          })
          return http.retryingStream(attempt)
        })

      return ApiClient.of({ use, execute, json, bytes, discard, resumable })
    })
  )
}

/**
 * A 401 from the origin the token went to: a new token may help. One from another origin (a storage URL
 * a redirect led to, which was sent no token) is final; BlobFetcher follows the same rule.
 */
const isUnauthorized = (e: unknown, request: HttpClientRequest.HttpClientRequest): e is ApiError =>
  e instanceof ApiError && e.status === 401 && sameOrigin(e.url, requestUrl(request))

const transportCut = (request: HttpClientRequest.HttpClientRequest, reason: string) =>
  new TransportError({ method: request.method, url: redactUrl(requestUrl(request)), reason, retriable: true })

const contentRangeStart = (value: string | undefined): number | undefined => {
  // `bytes N-*/*` too: a streamed listing does not know its last byte (the local service sends it so).
  const m = value === undefined ? null : /^\s*bytes\s+(\d+)-(\d+|\*)\/(\d+|\*)\s*$/i.exec(value)
  return m === null ? undefined : Number(m[1])
}

/** Exclusive end offset of the wanted bytes, when the response says how long it is. */
const expectedEndOf = (response: HttpClientResponse.HttpClientResponse, start: number, last: number | undefined) => {
  const length = Number(response.headers["content-length"])
  const fromHeaders = Number.isFinite(length) && response.headers["content-length"] !== undefined
    ? start + length
    : undefined
  const wanted = last === undefined ? undefined : last + 1
  if (fromHeaders === undefined) return wanted
  return wanted === undefined ? fromHeaders : Math.min(wanted, fromHeaders)
}

/** Joins an opaque base URL (from lookup) and an API path. */
export const joinUrl = (base: string, path: string) => base.replace(/\/+$/, "") + path

/** A path segment (layer id, data handle, publication id). HRNs in paths stay raw, as the SDKs send them. */
export const segment = (value: string) => encodeURIComponent(value)
