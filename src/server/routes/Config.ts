import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"
import { configCatalogFor, decodeSegment } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { checkCatalog, storedCatalogConfig, storedLayerConfig } from "../CatalogConfig.ts"
import { CatalogsRepo } from "../db/CatalogsRepo.ts"
import { transaction } from "../db/Database.ts"
import { type OperationRow, OperationsRepo } from "../db/OperationsRepo.ts"
import { operationProgress, recreateWarnings, withWarnings } from "../Operations.ts"
import { checkUpdate } from "../Regions.ts"
import { badRequest, json, notFound } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import * as SearchParams from "../SearchParams.ts"
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
    const catalogs = yield* CatalogsRepo
    const { appId } = yield* Caller
    const origin = originOf(request.headers)
    const all = yield* catalogs.readableCatalogs(appId)
    const offset = context?.offset ?? 0
    const page = context === undefined ? all : all.slice(offset, offset + context.limit)
    const items = yield* Effect.forEach(page, (catalog) =>
      verbose
        ? Effect.map(catalogs.layers(catalog.hrn), (layers) => catalogView(catalog, layers))
        : Effect.succeed({
          href: `${origin}/config/v1/catalogs/${catalog.hrn}`,
          hrn: catalog.hrn,
          title: (JSON.parse(catalog.config) as { name?: string }).name ?? catalog.id,
          type: "urn:olp-types:catalog"
        }))
    const link = (at: number) =>
      `${origin}/config/v1/catalogs/context/${encodeContext({ offset: at, limit: context!.limit, verbose })}`
    const next = context !== undefined && offset + context.limit < all.length
      ? { next: link(offset + context.limit) }
      : {}
    const previous = context !== undefined && offset > 0 ? { previous: link(Math.max(0, offset - context.limit)) } : {}
    return json(200, { results: { items, ...next, ...previous }, ...(verbose ? { verbose: true } : {}) })
  })

const ListParams = Schema.Struct({
  verbose: Schema.optional(SearchParams.Param),
  limit: Schema.optional(SearchParams.IntegerParam.pipe(Schema.greaterThanOrEqualTo(1)))
})

const list = Effect.gen(function*() {
  const params = yield* SearchParams.decode(
    ListParams,
    () => badRequest("limit", "limit must be an integer of at least 1")
  )
  const verbose = params.verbose === "true"
  if (params.limit === undefined) return yield* listPage(undefined, verbose)
  return yield* listPage({ offset: 0, limit: params.limit, verbose }, verbose)
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
  const layers = yield* (yield* CatalogsRepo).layers(catalog.hrn)
  return json(200, catalogView(catalog, layers))
})

// --- writes and their status links -------------------------------------------------------------

/** Answers an accepted change with a status link; the change itself may finish later. */
export const accepted = (
  kind: OperationRow["kind"],
  catalogHrn: string,
  title: string,
  state: OperationRow["state"] = "success"
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const token = randomBytes(16).toString("hex")
    yield* (yield* OperationsRepo).insert({ token, kind, catalog_hrn: catalogHrn, title, state, created: Date.now() })
    return json(202, {
      href: `${originOf(request.headers)}/config/v1/status/${token}`,
      configToken: token,
      title,
      type: "urn:olp-types:status"
    })
  })

const jsonBody = Effect.map(RequestBody.json, (body) => body as Record<string, any>)

/** `PUT /catalogs/{hrn}`: the full configuration; layers named in it are added or updated, never dropped. */
const update = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const catalog = yield* configCatalogFor(decodeSegment(params.catalog), "write")
  const body = yield* jsonBody
  yield* checkCatalog(body)
  if (body.id !== catalog.id) {
    return yield* badRequest("id", `the body's id '${body.id}' is not the catalog's id '${catalog.id}'`)
  }
  const catalogs = yield* CatalogsRepo
  const previous = JSON.parse(catalog.config) as Record<string, any>
  if (
    body.replication !== undefined && JSON.stringify(body.replication) !== JSON.stringify(previous.replication ?? {})
  ) {
    return yield* badRequest(
      "replication",
      "the region and replication of a catalog are chosen at creation and cannot be changed; delete and recreate the catalog"
    )
  }
  const existing = new Map((yield* catalogs.layers(catalog.hrn)).map((l) => [l.id, l]))
  yield* checkUpdate(body, previous)
  for (const layer of (body.layers ?? []) as Array<Record<string, any>>) {
    const current = existing.get(layer.id)
    if (current === undefined) continue
    const scheme = layer.partitioning?.scheme ?? layer.partitioningScheme ?? "generic"
    if (current.layer_type !== layer.layerType) {
      return yield* badRequest(
        "layerType",
        `layer '${layer.id}' is ${current.layer_type}; a layer's type cannot be changed`
      )
    }
    if ((JSON.parse(current.config).partitioning?.scheme ?? "generic") !== scheme) {
      return yield* badRequest("partitioning", `the partitioning of layer '${layer.id}' cannot be changed`)
    }
  }
  const created = new Date().toISOString()
  yield* transaction(Effect.gen(function*() {
    yield* catalogs.updateCatalogConfig(
      catalog.hrn,
      JSON.stringify(storedCatalogConfig({ replication: previous.replication, ...body }, previous))
    )
    for (const layer of (body.layers ?? []) as Array<Record<string, any>>) {
      const current = existing.get(layer.id)
      const config = JSON.stringify(storedLayerConfig(layer))
      if (current === undefined) {
        yield* catalogs.insertLayer({
          catalog_hrn: catalog.hrn,
          id: layer.id,
          layer_type: layer.layerType,
          config,
          created
        })
      } else yield* catalogs.updateLayerConfig(current.pk, config)
    }
  }))
  const added = ((body.layers ?? []) as Array<Record<string, any>>).map((l) => l.id as string).filter((id) =>
    !existing.has(id)
  )
  const warnings = yield* recreateWarnings(catalog.hrn, added)
  return withWarnings(warnings)(yield* accepted("update", catalog.hrn, "Catalog Update"))
})

const disableAutomaticDeletion = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const catalog = yield* configCatalogFor(decodeSegment(params.catalog), "write")
  const { automaticVersionDeletion: _dropped, ...rest } = JSON.parse(catalog.config) as Record<string, unknown>
  yield* (yield* CatalogsRepo).updateCatalogConfig(catalog.hrn, JSON.stringify(rest))
  return yield* accepted("update", catalog.hrn, "Catalog Update")
})

const StatusParams = Schema.Struct({ flags: Schema.optional(SearchParams.Param) })

/** `GET /status/{token}`: 202 while pending; on success 303 to the catalog, or 200/201 with `flags=noRedirects`. */
const status = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const params = yield* HttpRouter.params
  const search = yield* SearchParams.decode(
    StatusParams,
    () => badRequest("flags", "flags must be a comma-separated list")
  )
  const operation = yield* (yield* OperationsRepo).byToken(decodeSegment(params.token))
  if (operation === undefined) return yield* notFound("token", "unknown status token")
  const progress = yield* operationProgress(operation)
  if (progress !== undefined) return progress
  if (operation.state === "pending") return json(202, { status: "pending" })
  if (operation.state === "failure") return json(410, { status: "failure", reason: "Operation failed." })
  const origin = originOf(request.headers)
  const href = `${origin}/config/v1/catalogs/${operation.catalog_hrn}`
  const item = { href, hrn: operation.catalog_hrn, title: operation.title, type: "urn:olp-types:catalog" }
  const noRedirects = (search.flags ?? "").split(",").includes("noRedirects")
  if (operation.kind === "delete" || operation.kind === "layer-delete") return json(200, { status: "success" })
  if (noRedirects) return json(operation.kind === "create" ? 201 : 200, { status: "success", item })
  return json(303, { status: "success", item }, { location: href })
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get("/config/v1/catalogs", withCaller(list)),
  HttpRouter.get("/config/v1/catalogs/context/:context", withCaller(listContext)),
  HttpRouter.get("/config/v1/catalogs/:catalog", withCaller(get)),
  HttpRouter.put("/config/v1/catalogs/:catalog", withCaller(update)),
  HttpRouter.del("/config/v1/catalogs/:catalog/automaticVersionDeletion", withCaller(disableAutomaticDeletion)),
  HttpRouter.get("/config/v1/status/:token", withCaller(status))
)
