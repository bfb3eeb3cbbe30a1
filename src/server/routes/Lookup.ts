import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Hrn from "../../domain/Hrn.ts"
import type { ApiEntry } from "../../domain/Lookup.ts"
import { decodeSegment, mayAccess } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { CatalogsRepo } from "../db/CatalogsRepo.ts"
import { lookupRegion, placementOf, regionPrefix } from "../Regions.ts"
import { badRequest, dataError, json, notFound } from "../Reply.ts"
import * as SearchParams from "../SearchParams.ts"
import { originOf } from "../Views.ts"

const CACHE = { "cache-control": "max-age=3600" }

const entry = (api: string, version: string, baseURL: string): ApiEntry => ({ api, version, baseURL, parameters: {} })

export const platformApis = (origin: string): ReadonlyArray<ApiEntry> => [
  entry("config", "v1", `${origin}/config/v1`),
  entry("artifact", "v1", `${origin}/artifact/v1`)
]

/** Every catalog-bound API, each with a base URL unique to the catalog. */
export const resourceApis = (origin: string, hrn: string): ReadonlyArray<ApiEntry> => [
  entry("config", "v1", `${origin}/config/v1`),
  entry("metadata", "v1", `${origin}/metadata/v1/catalogs/${hrn}`),
  entry("query", "v1", `${origin}/query/v1/catalogs/${hrn}`),
  entry("blob", "v1", `${origin}/blobstore/v1/catalogs/${hrn}`),
  entry("volatile-blob", "v1", `${origin}/blobstore/v1/catalogs/${hrn}`),
  entry("publish", "v2", `${origin}/publish/v2/catalogs/${hrn}`),
  entry("stream", "v2", `${origin}/stream/v2/catalogs/${hrn}`),
  entry("ingest", "v1", `${origin}/ingest/v1/catalogs/${hrn}`)
]

const pick = (entries: ReadonlyArray<ApiEntry>, api: string | undefined, version: string | undefined) =>
  Effect.gen(function*() {
    if (api === undefined) return entries
    const found = entries.filter((e) => e.api === api && e.version === version)
    if (found.length === 0) return yield* notFound("other", `API not found ${api}/${version}`)
    return found
  })

const platform = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const params = yield* HttpRouter.params
  const entries = yield* pick(platformApis(originOf(request.headers)), params.api, params.version)
  return json(200, entries, CACHE)
})

const ResourceParams = Schema.Struct({ region: Schema.optional(SearchParams.Param) })

const resource = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const params = yield* HttpRouter.params
  const raw = decodeSegment(params.hrn)
  const parsed = Hrn.parseCatalog(Hrn.toCatalogHrn(raw))
  if (Either.isLeft(parsed)) {
    return yield* dataError(400, "Bad Request", [{
      name: "hrn",
      error: "Request contains hrn with unknown structure of resource"
    }])
  }
  const hrn = Hrn.format(parsed.right)
  const catalog = yield* (yield* CatalogsRepo).catalog(hrn)
  const { appId } = yield* Caller
  if (catalog === undefined || !(yield* mayAccess(catalog, appId, "read"))) {
    return yield* notFound("hrn", `Resource not found: ${hrn}`)
  }
  const origin = originOf(request.headers)
  const { region: regionParam } = yield* SearchParams.decode(
    ResourceParams,
    () => badRequest("region", "region must be a region id")
  )
  const asked = yield* lookupRegion(regionParam)
  const placement = placementOf(JSON.parse(catalog.config))
  if (asked !== undefined && asked !== placement.primary && asked !== placement.secondary) {
    return yield* notFound("region", `catalog ${hrn} is not stored in region ${asked}`)
  }
  // Per-region base URLs: the catalog-bound APIs under /regions/<id>; config stays platform-wide. A
  // multi-region catalog's URLs always name a region (without `region`, its primary), as the platform's
  // regional hosts do.
  const region = asked ?? (placement.secondary === undefined ? undefined : placement.primary)
  const apis = region === undefined
    ? resourceApis(origin, hrn)
    : resourceApis(`${origin}${regionPrefix(region)}`, hrn).map((
      e
    ) => (e.api === "config" ? entry("config", "v1", `${origin}/config/v1`) : e))
  const entries = yield* pick(apis, params.api, params.version)
  return json(200, entries, CACHE)
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get("/lookup/v1/platform/apis", withCaller(platform)),
  HttpRouter.get("/lookup/v1/platform/apis/:api/:version", withCaller(platform)),
  HttpRouter.get("/lookup/v1/resources/:hrn/apis", withCaller(resource)),
  HttpRouter.get("/lookup/v1/resources/:hrn/apis/:api/:version", withCaller(resource))
)
