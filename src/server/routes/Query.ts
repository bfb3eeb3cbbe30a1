import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { routeLayer } from "../Access.ts"
import { withCaller } from "../Auth.ts"
import { partitionEncoder } from "../Listing.ts"
import { Reads, type Selection } from "../Reads.ts"
import { badRequest, json } from "../Reply.ts"
import * as SearchParams from "../SearchParams.ts"
import { additionalFields, checkVersion } from "./Metadata.ts"

const MAX_IDS = 100

/** `partition` may be repeated or, as the TS SDK's changes-by-id sends it, comma-joined. */
const PartitionIds = Schema.transform(
  Schema.Union(Schema.String, Schema.Array(Schema.String)),
  Schema.Array(Schema.String),
  {
    strict: true,
    decode: (
      raw
    ) => [...new Set((typeof raw === "string" ? [raw] : raw).flatMap((v) => v.split(",")).filter((v) => v !== ""))],
    encode: (ids) => ids
  }
)

/** The query API reads a version that is not an integer as if it were absent. */
const Version = Schema.transform(SearchParams.Param, Schema.UndefinedOr(Schema.Number), {
  strict: true,
  decode: (raw) => (/^-?\d+$/.test(raw) ? Number(raw) : undefined),
  encode: (version) => (version === undefined ? "" : String(version))
})

const QueryParams = Schema.Struct({
  partition: Schema.optionalWith(PartitionIds, { default: () => [] }),
  version: Schema.optional(Version),
  startVersion: Schema.optional(Version),
  endVersion: Schema.optional(Version),
  sinceTime: Schema.optional(Version)
})

const byIds = (changes: boolean) =>
  Effect.gen(function*() {
    const { catalog, layer } = yield* routeLayer("read")
    const params = yield* HttpServerRequest.ParsedSearchParams
    const query = yield* SearchParams.decode(QueryParams, (name) => badRequest(name, `${name} is not valid`))
    const ids = query.partition
    if (ids.length < 1 || ids.length > MAX_IDS) {
      return yield* badRequest("partition", `between 1 and ${MAX_IDS} partition ids are required, got ${ids.length}`)
    }
    const fields = yield* additionalFields(params)
    let selection: Selection
    if (layer.layer_type === "volatile") {
      selection = changes ? { _tag: "VolatileSince", sinceTime: query.sinceTime ?? 0 } : { _tag: "Volatile" }
    } else if (layer.layer_type === "versioned") {
      if (changes) {
        const start = query.startVersion
        if (start === undefined) return yield* badRequest("startVersion", "startVersion is required")
        const end = query.endVersion ?? catalog.latest_version
        yield* checkVersion(catalog, end, "endVersion")
        selection = { _tag: "Changes", startVersion: start, endVersion: end }
      } else {
        const version = query.version ?? catalog.latest_version
        yield* checkVersion(catalog, version)
        selection = { _tag: "AtVersion", version }
      }
    } else {
      return yield* badRequest(
        "layer",
        `Layer '${layer.id}' is a ${layer.layer_type} layer; the query API serves versioned and volatile layers.`
      )
    }
    const encode = partitionEncoder(layer.id, fields, layer.layer_type === "volatile" ? -1 : null)
    const partitions = (yield* Reads).partitionsByIds(layer.pk, selection, ids).map((row) => JSON.parse(encode(row)))
    return json(200, { partitions })
  })

const base = "/query/v1/catalogs/:catalog"

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(`${base}/layers/:layer/partitions`, withCaller(byIds(false))),
  HttpRouter.get(`${base}/layers/:layer/changes`, withCaller(byIds(true)))
)
