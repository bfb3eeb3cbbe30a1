import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ADDITIONAL_FIELDS, type AdditionalField } from "../../domain/Partition.ts"
import { routeCatalog, routeLayer, servedIn } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import type { CatalogRow, LayerRow } from "../db/CatalogsRepo.ts"
import { type VersionRow, VersionsRepo } from "../db/VersionsRepo.ts"
import * as Listing from "../Listing.ts"
import { Reads, type ReadsShape, type Selection } from "../Reads.ts"
import { versionedWritesBlockedBy, versionedWritesRefused } from "../Regions.ts"
import { Replicas } from "../Replicas.ts"
import { badRequest, json, notFound, orFail, rangeNotSatisfiable, Reply, type Result } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import { Collector, raiseMinimum } from "../Versions.ts"
import { originOf } from "../Views.ts"

const MAX_VERSIONS_PER_CALL = 1000
const MAX_PARTS = 10_000
/** Rows per volatile listing response before a `next` link, as the platform pages volatile layers. */
export const VOLATILE_PAGE = 10_000

export type Params = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const one = (params: Params, name: string): string | undefined => {
  const v = params[name]
  return typeof v === "string" ? v : v?.[0]
}

// The checks below are plain functions (a value or the Reply), shared by the routes and the lean path
// (FastPath.ts); the Effect forms wrap them.

const integerOf = (params: Params, name: string): Result<number | undefined> => {
  const raw = one(params, name)
  if (raw === undefined || raw === "") return undefined
  if (!/^-?[0-9]+$/.test(raw)) return badRequest(name, `${name} must be an integer, got '${raw}'`)
  return Number(raw)
}

const requiredIntegerOf = (params: Params, name: string): Result<number> => {
  const value = integerOf(params, name)
  return value === undefined ? badRequest(name, `${name} is required`) : value
}

const integerParam = (params: Params, name: string) => orFail(integerOf(params, name))

const requiredInteger = (params: Params, name: string) => orFail(requiredIntegerOf(params, name))

const fieldsOf = (params: Params): Result<ReadonlyArray<AdditionalField>> => {
  const raw = params.additionalFields
  const values = (typeof raw === "string" ? [raw] : raw ?? []).flatMap((v) => v.split(",")).map((v) => v.trim()).filter(
    (v) => v !== ""
  )
  for (const v of values) {
    if (!(ADDITIONAL_FIELDS as ReadonlyArray<string>).includes(v)) {
      return badRequest(
        "additionalFields",
        `unknown additional field '${v}' (allowed: ${ADDITIONAL_FIELDS.join(", ")})`
      )
    }
  }
  return [...new Set(values)] as ReadonlyArray<AdditionalField>
}

export const additionalFields = (params: Params) => orFail(fieldsOf(params))

const noVersions = (catalog: CatalogRow): Reply | undefined =>
  catalog.latest_version < 0 ? notFound("catalog", `Catalog ${catalog.hrn} has no versions yet`) : undefined

const requireVersions = (catalog: CatalogRow) => orFail(noVersions(catalog))

/** Why a catalog version cannot be read (above the latest, below the minimum), or undefined. */
const versionProblem = (catalog: CatalogRow, version: number, name: string): Reply | undefined =>
  version > catalog.latest_version
    ? badRequest(name, `Invalid version: latest known version is ${catalog.latest_version}`)
    : version < catalog.min_version
    ? badRequest(name, `Invalid version: minimum version for this catalog is ${catalog.min_version}`)
    : undefined

export const checkVersion = (catalog: CatalogRow, version: number, name = "version") =>
  orFail(versionProblem(catalog, version, name))

// --- parts ------------------------------------------------------------------------------------

interface Part {
  readonly partIndex: number
  readonly maxParts: number
  readonly scope: string
  readonly after: string
  readonly upTo: string | null
}

const encodePart = (part: Part) => Buffer.from(JSON.stringify(part)).toString("base64url")

const decodePart = (raw: string): Result<Part> => {
  try {
    const part = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Part
    if (typeof part.after === "string" && (part.upTo === null || typeof part.upTo === "string")) return part
  } catch {
    // reported below
  }
  return badRequest("part", `'${raw}' is not a part id returned by the parts endpoint`)
}

const parts = Effect.gen(function*() {
  const { layer } = yield* routeLayer("read")
  const params = yield* HttpServerRequest.ParsedSearchParams
  const requested = yield* requiredInteger(params, "numRequestedParts")
  if (requested < 1 || requested > MAX_PARTS) {
    return yield* badRequest("numRequestedParts", `numRequestedParts must be within 1..${MAX_PARTS}`)
  }
  const versions = yield* VersionsRepo
  const total = yield* versions.countCurrentPartitions(layer.pk)
  const count = Math.max(1, Math.min(requested, total))
  const bounds: Array<string> = [""]
  for (let i = 1; i < count; i++) {
    const id = yield* versions.partitionIdAtRank(layer.pk, Math.floor((i * total) / count) - 1)
    if (id !== undefined && id > bounds[bounds.length - 1]!) bounds.push(id)
  }
  const result = bounds.map((after, i) =>
    encodePart({ partIndex: i, maxParts: bounds.length, scope: "pp", after, upTo: bounds[i + 1] ?? null })
  )
  return json(200, { parts: result })
})

// --- partitions and changes -------------------------------------------------------------------

export type ListingKind = "partitions" | "changes"

/** Which rows a partitions or changes request lists. */
const selectionOf = (kind: ListingKind, catalog: CatalogRow, layer: LayerRow, params: Params): Result<Selection> => {
  if (kind === "partitions") {
    if (layer.layer_type === "versioned") {
      const version = requiredIntegerOf(params, "version")
      if (version instanceof Reply) return version
      return versionProblem(catalog, version, "version") ?? { _tag: "AtVersion", version }
    }
    if (layer.layer_type === "volatile") return { _tag: "Volatile" }
    return badRequest(
      "layer",
      `Layer '${layer.id}' is a ${layer.layer_type} layer; partitions are listed for versioned and volatile layers only.`
    )
  }
  if (layer.layer_type === "versioned") {
    const missing = noVersions(catalog)
    if (missing !== undefined) return missing
    const start = requiredIntegerOf(params, "startVersion")
    if (start instanceof Reply) return start
    const endParam = integerOf(params, "endVersion")
    if (endParam instanceof Reply) return endParam
    const end = endParam ?? catalog.latest_version
    if (start < catalog.min_version - 1) {
      return badRequest("startVersion", `Invalid version: minimum version for this catalog is ${catalog.min_version}`)
    }
    const problem = versionProblem(catalog, end, "endVersion")
    if (problem !== undefined) return problem
    if (end < start) return badRequest("endVersion", `endVersion ${end} is lower than startVersion ${start}`)
    return { _tag: "Changes", startVersion: start, endVersion: end }
  }
  if (layer.layer_type === "volatile") {
    const since = integerOf(params, "sinceTime")
    if (since instanceof Reply) return since
    return { _tag: "VolatileSince", sinceTime: since ?? 0 }
  }
  return badRequest(
    "layer",
    `Layer '${layer.id}' is a ${layer.layer_type} layer; changes are listed for versioned and volatile layers only.`
  )
}

const listingRequestOf = (
  layer: LayerRow,
  selection: Selection,
  params: Params,
  url: string,
  headers: Headers
): Result<Listing.ListingRequest> => {
  const fields = fieldsOf(params)
  if (fields instanceof Reply) return fields
  const partId = one(params, "part")
  const pageToken = one(params, "pageToken")
  const part = partId === undefined ? undefined : decodePart(partId)
  if (part instanceof Reply) return part
  const volatile = layer.layer_type === "volatile"
  const after = pageToken !== undefined ? Buffer.from(pageToken, "base64url").toString("utf8") : part?.after ?? ""
  const base = new URL(url, originOf(headers))
  return {
    layerPk: layer.pk,
    layerId: layer.id,
    selection,
    fields,
    after,
    upTo: part?.upTo ?? null,
    pageLimit: volatile ? VOLATILE_PAGE : null,
    fixedVersion: volatile ? -1 : null,
    nextLink: (last: string) => {
      const next = new URL(base)
      next.searchParams.set("pageToken", Buffer.from(last).toString("base64url"))
      return next.toString()
    }
  }
}

const rangeStartOf = (headers: Headers, params: Params): Result<number | undefined> => {
  const raw = headers["range"] ?? one(params, "range")
  if (raw === undefined) return undefined
  const match = /^bytes=(\d+)-$/.exec(raw.trim())
  if (!match) return rangeNotSatisfiable(`only a single open range 'bytes=N-' is supported, got '${raw}'`)
  return Number(match[1])
}

export type Headers = Readonly<Record<string, string | undefined>>

export interface ListingResponse {
  readonly status: 200 | 206
  readonly headers: Record<string, string>
  readonly chunks: Iterator<Uint8Array>
}

/**
 * A partitions or changes listing of a layer the caller may read: the document (200), the rest of it
 * from a `Range: bytes=N-` offset (206), or the Reply (400, 404, 416). `url` is the request URL as the
 * route sees it (without a `/regions/<id>` prefix); the volatile `next` link is built from it.
 */
export const listing = (
  reads: ReadsShape,
  kind: ListingKind,
  catalog: CatalogRow,
  layer: LayerRow,
  params: Params,
  url: string,
  headers: Headers
): Result<ListingResponse> => {
  const selection = selectionOf(kind, catalog, layer, params)
  if (selection instanceof Reply) return selection
  const request = listingRequestOf(layer, selection, params, url, headers)
  if (request instanceof Reply) return request
  const offset = rangeStartOf(headers, params)
  if (offset instanceof Reply) return offset
  const contentType = { "content-type": "application/json" }
  if (offset === undefined) return { status: 200, headers: contentType, chunks: Listing.chunks(reads, request) }
  const rest = Listing.chunksFrom(reads, request, offset)
  if (rest === undefined) return rangeNotSatisfiable(`offset ${offset} is beyond the end of the listing`)
  return { status: 206, headers: { ...contentType, "content-range": `bytes ${offset}-*/*` }, chunks: rest }
}

const listingRoute = (kind: ListingKind) =>
  Effect.gen(function*() {
    const { catalog, layer } = yield* routeLayer("read")
    const params = yield* HttpServerRequest.ParsedSearchParams
    const request = yield* HttpServerRequest.HttpServerRequest
    const response = yield* orFail(listing(yield* Reads, kind, catalog, layer, params, request.url, request.headers))
    return HttpServerResponse.stream(Listing.toStream(response.chunks), {
      status: response.status,
      headers: response.headers
    })
  })

// --- versions ---------------------------------------------------------------------------------

const versionInfo = (row: VersionRow) => {
  const partitionCounts = JSON.parse(row.partition_counts) as Record<string, number>
  return {
    version: row.version,
    timestamp: row.timestamp,
    dependencies: JSON.parse(row.dependencies),
    ...(Object.keys(partitionCounts).length === 0 ? {} : { partitionCounts })
  }
}

const versions = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  const params = yield* HttpServerRequest.ParsedSearchParams
  const versions = yield* VersionsRepo
  const listed = params.version
  if (listed !== undefined) {
    const numbers = (typeof listed === "string" ? [listed] : listed).flatMap((v) => v.split(","))
    if (numbers.length > MAX_VERSIONS_PER_CALL) {
      return yield* badRequest("version", `at most ${MAX_VERSIONS_PER_CALL} versions per call`)
    }
    const parsed: Array<number> = []
    for (const n of numbers) {
      if (!/^-?\d+$/.test(n)) return yield* badRequest("version", `version must be an integer, got '${n}'`)
      parsed.push(Number(n))
    }
    const rows = yield* versions.versionsIn(catalog.hrn, parsed)
    return json(200, { versions: rows.filter((r) => r.version >= catalog.min_version).map(versionInfo) })
  }
  const start = (yield* integerParam(params, "startVersion")) ?? -1
  const end = (yield* integerParam(params, "endVersion")) ?? catalog.latest_version
  if (end > catalog.latest_version) {
    return yield* badRequest("endVersion", `Invalid version: latest known version is ${catalog.latest_version}`)
  }
  if (end < start) return yield* badRequest("endVersion", `endVersion ${end} is lower than startVersion ${start}`)
  if (end - start > MAX_VERSIONS_PER_CALL) {
    return yield* badRequest(
      "endVersion",
      `at most ${MAX_VERSIONS_PER_CALL} versions per call; narrow startVersion..endVersion`
    )
  }
  const rows = yield* versions.versions(catalog.hrn, Math.max(start, catalog.min_version - 1), end)
  return json(200, { versions: rows.map(versionInfo) })
})

const latest = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  return json(200, { version: catalog.latest_version })
})

const minimum = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  return json(200, { version: catalog.min_version })
})

const SetMinimum = Schema.Struct({ version: Schema.Int })

const setMinimum = Effect.gen(function*() {
  const catalog = yield* routeCatalog("write")
  // Deleting versions is a write to versioned data: both regions of a multi-region catalog must be up.
  const blockedBy = versionedWritesBlockedBy((yield* servedIn(catalog)).placement, (yield* Replicas).down)
  if (blockedBy !== undefined) return yield* versionedWritesRefused(blockedBy)
  const { version } = yield* RequestBody.decodeJson(
    SetMinimum,
    () => badRequest("version", "a body {\"version\": <integer>} is required")
  )
  if (yield* raiseMinimum(catalog.hrn, version)) yield* (yield* Collector).start(catalog.hrn)
  return HttpServerResponse.empty({ status: 204 })
})

const layerVersions = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  const params = yield* HttpServerRequest.ParsedSearchParams
  const version = yield* requiredInteger(params, "version")
  yield* checkVersion(catalog, version)
  const rows = yield* (yield* VersionsRepo).layerVersionsAt(catalog.hrn, version)
  return json(200, { version, layerVersions: rows })
})

const base = "/metadata/v1/catalogs/:catalog"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(`${base}/layers/:layer/partitions`, withCaller(listingRoute("partitions"))),
  HttpRouter.get(`${base}/layers/:layer/partitions/parts`, withCaller(parts)),
  HttpRouter.get(`${base}/layers/:layer/changes`, withCaller(listingRoute("changes"))),
  HttpRouter.get(`${base}/layers/:layer/changes/parts`, withCaller(parts)),
  HttpRouter.get(`${base}/versions`, withCaller(versions)),
  HttpRouter.get(`${base}/versions/latest`, withCaller(latest)),
  HttpRouter.get(`${base}/versions/minimum`, withCaller(minimum)),
  HttpRouter.post(`${base}/versions/minimum`, withCaller(setMinimum)),
  HttpRouter.get(`${base}/layerVersions`, withCaller(layerVersions))
)
