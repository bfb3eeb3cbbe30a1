import * as HttpRouter from "@effect/platform/HttpRouter"
import * as Effect from "effect/Effect"
import { catalogHrn } from "../../domain/Hrn.ts"
import { configCatalogFor, decodeSegment } from "../Access.ts"
import { Caller, withCaller } from "../Auth.ts"
import { BlobFiles } from "../BlobFiles.ts"
import { checkCatalog, storedCatalogConfig, storedLayerConfig } from "../CatalogConfig.ts"
import { BlobsRepo } from "../db/BlobsRepo.ts"
import { CatalogsRepo } from "../db/CatalogsRepo.ts"
import { transaction } from "../db/Database.ts"
import { deleteWarnings, recreateWarnings, withWarnings } from "../Operations.ts"
import { checkLayerTypes, replicationOfCreate } from "../Regions.ts"
import { catalogForbidden, conflict, notFound } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import { accepted } from "./Config.ts"

/** Config API v1 writes the export does not use: create a catalog, delete a catalog, delete a layer. */

/** HRN partition of catalogs the local service creates, as the seed's (`hrn:local:data:::<id>`). */
export const LOCAL_PARTITION = "local"
const ORGANISATION = "olp-local"

/** Interactive map layers store GeoJSON (the config API's default content type for them). */
const INTERACTIVE_MAP_CONTENT_TYPE = "application/geo+json"

const jsonBody = Effect.map(RequestBody.json, (body) => body as Record<string, any>)

/** Removes blob contents no blob row refers to any more (after a deletion committed). */
export const collectContents = (digests: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (digests.length === 0) return
    const files = yield* BlobFiles
    for (const sha256 of yield* (yield* BlobsRepo).unusedContents(digests)) yield* files.remove(sha256)
  })

/** `POST /catalogs`: 202 with a status link; the catalog (owned by the caller) exists when it answers. */
const create = Effect.gen(function*() {
  const { appId } = yield* Caller
  const catalogs = yield* CatalogsRepo
  const body = yield* jsonBody
  yield* checkCatalog(body)
  const replication = yield* replicationOfCreate(body)
  const layers = (body.layers ?? []) as Array<Record<string, any>>
  yield* checkLayerTypes(replication, layers)
  const hrn = catalogHrn(LOCAL_PARTITION, body.id)
  if ((yield* catalogs.catalogById(body.id)) !== undefined || (yield* catalogs.catalog(hrn)) !== undefined) {
    return yield* conflict(
      "id",
      `a catalog with the id '${body.id}' already exists; catalog ids are unique across the platform`
    )
  }
  const { region: _region, ...rest } = body
  const config = {
    ...storedCatalogConfig({ ...rest, replication }),
    tags: body.tags ?? [],
    notifications: body.notifications ?? { enabled: false },
    owner: { creator: { id: appId }, organisation: { id: ORGANISATION } },
    version: 1
  }
  const created = new Date().toISOString()
  yield* transaction(Effect.gen(function*() {
    // Two creations of the same id racing: the second finds the first's row.
    if (
      !(yield* catalogs.insertCatalog({ hrn, id: body.id, owner_app: appId, config: JSON.stringify(config), created }))
    ) {
      return yield* conflict("id", `a catalog with the id '${body.id}' already exists or is being created`)
    }
    for (const layer of layers) {
      const stored = storedLayerConfig(layer)
      if (layer.layerType === "interactivemap" && stored.contentType === undefined) {
        stored.contentType = INTERACTIVE_MAP_CONTENT_TYPE
      }
      yield* catalogs.insertLayer({
        catalog_hrn: hrn,
        id: layer.id,
        layer_type: layer.layerType,
        config: JSON.stringify(stored),
        created
      })
    }
  }))
  const warnings = yield* recreateWarnings(hrn, layers.map((l) => l.id))
  return withWarnings(warnings)(yield* accepted("create", hrn, "Catalog Creation"))
})

/** `DELETE /catalogs/{hrn}`: only the creating application may delete a catalog. */
const remove = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const { appId } = yield* Caller
  const catalog = yield* configCatalogFor(decodeSegment(params.catalog), "write")
  if (catalog.owner_app !== appId) return yield* Effect.fail(catalogForbidden())
  const catalogs = yield* CatalogsRepo
  const contents = yield* transaction(catalogs.deleteCatalog(catalog.hrn, Date.now()))
  yield* collectContents(contents)
  return yield* accepted("delete", catalog.hrn, "Catalog Deletion")
})

/** `DELETE /catalogs/{hrn}/layers/{layerId}`: the layer's data and metadata are gone when it answers; its status walks the seven steps. */
const removeLayer = Effect.gen(function*() {
  const params = yield* HttpRouter.params
  const catalog = yield* configCatalogFor(decodeSegment(params.catalog), "write")
  const layerId = decodeSegment(params.layer)
  const layer = yield* (yield* CatalogsRepo).layer(catalog.hrn, layerId)
  if (layer === undefined) return yield* notFound("layerId", `catalog ${catalog.hrn} has no layer '${layerId}'`)
  const catalogs = yield* CatalogsRepo
  const contents = yield* transaction(catalogs.deleteLayer(catalog.hrn, layer.pk, layer.id, Date.now()))
  yield* collectContents(contents)
  const response = yield* accepted("layer-delete", catalog.hrn, "Layer Deletion")
  return withWarnings(deleteWarnings(layer.id, layer.created))(response)
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.post("/config/v1/catalogs", withCaller(create)),
  HttpRouter.del("/config/v1/catalogs/:catalog", withCaller(remove)),
  HttpRouter.del("/config/v1/catalogs/:catalog/layers/:layer", withCaller(removeLayer))
)
