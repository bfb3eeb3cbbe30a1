import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Cache from "effect/Cache"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ApiEntries, type ApiEntry } from "../domain/Lookup.ts"
import { ApiClient } from "./ApiClient.ts"
import { readText } from "./Bodies.ts"
import { requestUrl } from "./ErrorMapping.ts"
import {
  ApiError,
  ApiNotFound,
  CatalogNotFound,
  LookupUnreachable,
  NotALookupService,
  redactUrl,
  type RequestFailure,
  ResponseDecodeError,
  TransportError
} from "./Errors.ts"

/**
 * Service discovery: base URLs per (catalog, api, version) from the lookup API, cached for the
 * `Cache-Control: max-age` the service sends (1 hour when it sends none). Base URLs are opaque:
 * callers append API paths to them.
 */

/** APIs looked up platform-wide (`/platform/apis`) rather than per catalog. */
export const PLATFORM_APIS: ReadonlySet<string> = new Set([
  "config",
  "artifact",
  "pipelines",
  "authorization",
  "account"
])

export const DEFAULT_TTL = Duration.hours(1)

export interface BaseUrlRequest {
  readonly api: string
  readonly version: string
  /** Catalog HRN; omit for platform APIs. */
  readonly hrn?: string
  readonly region?: string
}

export type LookupFailure =
  | RequestFailure
  | ResponseDecodeError
  | ApiNotFound
  | CatalogNotFound
  | LookupUnreachable
  | NotALookupService

export interface LookupShape {
  readonly baseUrl: (request: BaseUrlRequest) => Effect.Effect<string, LookupFailure>
  /** Every API the lookup service lists for a catalog (or the platform when `hrn` is omitted). */
  readonly apis: (hrn?: string, region?: string) => Effect.Effect<ReadonlyArray<ApiEntry>, LookupFailure>
}

export interface LookupOptions {
  /** e.g. https://api-lookup.data.api.platform.here.com/lookup/v1 or http://127.0.0.1:PORT/lookup/v1 */
  readonly lookupUrl: string
  readonly defaultTtl?: Duration.DurationInput
  /** The region catalog-bound lookups ask for when a request names none. */
  readonly region?: string
  /** Where the URL came from ("came from --lookup-url", ...), for the errors that say it is wrong. */
  readonly from?: string
}

class Key extends Data.Class<{ readonly hrn: string | undefined; readonly region: string | undefined }> {}

interface Listing {
  readonly entries: ReadonlyArray<ApiEntry>
  readonly ttl: Duration.Duration
}

export class Lookup extends Context.Tag("catalog-export/client/Lookup")<Lookup, LookupShape>() {
  static readonly layer = (options: LookupOptions): Layer.Layer<Lookup, never, ApiClient> =>
    Layer.effect(
      Lookup,
      Effect.gen(function*() {
        const api = yield* ApiClient
        const lookupUrl = options.lookupUrl.replace(/\/+$/, "")
        const defaultTtl = Duration.decode(options.defaultTtl ?? DEFAULT_TTL)

        const from = options.from ?? "was given"
        // Until the lookup service has answered once, a refused connection means a wrong URL, not an outage.
        let answered = false
        const fetchListing = (key: Key): Effect.Effect<Listing, LookupFailure> =>
          Effect.gen(function*() {
            const url = key.hrn === undefined ? `${lookupUrl}/platform/apis` : `${lookupUrl}/resources/${key.hrn}/apis`
            let request = HttpClientRequest.get(url).pipe(HttpClientRequest.acceptJson)
            if (key.region !== undefined) request = HttpClientRequest.setUrlParam(request, "region", key.region)
            const decodeError = (status: number, reason: string) =>
              new ResponseDecodeError({ method: "GET", url: redactUrl(requestUrl(request)), status, reason })
            return yield* api
              .use(request, (response) =>
                Effect.gen(function*() {
                  answered = true
                  const text = yield* readText(response)
                  const body = yield* Effect.try({
                    try: () => JSON.parse(text) as unknown,
                    catch: () => decodeError(response.status, "invalid JSON")
                  })
                  const entries = yield* Schema.decodeUnknown(ApiEntries)(body).pipe(
                    Effect.mapError((e) =>
                      decodeError(
                        response.status,
                        `expected an array of {api, version, baseURL}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`
                      )
                    )
                  )
                  return { entries, ttl: maxAge(response.headers["cache-control"]) ?? defaultTtl } satisfies Listing
                }), { refusedIsFinal: !answered })
              .pipe(
                Effect.catchIf(
                  (e): e is TransportError =>
                    e instanceof TransportError && !e.retriable && !answered &&
                    (e.code === "ECONNREFUSED" || e.code === "ENOTFOUND"),
                  (e) =>
                    new LookupUnreachable({
                      lookupUrl: redactUrl(lookupUrl),
                      from,
                      reason: e.code === "ENOTFOUND" ? "no such host" : "connection refused"
                    })
                ),
                Effect.catchIf(
                  (e): e is ApiError => e instanceof ApiError && e.status === 404,
                  (e) => {
                    answered = true
                    // A lookup service always lists the platform's APIs: when it does, the catalog is what is missing.
                    return key.hrn === undefined
                      ? new NotALookupService({ lookupUrl: redactUrl(lookupUrl), from, status: e.status })
                      : cache.get(new Key({ hrn: undefined, region: undefined })).pipe(
                        Effect.catchIf((p) => !(p instanceof NotALookupService), () => Effect.void),
                        Effect.zipRight(
                          new CatalogNotFound({ hrn: key.hrn, status: e.status, detail: e.detail ?? e.title })
                        )
                      )
                  }
                )
              )
          })

        const cache: Cache.Cache<Key, Listing, LookupFailure> = yield* Cache.makeWith({
          capacity: 10_000,
          lookup: fetchListing,
          timeToLive: (
            exit: Exit.Exit<Listing, LookupFailure>
          ) => (Exit.isSuccess(exit) ? exit.value.ttl : Duration.zero)
        })

        const apis = (hrn?: string, region?: string) =>
          Effect.map(cache.get(new Key({ hrn, region })), (listing) => listing.entries)

        // Untraced: every request resolves its base URL here.
        const baseUrl = Effect.fnUntraced(function*(request: BaseUrlRequest) {
          const platform = request.hrn === undefined || PLATFORM_APIS.has(request.api)
          const hrn = platform ? undefined : request.hrn
          const entries = yield* apis(hrn, platform ? undefined : request.region ?? options.region)
          const entry = entries.find((e) => e.api === request.api && e.version === request.version)
          if (entry === undefined) {
            return yield* new ApiNotFound({
              api: request.api,
              version: request.version,
              hrn,
              lookupUrl: redactUrl(lookupUrl),
              available: entries.map((e) => `${e.api} ${e.version}`)
            })
          }
          return entry.baseURL
        })

        return Lookup.of({ baseUrl, apis })
      })
    )
}

const maxAge = (cacheControl: string | undefined): Duration.Duration | undefined => {
  const m = cacheControl === undefined ? null : /(?:^|[,\s])max-age\s*=\s*"?(\d+)"?/i.exec(cacheControl)
  return m === null ? undefined : Duration.seconds(Number(m[1]))
}
