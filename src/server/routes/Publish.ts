import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { PublishPartitions } from "../../domain/Publish.ts"
import { decodeSegment, layerOf, routeCatalog, servedIn } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import type { CatalogRow } from "../db/CatalogsRepo.ts"
import { PublicationsRepo } from "../db/PublicationsRepo.ts"
import { initPublication, publicationOf, publicationView, stagePartitions, submitPublication } from "../Publishing.ts"
import { versionedWritesBlockedBy, versionedWritesRefused } from "../Regions.ts"
import { Replicas } from "../Replicas.ts"
import { badRequest, conflict, json } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import { originOf } from "../Views.ts"

const MAX_PARTITIONS_PER_REQUEST = 10_000

const InitBody = Schema.Struct({
  layerIds: Schema.Array(Schema.String),
  versionDependencies: Schema.optional(
    Schema.Array(Schema.Struct({ hrn: Schema.String, version: Schema.Number, direct: Schema.Boolean }))
  )
})

/** A versioned publication of a multi-region catalog is refused while either region is down (rule 8). */
const checkWritable = (catalog: CatalogRow, kind: string) =>
  Effect.gen(function*() {
    if (kind !== "versioned") return
    const blockedBy = versionedWritesBlockedBy((yield* servedIn(catalog)).placement, (yield* Replicas).down)
    if (blockedBy !== undefined) return yield* versionedWritesRefused(blockedBy)
  })

const init = Effect.gen(function*() {
  const catalog = yield* routeCatalog("write")
  const { appId } = yield* Caller
  const { layerIds, versionDependencies } = yield* RequestBody.decodeJson(InitBody)
  if (layerIds.length === 0) return yield* badRequest("layerIds", "at least one layer id is required")
  const layers = yield* Effect.forEach(layerIds, (id) => layerOf(catalog, id))
  yield* checkWritable(catalog, layers[0]!.layer_type)
  const row = yield* initPublication(catalog, layers, appId, versionDependencies)
  const request = yield* HttpServerRequest.HttpServerRequest
  return json(200, publicationView(row, catalog), {
    location: `${originOf(request.headers)}/publish/v2/catalogs/${catalog.hrn}/publications/${row.id}`
  })
})

const routePublication = Effect.gen(function*() {
  const catalog = yield* routeCatalog("write")
  const params = yield* HttpRouter.params
  const publication = yield* publicationOf(catalog, decodeSegment(params.publication))
  return { catalog, publication }
})

const get = Effect.gen(function*() {
  const { catalog, publication } = yield* routePublication
  return json(200, publicationView(publication, catalog))
})

const submit = Effect.gen(function*() {
  const { catalog, publication } = yield* routePublication
  yield* checkWritable(catalog, publication.kind)
  const { written } = yield* submitPublication(publication)
  if (written.length > 0) {
    // Volatile metadata reaches the catalog's other region later (Replicas.ts); one copy per layer.
    const { placement, region } = yield* servedIn(catalog)
    const byKey = new Map<number, Array<string>>()
    for (const { layer_pk, partition } of written) {
      let partitions = byKey.get(layer_pk)
      if (partitions === undefined) byKey.set(layer_pk, partitions = [])
      partitions.push(partition)
    }
    const replicas = yield* Replicas
    for (const [key, partitions] of byKey) yield* replicas.volatileWritten({ placement, region, key, partitions })
  }
  return HttpServerResponse.empty({ status: 204 })
})

const cancel = Effect.gen(function*() {
  const { publication } = yield* routePublication
  if (publication.state !== "initialized") {
    return yield* conflict(
      "publication",
      `publication ${publication.id} is ${publication.state}; only an initialized publication can be cancelled`
    )
  }
  const publications = yield* PublicationsRepo
  yield* publications.setState(publication.id, "cancelled", "Publication was cancelled", Date.now())
  yield* publications.deleteStaged(publication.id)
  return HttpServerResponse.empty({ status: 204 })
})

const upload = Effect.gen(function*() {
  const { catalog, publication } = yield* routePublication
  const params = yield* HttpRouter.params
  const layer = yield* layerOf(catalog, decodeSegment(params.layer))
  yield* checkWritable(catalog, publication.kind)
  const { partitions } = yield* RequestBody.decodeJson(PublishPartitions)
  if (partitions.length > MAX_PARTITIONS_PER_REQUEST) {
    return yield* badRequest(
      "partitions",
      `at most ${MAX_PARTITIONS_PER_REQUEST} partitions per request; send several requests`
    )
  }
  yield* stagePartitions(publication, layer, partitions)
  return HttpServerResponse.empty({ status: 204 })
})

const base = "/publish/v2/catalogs/:catalog"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post(`${base}/publications`, withCaller(init)),
  HttpRouter.get(`${base}/publications/:publication`, withCaller(get)),
  HttpRouter.put(`${base}/publications/:publication`, withCaller(submit)),
  HttpRouter.del(`${base}/publications/:publication`, withCaller(cancel)),
  HttpRouter.post(`${base}/layers/:layer/publications/:publication/partitions`, withCaller(upload))
)
