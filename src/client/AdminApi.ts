import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Catalog, OperationStatus, StatusLink } from "../domain/Catalog.ts"
import { ExitCode } from "../domain/ExitCode.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { readText } from "./Bodies.ts"
import { ConfigApi } from "./ConfigApi.ts"
import { requestUrl } from "./ErrorMapping.ts"
import { ApiError, CatalogNotFound, redactUrl, ResponseDecodeError } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/**
 * Catalog administration over the config API v1: create, update and delete catalogs, delete layers,
 * and follow the asynchronous operations behind their status links. Nothing here assumes an
 * operation is done when it is accepted: callers poll (`awaitOperation`) and, after a creation, wait
 * for the catalog to become visible (`awaitCatalog`), which takes minutes on the platform.
 */

/** The catalog id is taken (409 on create). */
export class CatalogExists extends Schema.TaggedError<CatalogExists>()("CatalogExists", {
  id: Schema.String,
  detail: Schema.optional(Schema.String)
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message(): string {
    return `A catalog with the id '${this.id}' already exists or is being created (catalog ids are unique across the platform). Choose another id.`
  }
}

/** An accepted operation ended in `failure` (410), or did not finish in time. */
export class OperationFailed extends Schema.TaggedError<OperationFailed>()("OperationFailed", {
  href: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.failure
  }

  override get message(): string {
    return `The operation behind ${this.href} did not succeed: ${this.reason}. Retry after 60 seconds.`
  }
}

/**
 * An accepted change: where to poll its status (the platform sends a status link), or the created
 * catalog itself (the interface's answer to a creation), or neither (a bare 202, as the interface
 * describes PUT and DELETE automaticVersionDeletion); and the service's `Warning` texts.
 */
export interface Accepted {
  readonly link: StatusLink | undefined
  readonly catalog: Catalog | undefined
  readonly warnings: ReadonlyArray<string>
}

export interface AwaitOptions {
  /** Called with each pending status (layer deletion carries its steps). */
  readonly onPending?: (status: OperationStatus) => Effect.Effect<void>
  /** Time between polls; default 500 ms. */
  readonly interval?: Duration.DurationInput
  /** Give up after this long; default 30 minutes. */
  readonly timeout?: Duration.DurationInput
}

export type AdminFailure = LookupFailure | CatalogExists | OperationFailed

export interface AdminApiShape {
  /** `POST /catalogs` (with or without layers). Fails with CatalogExists when the id is taken. */
  readonly createCatalog: (configuration: unknown) => Effect.Effect<Accepted, AdminFailure>
  /** `PUT /catalogs/{hrn}` with the full configuration. */
  readonly updateCatalog: (hrn: string, configuration: unknown) => Effect.Effect<Accepted, AdminFailure>
  readonly deleteCatalog: (hrn: string) => Effect.Effect<Accepted, AdminFailure>
  /** `DELETE /catalogs/{hrn}/layers/{layerId}`: the status walks the layer deletion steps. */
  readonly deleteLayer: (hrn: string, layerId: string) => Effect.Effect<Accepted, AdminFailure>
  /** Polls a status link (`flags=noRedirects`) until it is not pending. */
  readonly awaitOperation: (link: StatusLink, options?: AwaitOptions) => Effect.Effect<OperationStatus, AdminFailure>
  /** Polls until the catalog is visible (new catalogs take a while to appear). */
  readonly awaitCatalog: (
    hrn: string,
    options?: Omit<AwaitOptions, "onPending">
  ) => Effect.Effect<Catalog, AdminFailure>
}

const DEFAULT_INTERVAL = Duration.millis(500)
const DEFAULT_TIMEOUT = Duration.minutes(30)

/** The texts of a `Warning` header: `299 - "text", 299 - "text"`. */
export const parseWarnings = (header: string | undefined): ReadonlyArray<string> => {
  if (header === undefined || header.trim() === "") return []
  const texts = [...header.matchAll(/\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, "$1"))
  return texts.length > 0 ? texts : [header.trim()]
}

/** The catalog HRN a finished creation points at: `item.hrn`, else the end of `item.href`. */
export const createdHrn = (status: OperationStatus): string | undefined => {
  const item = status.item as { hrn?: unknown; href?: unknown } | undefined
  if (typeof item?.hrn === "string") return item.hrn
  if (typeof item?.href === "string") return /\/catalogs\/([^/?#]+)/.exec(item.href)?.[1]
  return undefined
}

export class AdminApi extends Context.Tag("catalog-export/client/AdminApi")<AdminApi, AdminApiShape>() {
  static readonly layer: Layer.Layer<AdminApi, never, ApiClient | Lookup | ConfigApi> = Layer.effect(
    AdminApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const config = yield* ConfigApi
      const base = lookup.baseUrl({ api: "config", version: "v1" })
      const decodeAnswer = Schema.decodeUnknown(Schema.Union(StatusLink, Catalog), { onExcessProperty: "ignore" })

      /** Sends a change and reads what the service answered: a status link, the catalog, or no body; and warnings. */
      const accepted = (request: HttpClientRequest.HttpClientRequest) =>
        api.use(
          HttpClientRequest.acceptJson(request),
          (response: HttpClientResponse.HttpClientResponse) =>
            Effect.gen(function*() {
              const text = yield* readText(response)
              const warnings = parseWarnings(response.headers["warning"])
              if (text.trim() === "") return { link: undefined, catalog: undefined, warnings } satisfies Accepted
              const fail = (reason: string) =>
                new ResponseDecodeError({
                  method: request.method,
                  url: redactUrl(requestUrl(request)),
                  status: response.status,
                  reason
                })
              const body = yield* Effect.try({
                try: () => JSON.parse(text) as unknown,
                catch: () => fail("invalid JSON")
              })
              const answer = yield* Effect.mapError(
                decodeAnswer(body),
                (e) => fail(`expected a status link or a catalog: ${ParseResult.TreeFormatter.formatErrorSync(e)}`)
              )
              return "href" in answer && !("layers" in answer)
                ? { link: answer, catalog: undefined, warnings } satisfies Accepted
                : { link: undefined, catalog: answer as Catalog, warnings } satisfies Accepted
            })
        )

      /** The config API answers 403 for a catalog that is missing or not the caller's. */
      const notFound = (hrn: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
        Effect.catchIf(
          self,
          (e): e is E & ApiError => e instanceof ApiError && e.status === 403,
          (e) => Effect.fail(new CatalogNotFound({ hrn, status: e.status, detail: e.detail ?? e.title }))
        )

      const createCatalog = Effect.fn("AdminApi.createCatalog")(function*(configuration: unknown) {
        const root = yield* base
        const id = String((configuration as { id?: unknown } | null)?.id ?? "")
        return yield* accepted(
          HttpClientRequest.post(joinUrl(root, "/catalogs")).pipe(HttpClientRequest.bodyUnsafeJson(configuration))
        ).pipe(
          Effect.catchIf(
            (e): e is ApiError => e instanceof ApiError && e.status === 409,
            (e) => Effect.fail(new CatalogExists({ id, detail: e.detail ?? e.title }))
          )
        )
      })

      const updateCatalog = Effect.fn("AdminApi.updateCatalog")(function*(hrn: string, configuration: unknown) {
        const root = yield* base
        return yield* accepted(
          HttpClientRequest.put(joinUrl(root, `/catalogs/${hrn}`)).pipe(HttpClientRequest.bodyUnsafeJson(configuration))
        ).pipe(
          notFound(hrn)
        )
      })

      const deleteCatalog = Effect.fn("AdminApi.deleteCatalog")(function*(hrn: string) {
        const root = yield* base
        return yield* accepted(HttpClientRequest.del(joinUrl(root, `/catalogs/${hrn}`))).pipe(notFound(hrn))
      })

      const deleteLayer = Effect.fn("AdminApi.deleteLayer")(function*(hrn: string, layerId: string) {
        const root = yield* base
        return yield* accepted(HttpClientRequest.del(joinUrl(root, `/catalogs/${hrn}/layers/${segment(layerId)}`)))
          .pipe(notFound(hrn))
      })

      const awaitOperation = Effect.fn("AdminApi.awaitOperation")(
        function*(link: StatusLink, options: AwaitOptions = {}) {
          const request = HttpClientRequest.get(link.href).pipe(HttpClientRequest.setUrlParam("flags", "noRedirects"))
          const interval = Duration.decode(options.interval ?? DEFAULT_INTERVAL)
          const deadline = Date.now() + Duration.toMillis(Duration.decode(options.timeout ?? DEFAULT_TIMEOUT))
          for (;;) {
            const status = yield* api.json(request, OperationStatus, {
              accept: (s) => s === 200 || s === 201 || s === 202 || s === 410
            })
            if (status.status === "failure") {
              return yield* new OperationFailed({ href: link.href, reason: status.reason ?? "Operation failed." })
            }
            if (status.status !== "pending") return status
            if (options.onPending !== undefined) yield* options.onPending(status)
            if (Date.now() > deadline) {
              return yield* new OperationFailed({ href: link.href, reason: "still pending when the wait ran out" })
            }
            yield* Effect.sleep(interval)
          }
        }
      )

      const awaitCatalog = Effect.fn("AdminApi.awaitCatalog")(
        function*(hrn: string, options: Omit<AwaitOptions, "onPending"> = {}) {
          const interval = Duration.decode(options.interval ?? DEFAULT_INTERVAL)
          const deadline = Date.now() + Duration.toMillis(Duration.decode(options.timeout ?? DEFAULT_TIMEOUT))
          for (;;) {
            const found = yield* config.getCatalog(hrn).pipe(
              Effect.map((catalog): Catalog | undefined => catalog),
              Effect.catchTag(
                "CatalogNotFound",
                (e) => (Date.now() > deadline ? Effect.fail(e) : Effect.succeed(undefined))
              )
            )
            if (found !== undefined) return found
            yield* Effect.sleep(interval)
          }
        }
      )

      return AdminApi.of({ createCatalog, updateCatalog, deleteCatalog, deleteLayer, awaitOperation, awaitCatalog })
    })
  )
}
