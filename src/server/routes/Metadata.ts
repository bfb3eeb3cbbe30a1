import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option, Schema } from "effect"
import { ADDITIONAL_FIELDS, type AdditionalField } from "../../domain/Partition.ts"
import { routeCatalog, routeLayer } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import * as Listing from "../Listing.ts"
import { badRequest, json, notFound, Reply } from "../Reply.ts"
import { type CatalogRow, type LayerRow, type Selection, Store } from "../Store.ts"
import { collect, raiseMinimum } from "../Versions.ts"
import { originOf } from "../Views.ts"

const MAX_VERSIONS_PER_CALL = 1000
const MAX_PARTS = 10_000
/** Rows per volatile listing response before a `next` link, as the platform pages volatile layers. */
export const VOLATILE_PAGE = 10_000

type Params = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const one = (params: Params, name: string): string | undefined => {
  const v = params[name]
  return typeof v === "string" ? v : v?.[0]
}

const integerParam = (params: Params, name: string) =>
  Effect.gen(function*() {
    const raw = one(params, name)
    if (raw === undefined || raw === "") return undefined
    if (!/^-?[0-9]+$/.test(raw)) return yield* badRequest(name, `${name} must be an integer, got '${raw}'`)
    return Number(raw)
  })

const requiredInteger = (params: Params, name: string) =>
  Effect.flatMap(integerParam(params, name), (v) => v === undefined ? badRequest(name, `${name} is required`) : Effect.succeed(v))

export const additionalFields = (params: Params) =>
  Effect.gen(function*() {
    const raw = params.additionalFields
    const values = (typeof raw === "string" ? [raw] : raw ?? []).flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v !== "")
    for (const v of values) {
      if (!(ADDITIONAL_FIELDS as ReadonlyArray<string>).includes(v)) {
        return yield* badRequest("additionalFields", `unknown additional field '${v}' (allowed: ${ADDITIONAL_FIELDS.join(", ")})`)
      }
    }
    return [...new Set(values)] as ReadonlyArray<AdditionalField>
  })

const requireVersions = (catalog: CatalogRow) =>
  catalog.latest_version < 0 ? notFound("catalog", `Catalog ${catalog.hrn} has no versions yet`) : Effect.void

/** A readable catalog version: not above the latest, not below the minimum. */
export const checkVersion = (catalog: CatalogRow, version: number, name = "version") =>
  version > catalog.latest_version
    ? badRequest(name, `Invalid version: latest known version is ${catalog.latest_version}`)
    : version < catalog.min_version
    ? badRequest(name, `Invalid version: minimum version for this catalog is ${catalog.min_version}`)
    : Effect.void

// --- parts ------------------------------------------------------------------------------------

interface Part {
  readonly partIndex: number
  readonly maxParts: number
  readonly scope: string
  readonly after: string
  readonly upTo: string | null
}

const encodePart = (part: Part) => Buffer.from(JSON.stringify(part)).toString("base64url")

const decodePart = (raw: string) =>
  Effect.gen(function*() {
    try {
      const part = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Part
      if (typeof part.after === "string" && (part.upTo === null || typeof part.upTo === "string")) return part
    } catch {
      // reported below
    }
    return yield* badRequest("part", `'${raw}' is not a part id returned by the parts endpoint`)
  })

const parts = Effect.gen(function*() {
  const { layer } = yield* routeLayer("read")
  const params = yield* HttpServerRequest.ParsedSearchParams
  const requested = yield* requiredInteger(params, "numRequestedParts")
  if (requested < 1 || requested > MAX_PARTS) return yield* badRequest("numRequestedParts", `numRequestedParts must be within 1..${MAX_PARTS}`)
  const store = yield* Store
  const total = yield* store.countCurrentPartitions(layer.pk).pipe(Effect.orDie)
  const count = Math.max(1, Math.min(requested, total))
  const bounds: Array<string> = [""]
  for (let i = 1; i < count; i++) {
    const id = yield* store.partitionIdAtRank(layer.pk, Math.floor((i * total) / count) - 1).pipe(Effect.orDie)
    if (id !== undefined && id > bounds[bounds.length - 1]!) bounds.push(id)
  }
  const result = bounds.map((after, i) =>
    encodePart({ partIndex: i, maxParts: bounds.length, scope: "pp", after, upTo: bounds[i + 1] ?? null })
  )
  return json(200, { parts: result })
})

// --- partitions and changes -------------------------------------------------------------------

const rangeStart = (request: HttpServerRequest.HttpServerRequest, params: Params) =>
  Effect.gen(function*() {
    const raw = request.headers["range"] ?? one(params, "range")
    if (raw === undefined) return undefined
    const match = /^bytes=(\d+)-$/.exec(raw.trim())
    if (!match) {
      return yield* new Reply({
        response: json(416, { title: "Range Not Satisfiable", status: 416, detail: [{ name: "range", error: `only a single open range 'bytes=N-' is supported, got '${raw}'` }] })
      })
    }
    return Number(match[1])
  })

const respondListing = (listing: Listing.ListingRequest) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = yield* HttpServerRequest.ParsedSearchParams
    const offset = yield* rangeStart(request, params)
    const store = yield* Store
    const headers = { "content-type": "application/json" }
    if (offset === undefined) {
      return HttpServerResponse.stream(Listing.stream(store, listing), { status: 200, headers })
    }
    const rest = yield* Listing.streamFrom(store, listing, offset)
    if (Option.isNone(rest)) {
      return yield* new Reply({ response: json(416, { title: "Range Not Satisfiable", status: 416, detail: [{ name: "range", error: `offset ${offset} is beyond the end of the listing` }] }) })
    }
    return HttpServerResponse.stream(rest.value, { status: 206, headers: { ...headers, "content-range": `bytes ${offset}-*/*` } })
  })

const listingFor = (layer: LayerRow, selection: Selection, params: Params) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const fields = yield* additionalFields(params)
    const partId = one(params, "part")
    const pageToken = one(params, "pageToken")
    const part = partId === undefined ? undefined : yield* decodePart(partId)
    const volatile = layer.layer_type === "volatile"
    const after = pageToken !== undefined ? Buffer.from(pageToken, "base64url").toString("utf8") : part?.after ?? ""
    const url = new URL(request.url, originOf(request.headers))
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
        const next = new URL(url)
        next.searchParams.set("pageToken", Buffer.from(last).toString("base64url"))
        return next.toString()
      }
    } satisfies Listing.ListingRequest
  })

const partitions = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("read")
  const params = yield* HttpServerRequest.ParsedSearchParams
  let selection: Selection = { _tag: "Volatile" }
  if (layer.layer_type === "versioned") {
    const version = yield* requiredInteger(params, "version")
    yield* checkVersion(catalog, version)
    selection = { _tag: "AtVersion", version }
  } else if (layer.layer_type !== "volatile") {
    return yield* badRequest("layer", `Layer '${layer.id}' is a ${layer.layer_type} layer; partitions are listed for versioned and volatile layers only.`)
  }
  return yield* respondListing(yield* listingFor(layer, selection, params))
})

const changes = Effect.gen(function*() {
  const { catalog, layer } = yield* routeLayer("read")
  const params = yield* HttpServerRequest.ParsedSearchParams
  let selection: Selection
  if (layer.layer_type === "versioned") {
    yield* requireVersions(catalog)
    const start = yield* requiredInteger(params, "startVersion")
    const end = (yield* integerParam(params, "endVersion")) ?? catalog.latest_version
    if (start < catalog.min_version - 1) {
      return yield* badRequest("startVersion", `Invalid version: minimum version for this catalog is ${catalog.min_version}`)
    }
    yield* checkVersion(catalog, end, "endVersion")
    if (end < start) return yield* badRequest("endVersion", `endVersion ${end} is lower than startVersion ${start}`)
    selection = { _tag: "Changes", startVersion: start, endVersion: end }
  } else if (layer.layer_type === "volatile") {
    selection = { _tag: "VolatileSince", sinceTime: (yield* integerParam(params, "sinceTime")) ?? 0 }
  } else {
    return yield* badRequest("layer", `Layer '${layer.id}' is a ${layer.layer_type} layer; changes are listed for versioned and volatile layers only.`)
  }
  return yield* respondListing(yield* listingFor(layer, selection, params))
})

// --- versions ---------------------------------------------------------------------------------

const versionInfo = (row: { version: number; timestamp: number; dependencies: string }) => ({
  version: row.version,
  timestamp: row.timestamp,
  dependencies: JSON.parse(row.dependencies)
})

const versions = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  const params = yield* HttpServerRequest.ParsedSearchParams
  const store = yield* Store
  const listed = params.version
  if (listed !== undefined) {
    const numbers = (typeof listed === "string" ? [listed] : listed).flatMap((v) => v.split(","))
    if (numbers.length > MAX_VERSIONS_PER_CALL) return yield* badRequest("version", `at most ${MAX_VERSIONS_PER_CALL} versions per call`)
    const parsed: Array<number> = []
    for (const n of numbers) {
      if (!/^-?\d+$/.test(n)) return yield* badRequest("version", `version must be an integer, got '${n}'`)
      parsed.push(Number(n))
    }
    const rows = yield* store.versionsIn(catalog.hrn, parsed).pipe(Effect.orDie)
    return json(200, { versions: rows.filter((r) => r.version >= catalog.min_version).map(versionInfo) })
  }
  const start = (yield* integerParam(params, "startVersion")) ?? -1
  const end = (yield* integerParam(params, "endVersion")) ?? catalog.latest_version
  if (end > catalog.latest_version) return yield* badRequest("endVersion", `Invalid version: latest known version is ${catalog.latest_version}`)
  if (end < start) return yield* badRequest("endVersion", `endVersion ${end} is lower than startVersion ${start}`)
  if (end - start > MAX_VERSIONS_PER_CALL) {
    return yield* badRequest("endVersion", `at most ${MAX_VERSIONS_PER_CALL} versions per call; narrow startVersion..endVersion`)
  }
  const rows = yield* store.versions(catalog.hrn, Math.max(start, catalog.min_version - 1), end).pipe(Effect.orDie)
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
  const request = yield* HttpServerRequest.HttpServerRequest
  const body = yield* request.json.pipe(Effect.catchAll(() => badRequest("body", "the request body is not valid JSON")))
  const { version } = yield* Schema.decodeUnknown(SetMinimum)(body).pipe(Effect.catchAll(() => badRequest("version", "a body {\"version\": <integer>} is required")))
  if (yield* raiseMinimum(catalog.hrn, version)) yield* Effect.forkDaemon(collect(catalog.hrn))
  return HttpServerResponse.empty({ status: 204 })
})

const layerVersions = Effect.gen(function*() {
  const catalog = yield* routeCatalog("read")
  yield* requireVersions(catalog)
  const params = yield* HttpServerRequest.ParsedSearchParams
  const version = yield* requiredInteger(params, "version")
  yield* checkVersion(catalog, version)
  const rows = yield* (yield* Store).layerVersionsAt(catalog.hrn, version).pipe(Effect.orDie)
  return json(200, { version, layerVersions: rows })
})

const base = "/metadata/v1/catalogs/:catalog"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(`${base}/layers/:layer/partitions`, withCaller(partitions)),
  HttpRouter.get(`${base}/layers/:layer/partitions/parts`, withCaller(parts)),
  HttpRouter.get(`${base}/layers/:layer/changes`, withCaller(changes)),
  HttpRouter.get(`${base}/layers/:layer/changes/parts`, withCaller(parts)),
  HttpRouter.get(`${base}/versions`, withCaller(versions)),
  HttpRouter.get(`${base}/versions/latest`, withCaller(latest)),
  HttpRouter.get(`${base}/versions/minimum`, withCaller(minimum)),
  HttpRouter.post(`${base}/versions/minimum`, withCaller(setMinimum)),
  HttpRouter.get(`${base}/layerVersions`, withCaller(layerVersions))
)
