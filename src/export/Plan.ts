import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { ConfigApi } from "../client/ConfigApi.ts"
import { ApiError } from "../client/Errors.ts"
import { MetadataApi } from "../client/MetadataApi.ts"
import { isHereTile } from "../domain/Catalog.ts"
import * as Hrn from "../domain/Hrn.ts"
import { InvalidLayerId, LayerNotExportable, NotFound } from "./Errors.ts"

/**
 * What one export will do, pinned: the catalog version, the metadata parts and which shard lists
 * which parts. Written to `_plan.json` in the export's directory, where every run of it (one
 * process, or one worker per shard: `export --plan LOCATION --shard I`) and the commit read it.
 */
export const Plan = Schema.Struct({
  formatVersion: Schema.Literal(1),
  catalogHrn: Schema.String,
  catalogId: Schema.String,
  layerId: Schema.String,
  layerType: Schema.Literal("versioned", "volatile"),
  contentType: Schema.String,
  contentEncoding: Schema.optional(Schema.String),
  digest: Schema.optional(Schema.String),
  heretile: Schema.Boolean,
  /** The catalog version exported (versioned), or the catalog's latest version when a volatile snapshot was taken. */
  version: Schema.Number,
  /** Volatile layers: the snapshot's UTC time `yyyymmddThhmmssZ`, which names its directory. */
  snapshot: Schema.optional(Schema.String),
  mode: Schema.Literal("full", "changes"),
  /** `changes` mode: the exclusive start version. */
  baseVersion: Schema.optional(Schema.Number),
  /** Opaque metadata part ids; empty for one unpartitioned listing. */
  parts: Schema.Array(Schema.String),
  /** The part indices each shard lists (a sharded plan); absent: one shard lists every part. */
  shards: Schema.optional(Schema.Array(Schema.Array(Schema.Number))),
  /**
   * `iceberg`: a snapshot of the layer's Iceberg table (export/Tables.ts), whose shards write Parquet
   * data files for it; absent: files in the formats the shards' `--format` says.
   */
  format: Schema.optional(Schema.Literal("iceberg")),
  createdAt: Schema.String
})
export type Plan = typeof Plan.Type

/** The plan's file in its export's directory. */
export const PLAN = "_plan.json"

/** The listings of a plan: its parts, or one unpartitioned listing (index 0) when it has none. */
export const partCount = (plan: Pick<Plan, "parts">): number => Math.max(1, plan.parts.length)

/** The part indices of each shard. */
export const shardsOf = (plan: Pick<Plan, "parts" | "shards">): ReadonlyArray<ReadonlyArray<number>> =>
  plan.shards ?? [Array.from({ length: partCount(plan) }, (_, i) => i)]

/** Deals the parts to `count` shards in turn (the service's parts are of about equal size). */
export const withShards = (plan: Plan, count: number): Plan => ({
  ...plan,
  shards: Array.from(
    { length: count },
    (_, shard) => Array.from({ length: partCount(plan) }, (_, i) => i).filter((i) => i % count === shard)
  )
})

export interface PlanRequest {
  readonly catalog: string
  readonly layer: string
  /** A catalog version, or the latest. Ignored for volatile layers. */
  readonly version: number | "latest"
  /** Metadata parts to ask for (the service may return fewer). */
  readonly parts: number
  readonly mode?: "full" | "changes"
  readonly baseVersion?: number
  /** A snapshot of the layer's Iceberg table (`--format iceberg`). */
  readonly format?: "iceberg" | undefined
}

const EXPORTABLE = new Set(["versioned", "volatile"])

export const snapshotName = (date: Date): string => date.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z")

/** Where a layer's Iceberg table keeps its data files, below the table's directory. */
export const TABLE_DATA = "data"

/**
 * The directory of one export below OUT: `<catalog-id>/<layer-id>/version=<V>` or `snapshot=<S>`; an
 * export into the layer's Iceberg table has it below the table's `data/` (its data files stay there).
 */
export const exportDir = (
  plan: Pick<Plan, "catalogId" | "layerId" | "layerType" | "version" | "snapshot"> & Partial<Pick<Plan, "format">>
): string =>
  [
    plan.catalogId,
    plan.layerId,
    ...(plan.format === "iceberg" ? [TABLE_DATA] : []),
    plan.layerType === "volatile" ? `snapshot=${plan.snapshot}` : `version=${plan.version}`
  ].join("/")

/** The lowest and highest readable catalog versions. */
export const versionBounds = (catalog: string) =>
  Effect.gen(function*() {
    const metadata = yield* MetadataApi
    // Both at once (a round trip less before the listing); the latest version's answer comes first.
    const minimum = yield* Effect.fork(metadata.minimumVersion(catalog))
    const latest = yield* metadata.latestVersion(catalog).pipe(
      Effect.catchIf(
        (e) => e instanceof ApiError && e.status === 404,
        () => new NotFound({ what: "version", message: `Catalog ${catalog} has no versions yet; publish data first.` })
      )
    )
    return { latest, minimum: yield* Fiber.join(minimum) }
  })

export const checkVersion = (catalog: string, version: number, bounds: { latest: number; minimum: number }) =>
  version > bounds.latest
    ? Effect.fail(
      new NotFound({
        what: "version",
        message: `Version ${version} of ${catalog} does not exist: the latest version is ${bounds.latest}.`
      })
    )
    : version < bounds.minimum
    ? Effect.fail(
      new NotFound({
        what: "version",
        message:
          `Version ${version} of ${catalog} was deleted: the minimum version is ${bounds.minimum}. Export version ${bounds.minimum} or later.`
      })
    )
    : Effect.succeed(version)

/** A plan with its listing not yet split into parts (`splitPlan`), and the catalog's readable versions read with it. */
export interface ResolvedPlan {
  readonly plan: Plan
  /** Absent for a volatile layer of a catalog that has no versions yet. */
  readonly bounds: { readonly latest: number; readonly minimum: number } | undefined
}

/**
 * The plan of a layer at a version, from the layer's configuration and the catalog's readable versions, which
 * are asked for at once (a round trip less before the listing); its listing is one part until `splitPlan`.
 */
export const resolvePlan = Effect.fn("Plan.resolve")(function*(request: Omit<PlanRequest, "parts">) {
  const parsed = yield* Hrn.parseCatalog(request.catalog)
  const hrn = Hrn.format(parsed)
  // The layer id names a directory of the output: nothing but a valid id may get there.
  if (!Hrn.isLayerId(request.layer)) return yield* new InvalidLayerId({ layerId: request.layer })
  const config = yield* ConfigApi
  // A missing catalog or layer is reported before anything the versions answered.
  const [catalog, bounds] = yield* Effect.all([config.getCatalog(hrn), Effect.either(versionBounds(hrn))], {
    concurrency: 2
  })
  const layer = catalog.layers.find((l) => l.id === request.layer)
  if (layer === undefined) {
    const known = catalog.layers.map((l) => l.id).join(", ") || "none"
    return yield* new NotFound({
      what: "layer",
      message: `Catalog ${hrn} has no layer '${request.layer}' (its layers: ${known}).`
    })
  }
  if (!EXPORTABLE.has(layer.layerType)) {
    return yield* new LayerNotExportable({ catalogHrn: hrn, layerId: layer.id, layerType: layer.layerType })
  }
  const layerType = layer.layerType as "versioned" | "volatile"
  // A volatile snapshot records the catalog's latest version for reference; a catalog may have none.
  const version = layerType === "volatile" && Either.isLeft(bounds) && bounds.left._tag === "NotFound"
    ? -1
    : layerType === "volatile" || request.version === "latest"
    ? (yield* bounds).latest
    : yield* checkVersion(hrn, request.version, yield* bounds)
  const now = new Date()
  const plan = {
    formatVersion: 1,
    catalogHrn: hrn,
    // From the validated HRN, not the service's answer: it names a directory of the output.
    catalogId: parsed.catalogId,
    layerId: layer.id,
    layerType,
    contentType: layer.contentType ?? "application/octet-stream",
    ...(layer.contentEncoding ? { contentEncoding: layer.contentEncoding } : {}),
    ...(layer.digest ? { digest: layer.digest } : {}),
    heretile: isHereTile(layer),
    version,
    ...(layerType === "volatile" ? { snapshot: snapshotName(now) } : {}),
    mode: request.mode ?? "full",
    ...(request.baseVersion !== undefined ? { baseVersion: request.baseVersion } : {}),
    parts: [],
    ...(request.format === undefined ? {} : { format: request.format }),
    createdAt: now.toISOString()
  } satisfies Plan
  return { plan, bounds: Either.getOrUndefined(bounds) } satisfies ResolvedPlan
})

/** The plan with its listing split into up to `parts` metadata parts of its mode, as the service splits it. */
export const splitPlan = Effect.fn("Plan.split")(function*(plan: Plan, parts: number) {
  if (plan.layerType === "volatile" || parts <= 1) return plan
  const metadata = yield* MetadataApi
  const ids = plan.mode === "changes"
    ? yield* metadata.changesParts(plan.catalogHrn, plan.layerId, { numRequestedParts: parts })
    : yield* metadata.partitionParts(plan.catalogHrn, plan.layerId, { numRequestedParts: parts })
  return { ...plan, parts: [...ids] } satisfies Plan
})

export const makePlan = (request: PlanRequest) =>
  Effect.flatMap(resolvePlan(request), ({ plan }) => splitPlan(plan, request.parts))
