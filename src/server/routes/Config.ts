import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { configCatalogFor, decodeSegment } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { badRequest, json } from "../Reply.ts"
import { Store } from "../Store.ts"
import { catalogView, originOf } from "../Views.ts"

interface PageContext {
  readonly offset: number
  readonly limit: number
  readonly verbose: boolean
}

const encodeContext = (c: PageContext) => Buffer.from(JSON.stringify(c)).toString("base64url")
const decodeContext = (s: string): PageContext | undefined => {
  try {
    const c = JSON.parse(Buffer.from(s, "base64url").toString("utf8"))
    return Number.isInteger(c.offset) && Number.isInteger(c.limit) && c.limit > 0 ? c : undefined
  } catch {
    return undefined
  }
}

const listPage = (context: PageContext | undefined, verbose: boolean) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const store = yield* Store
    const { appId } = yield* Caller
    const origin = originOf(request.headers)
    const all = yield* store.readableCatalogs(appId).pipe(Effect.orDie)
    const offset = context?.offset ?? 0
    const page = context === undefined ? all : all.slice(offset, offset + context.limit)
    const items = yield* Effect.forEach(page, (catalog) =>
      verbose
        ? Effect.map(store.layers(catalog.hrn).pipe(Effect.orDie), (layers) => catalogView(catalog, layers))
        : Effect.succeed({
          href: `${origin}/config/v1/catalogs/${catalog.hrn}`,
          hrn: catalog.hrn,
          title: (JSON.parse(catalog.config) as { name?: string }).name ?? catalog.id,
          type: "urn:olp-types:catalog"
        }))
    const link = (at: number) => `${origin}/config/v1/catalogs/context/${encodeContext({ offset: at, limit: context!.limit, verbose })}`
    const next = context !== undefined && offset + context.limit < all.length ? { next: link(offset + context.limit) } : {}
    const previous = context !== undefined && offset > 0 ? { previous: link(Math.max(0, offset - context.limit)) } : {}
    return json(200, { results: { items, ...next, ...previous }, ...(verbose ? { verbose: true } : {}) })
  })

const list = Effect.gen(function*() {
  const params = yield* HttpServerRequest.ParsedSearchParams
  const verbose = params.verbose === "true"
  const limitParam = params.limit
  if (limitParam === undefined) return yield* listPage(undefined, verbose)
  const limit = Number(limitParam)
  if (!Number.isInteger(limit) || limit < 1) return yield* badRequest("limit", "limit must be an integer of at least 1")
  return yield* listPage({ offset: 0, limit, verbose }, verbose)
})

const listContext = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const context = decodeContext(params.context ?? "")
  if (context === undefined) return yield* badRequest("pageContext", "unknown or malformed page context")
  return yield* listPage(context, context.verbose)
})

const get = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const catalog = yield* configCatalogFor(decodeSegment(params.catalog), "read")
  const layers = yield* (yield* Store).layers(catalog.hrn).pipe(Effect.orDie)
  return json(200, catalogView(catalog, layers))
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get("/config/v1/catalogs", withCaller(list)),
  HttpRouter.get("/config/v1/catalogs/context/:context", withCaller(listContext)),
  HttpRouter.get("/config/v1/catalogs/:catalog", withCaller(get))
)
