import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { Catalog, CatalogList, CatalogSummary, OperationStatus, StatusLink } from "../domain/Catalog.ts"
import { ApiClient, joinUrl } from "./ApiClient.ts"
import { ApiError, CatalogNotFound } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/** Config API v1: catalogs and their layers. */

export interface ListCatalogsOptions {
  /** Extra query parameters of `GET /catalogs` (q, layerType, limit, ...), passed as given. */
  readonly params?: Readonly<Record<string, string>>
}

export type ConfigFailure = LookupFailure

export interface ConfigApiShape {
  /** Summary list (`href`, `hrn`, `title`), every page. */
  readonly listCatalogs: (options?: ListCatalogsOptions) => Effect.Effect<ReadonlyArray<CatalogSummary>, ConfigFailure>
  /** Verbose list: full catalogs with their layers, every page. */
  readonly listCatalogsVerbose: (options?: ListCatalogsOptions) => Effect.Effect<ReadonlyArray<Catalog>, ConfigFailure>
  /** Fails with CatalogNotFound on 403/404 (the service answers 403 for missing and forbidden catalogs alike). */
  readonly getCatalog: (hrn: string) => Effect.Effect<Catalog, ConfigFailure>
  /**
   * The catalog's configuration as the service sent it, every field kept (unlike `getCatalog`, which
   * decodes the fields this client knows). A read-modify-write with `updateCatalog` must start from it,
   * or the PUT would drop the fields the decoder does not know.
   */
  readonly getCatalogConfiguration: (hrn: string) => Effect.Effect<Readonly<Record<string, unknown>>, ConfigFailure>
  /**
   * `PUT /catalogs/{hrn}` with the full configuration: 202 with a status link (the platform) or with
   * no body (the interface), then undefined.
   */
  readonly updateCatalog: (hrn: string, configuration: unknown) => Effect.Effect<StatusLink | undefined, ConfigFailure>
  /** `DELETE /catalogs/{hrn}/automaticVersionDeletion`: 202, with a status link or none, as `updateCatalog`. */
  readonly disableAutomaticVersionDeletion: (hrn: string) => Effect.Effect<StatusLink | undefined, ConfigFailure>
  /** Polls a status link (with `flags=noRedirects`) until it is no longer pending; fails on `failure`. */
  readonly awaitStatus: (
    link: StatusLink,
    onPending?: (status: OperationStatus) => Effect.Effect<void>
  ) => Effect.Effect<OperationStatus, ConfigFailure>
}

const STATUS_POLL = "500 millis"

/** The interface: a catalog list whose generation takes over 50 s may be partial. */
export const PARTIAL_LIST_SECONDS = 50

const SummaryList = CatalogList(CatalogSummary)
const VerboseList = CatalogList(Catalog)
const RawCatalog = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const MaybeStatusLink = Schema.UndefinedOr(StatusLink)

export class ConfigApi extends Context.Tag("catalog-export/client/ConfigApi")<ConfigApi, ConfigApiShape>() {
  static readonly layer: Layer.Layer<ConfigApi, never, ApiClient | Lookup> = Layer.effect(
    ConfigApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const base = lookup.baseUrl({ api: "config", version: "v1" })

      const listPages = <A, I>(
        schema: Schema.Schema<
          { readonly results: { readonly items: ReadonlyArray<A>; readonly next?: string | undefined } },
          I
        >,
        params: Record<string, string>
      ) =>
        Effect.gen(function*() {
          const root = yield* base
          const items: Array<A> = []
          let request = HttpClientRequest.get(joinUrl(root, "/catalogs")).pipe(HttpClientRequest.setUrlParams(params))
          const seen = new Set<string>()
          for (;;) {
            const started = yield* Clock.currentTimeMillis
            const page = yield* api.json(request, schema)
            const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
            if (seconds > PARTIAL_LIST_SECONDS) {
              yield* Effect.logWarning(
                `The catalog list took ${
                  seconds.toFixed(0)
                } s to arrive; the config API may return a partial list when generating it takes over ` +
                  `${PARTIAL_LIST_SECONDS} s, so catalogs may be missing from it. Narrow the list (q, layerType) or page it (limit).`
              )
            }
            items.push(...page.results.items)
            const next = page.results.next
            if (next === undefined || next === "" || seen.has(next)) return items
            seen.add(next)
            request = HttpClientRequest.get(new URL(next, joinUrl(root, "/catalogs")).toString())
          }
        })

      const listCatalogs = Effect.fn("ConfigApi.listCatalogs")(function*(options?: ListCatalogsOptions) {
        return yield* listPages(SummaryList, { ...options?.params })
      })

      const listCatalogsVerbose = Effect.fn("ConfigApi.listCatalogsVerbose")(function*(options?: ListCatalogsOptions) {
        return yield* listPages(VerboseList, { ...options?.params, verbose: "true" })
      })

      const getCatalog = Effect.fn("ConfigApi.getCatalog")(function*(hrn: string) {
        const root = yield* base
        return yield* api.json(HttpClientRequest.get(joinUrl(root, `/catalogs/${hrn}`)), Catalog).pipe(
          Effect.catchIf(
            (e): e is ApiError => e instanceof ApiError && (e.status === 403 || e.status === 404),
            (e) => Effect.fail(new CatalogNotFound({ hrn, status: e.status, detail: e.detail ?? e.title }))
          )
        )
      })

      const getCatalogConfiguration = Effect.fn("ConfigApi.getCatalogConfiguration")(function*(hrn: string) {
        const root = yield* base
        return yield* api.json(HttpClientRequest.get(joinUrl(root, `/catalogs/${hrn}`)), RawCatalog).pipe(
          Effect.catchIf(
            (e): e is ApiError => e instanceof ApiError && (e.status === 403 || e.status === 404),
            (e) => Effect.fail(new CatalogNotFound({ hrn, status: e.status, detail: e.detail ?? e.title }))
          )
        )
      })

      const updateCatalog = Effect.fn("ConfigApi.updateCatalog")(function*(hrn: string, configuration: unknown) {
        const root = yield* base
        return yield* api.json(
          HttpClientRequest.put(joinUrl(root, `/catalogs/${hrn}`)).pipe(
            HttpClientRequest.bodyUnsafeJson(configuration)
          ),
          MaybeStatusLink
        )
      })

      const disableAutomaticVersionDeletion = Effect.fn("ConfigApi.disableAutomaticVersionDeletion")(
        function*(hrn: string) {
          const root = yield* base
          return yield* api.json(
            HttpClientRequest.del(joinUrl(root, `/catalogs/${hrn}/automaticVersionDeletion`)),
            MaybeStatusLink
          )
        }
      )

      const awaitStatus = Effect.fn("ConfigApi.awaitStatus")(function*(
        link: StatusLink,
        onPending: (status: OperationStatus) => Effect.Effect<void> = () => Effect.void
      ) {
        const request = HttpClientRequest.get(link.href).pipe(HttpClientRequest.setUrlParam("flags", "noRedirects"))
        for (;;) {
          const status = yield* api.json(request, OperationStatus, {
            accept: (s) => s === 200 || s === 201 || s === 202
          })
          if (status.status !== "pending") return status
          yield* onPending(status)
          yield* Effect.sleep(STATUS_POLL)
        }
      })

      return ConfigApi.of({
        listCatalogs,
        listCatalogsVerbose,
        getCatalog,
        getCatalogConfiguration,
        updateCatalog,
        disableAutomaticVersionDeletion,
        awaitStatus
      })
    })
  )
}
