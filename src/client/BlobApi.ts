import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Metrics from "../telemetry/Metrics.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { Auth } from "./Auth.ts"
import { BlobFetcher, type BlobFetcherOptions } from "./BlobFetcher.ts"
import { ApiError, type ResponseDecodeError } from "./Errors.ts"
import { Http } from "./Http.ts"
import { HttpOptions } from "./HttpOptions.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"
import { outageLimit, recordRetry, retryLimits, RetryPolicy, RetryTally } from "./Retry.ts"

/**
 * Blob API v1 (`blob`) and Volatile Blob API v1 (`volatile-blob`): two services with the same
 * paths under different base URLs. Bytes are returned as stored (no Content-Encoding decoding).
 */

export type BlobFailure = LookupFailure | ResponseDecodeError

/** Inclusive byte range; `end` omitted = to the end. */
export interface ByteRange {
  readonly start: number
  readonly end?: number
}

export interface BlobInfo {
  readonly exists: boolean
  readonly contentLength: number | undefined
  readonly contentType: string | undefined
  readonly contentEncoding: string | undefined
  readonly etag: string | undefined
}

export interface PutOptions {
  readonly contentType: string
  readonly contentEncoding?: string
}

/** What a caller of `fetcher` decides; the rest (dispatcher, retry policy, token) comes from the client. */
export type FetcherOptions<T> = Pick<
  BlobFetcherOptions<T>,
  "limit" | "onBlob" | "onFailure" | "admit" | "receiver"
>

export interface BlobFetcherHandle<T extends { readonly dataHandle: string }> {
  readonly fetcher: BlobFetcher<T>
  /** Takes the current token and base URL (both cached by the client); call it before each chunk of work. */
  readonly refresh: Effect.Effect<void, BlobFailure>
}

export interface BlobShape {
  /**
   * The hot path for many blobs of one layer: a BlobFetcher over the client's own connections, token,
   * retry policy and retry counter. It is closed (requests in flight aborted) with the scope.
   */
  readonly fetcher: <T extends { readonly dataHandle: string }>(
    hrn: string,
    layer: string,
    options: FetcherOptions<T>
  ) => Effect.Effect<BlobFetcherHandle<T>, BlobFailure, Scope.Scope>
  /** The whole blob (or range); 204 gives empty bytes. */
  readonly get: (
    hrn: string,
    layer: string,
    dataHandle: string,
    range?: ByteRange
  ) => Effect.Effect<Uint8Array, BlobFailure>
  /** The blob as a stream; a cut connection continues where it stopped. */
  readonly getStream: (
    hrn: string,
    layer: string,
    dataHandle: string,
    range?: ByteRange
  ) => Stream.Stream<Uint8Array, BlobFailure>
  readonly head: (hrn: string, layer: string, dataHandle: string) => Effect.Effect<BlobInfo, BlobFailure>
  readonly put: (
    hrn: string,
    layer: string,
    dataHandle: string,
    data: Uint8Array,
    options: PutOptions
  ) => Effect.Effect<void, BlobFailure>
}

export interface VolatileBlobShape extends BlobShape {
  readonly delete: (hrn: string, layer: string, dataHandle: string) => Effect.Effect<void, BlobFailure>
}

const makeBlobApi = (apiName: "blob" | "volatile-blob") =>
  Effect.gen(function*() {
    const api = yield* ApiClient
    const lookup = yield* Lookup
    const http = yield* Http
    const auth = yield* Auth
    const httpOptions = yield* HttpOptions
    const limits = retryLimits(yield* RetryPolicy)
    const url = (hrn: string, layer: string, dataHandle: string) =>
      Effect.map(lookup.baseUrl({ api: apiName, version: "v1", hrn }), (root) =>
        joinUrl(root, `/layers/${segment(layer)}/data/${segment(dataHandle)}`))

    const get = (hrn: string, layer: string, dataHandle: string, range?: ByteRange) =>
      Effect.gen(function*() {
        let request = HttpClientRequest.get(yield* url(hrn, layer, dataHandle))
        if (range !== undefined) {
          request = HttpClientRequest.setHeader(request, "range", `bytes=${range.start}-${range.end ?? ""}`)
        }
        const { response, bytes } = yield* api.bytes(request)
        // A server that ignores Range sends everything.
        if (range !== undefined && response.status === 200) {
          return bytes.slice(range.start, range.end === undefined ? undefined : range.end + 1)
        }
        return bytes
      })

    const getStream = (hrn: string, layer: string, dataHandle: string, range?: ByteRange) =>
      Stream.unwrap(
        Effect.map(url(hrn, layer, dataHandle), (target) =>
          api.resumable(HttpClientRequest.get(target), range === undefined ? {} : { range }))
      )

    const head = (hrn: string, layer: string, dataHandle: string) =>
      Effect.gen(function*() {
        const response = yield* api
          .discard(HttpClientRequest.head(yield* url(hrn, layer, dataHandle)))
          .pipe(Effect.catchIf((e): e is ApiError =>
            e instanceof ApiError && e.status === 404, () =>
            Effect.succeed(undefined)))
        if (response === undefined) {
          return {
            exists: false,
            contentLength: undefined,
            contentType: undefined,
            contentEncoding: undefined,
            etag: undefined
          }
        }
        const length = response.headers["content-length"]
        return {
          exists: true,
          contentLength: length === undefined ? (response.status === 204 ? 0 : undefined) : Number(length),
          contentType: response.headers["content-type"],
          contentEncoding: response.headers["content-encoding"],
          etag: response.headers["etag"]
        } satisfies BlobInfo
      })

    const put = (hrn: string, layer: string, dataHandle: string, data: Uint8Array, options: PutOptions) =>
      Effect.gen(function*() {
        let request = HttpClientRequest.put(yield* url(hrn, layer, dataHandle)).pipe(
          HttpClientRequest.bodyUint8Array(data, options.contentType)
        )
        if (options.contentEncoding !== undefined) {
          request = HttpClientRequest.setHeader(request, "content-encoding", options.contentEncoding)
        }
        yield* api.discard(request)
      })

    const del = (hrn: string, layer: string, dataHandle: string) =>
      Effect.flatMap(url(hrn, layer, dataHandle), (target) =>
        Effect.asVoid(api.discard(HttpClientRequest.del(target))))

    const fetcher = <T extends { readonly dataHandle: string }>(
      hrn: string,
      layer: string,
      options: FetcherOptions<T>
    ) =>
      Effect.gen(function*() {
        const runtime = yield* Effect.runtime<never>()
        const outages = yield* FiberRef.get(outageLimit)
        const tally = yield* RetryTally
        // The token as the fetcher sends it; Auth.invalidate wants the Redacted it handed out.
        let current = yield* auth.token
        const token = Effect.map(auth.token, (t) => {
          current = t
          return Redacted.value(t)
        })
        // Rejects with the token failure itself (AuthError, ...), which then ends the fetch.
        const promise = <A, E>(effect: Effect.Effect<A, E>) =>
          Runtime.runPromise(runtime)(Effect.either(effect)).then((
            result
          ) => (Either.isRight(result) ? result.right : Promise.reject(result.left)))
        const fetcher = yield* Effect.acquireRelease(
          Effect.sync(() =>
            new BlobFetcher<T>({
              ...options,
              dispatcher: http.dispatcher,
              limits,
              outageLimit: outages,
              maxRedirects: httpOptions.maxRedirects,
              userAgent: httpOptions.userAgent,
              token: () =>
                promise(token),
              refreshToken: (stale) =>
                promise(
                  Effect.zipRight(Redacted.value(current) === stale ? auth.invalidate(current) : Effect.void, token)
                ),
              onRetry: (step) => {
                recordRetry(tally, step)
                Runtime.runFork(runtime)(http.logRetry(step))
              },
              ...(Metrics.requestTiming.enabled ? { onAnswered: Metrics.blobAnswered } : {})
            })
          ),
          (fetcher) =>
            Effect.sync(() =>
              fetcher.close()
            )
        )
        const refresh = Effect.gen(function*() {
          fetcher.setTarget(yield* lookup.baseUrl({ api: apiName, version: "v1", hrn }), layer)
          fetcher.setToken(yield* token)
        })
        yield* refresh
        return { fetcher, refresh }
      })

    return {
      fetcher,
      // No span: called once per partition, where a span and a stack capture per call cost measurably.
      get,
      getStream,
      head: Effect.fn(`${apiName}.head`)(head),
      put: Effect.fn(`${apiName}.put`)(put),
      delete: Effect.fn(`${apiName}.delete`)(del)
    }
  })

type BlobDependencies = ApiClient | Lookup | Http | Auth | HttpOptions | RetryPolicy

export class BlobApi extends Context.Tag("catalog-export/client/BlobApi")<BlobApi, BlobShape>() {
  static readonly layer: Layer.Layer<BlobApi, never, BlobDependencies> = Layer.effect(
    BlobApi,
    Effect.map(
      makeBlobApi("blob"),
      ({ fetcher, get, getStream, head, put }) => BlobApi.of({ fetcher, get, getStream, head, put })
    )
  )
}

export class VolatileBlobApi
  extends Context.Tag("catalog-export/client/VolatileBlobApi")<VolatileBlobApi, VolatileBlobShape>()
{
  static readonly layer: Layer.Layer<VolatileBlobApi, never, BlobDependencies> = Layer.effect(
    VolatileBlobApi,
    Effect.map(makeBlobApi("volatile-blob"), (impl) => VolatileBlobApi.of(impl))
  )
}
