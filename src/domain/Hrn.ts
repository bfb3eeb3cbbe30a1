import * as Data from "effect/Data"
import * as Either from "effect/Either"
import { ExitCode } from "./ExitCode.ts"

/**
 * HERE Resource Name: `hrn:<partition>:<service>:<region>:<account>:<resource>`.
 * Everything after the fifth colon is the resource, so a layer HRN
 * (`<catalog hrn>:<layerId>`) keeps `catalog:layer` together in `resource`.
 */
export interface Hrn {
  readonly partition: string
  readonly service: string
  readonly region: string
  readonly account: string
  readonly resource: string
}

export class InvalidHrn extends Data.TaggedError("InvalidHrn")<{
  readonly input: string
  readonly reason: string
}> {
  get exitCode() {
    return ExitCode.usage
  }

  override get message() {
    return `Invalid HRN "${this.input}": ${this.reason}. Expected the form hrn:<partition>:data::<account>:<catalog-id>, for example hrn:here:data::olp-here:rib-2 or hrn:local:data:::demo.`
  }
}

const PARTITIONS = new Set(["here", "here-dev", "here-cn", "here-cn-dev", "local"])
const CATALOG_ID = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/
const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,49}$/

export const parse = (input: string): Either.Either<Hrn, InvalidHrn> => {
  const fields = input.split(":")
  if (fields.length < 6 || fields[0] !== "hrn") {
    return Either.left(
      new InvalidHrn({ input, reason: "it needs at least six ':'-separated fields starting with 'hrn'" })
    )
  }
  const [, partition, service, region, account] = fields as [string, string, string, string, string]
  const resource = fields.slice(5).join(":")
  if (partition === "") return Either.left(new InvalidHrn({ input, reason: "the partition field is empty" }))
  if (service === "") return Either.left(new InvalidHrn({ input, reason: "the service field is empty" }))
  if (resource === "") return Either.left(new InvalidHrn({ input, reason: "the resource field is empty" }))
  return Either.right({ partition, service, region, account, resource })
}

export const format = (hrn: Hrn): string =>
  ["hrn", hrn.partition, hrn.service, hrn.region, hrn.account, hrn.resource].join(":")

/** A catalog HRN: a `data` HRN whose resource is a single catalog id. */
export interface CatalogHrn extends Hrn {
  readonly catalogId: string
}

export const parseCatalog = (input: string): Either.Either<CatalogHrn, InvalidHrn> =>
  Either.flatMap(parse(input.trim()), (hrn) => {
    if (hrn.service !== "data") {
      return Either.left(new InvalidHrn({ input, reason: `the service is "${hrn.service}", a catalog HRN has "data"` }))
    }
    if (!PARTITIONS.has(hrn.partition)) {
      return Either.left(
        new InvalidHrn({ input, reason: `unknown partition "${hrn.partition}" (known: ${[...PARTITIONS].join(", ")})` })
      )
    }
    if (hrn.resource.includes(":")) {
      return Either.left(
        new InvalidHrn({ input, reason: "this is a layer HRN; give the catalog HRN without the layer id" })
      )
    }
    if (!CATALOG_ID.test(hrn.resource)) {
      return Either.left(
        new InvalidHrn({
          input,
          reason:
            `"${hrn.resource}" is not a valid catalog id (3-63 characters: a-z, 0-9 and '-', not starting or ending with '-')`
        })
      )
    }
    return Either.right({ ...hrn, catalogId: hrn.resource })
  })

/** A catalog HRN as the APIs take it (trimmed, validated); an Either, so `yield*` it in Effect.gen. */
export const canonicalCatalog = (input: string): Either.Either<string, InvalidHrn> =>
  Either.map(parseCatalog(input), format)

export interface LayerHrn {
  readonly catalog: CatalogHrn
  readonly layerId: string
}

export const parseLayer = (input: string): Either.Either<LayerHrn, InvalidHrn> =>
  Either.flatMap(parse(input.trim()), (hrn) => {
    const cut = hrn.resource.lastIndexOf(":")
    if (cut < 0) return Either.left(new InvalidHrn({ input, reason: "a layer HRN ends in ':<layer-id>'" }))
    const layerId = hrn.resource.slice(cut + 1)
    if (!isLayerId(layerId)) {
      return Either.left(new InvalidHrn({ input, reason: `"${layerId}" is not a valid layer id` }))
    }
    return Either.map(
      parseCatalog(format({ ...hrn, resource: hrn.resource.slice(0, cut) })),
      (catalog) => ({ catalog, layerId })
    )
  })

export const isCatalogId = (id: string): boolean => CATALOG_ID.test(id)
export const isLayerId = (id: string): boolean => LAYER_ID.test(id)

export const catalogHrn = (partition: string, catalogId: string, account = ""): string =>
  format({ partition, service: "data", region: "", account, resource: catalogId })

export const layerHrn = (catalog: string, layerId: string): string => `${catalog}:${layerId}`

/** Drops a layer part, as the C++ SDK's ToCatalogHRNString does. */
export const toCatalogHrn = (input: string): string => {
  const parsed = parse(input)
  if (Either.isLeft(parsed)) return input
  const resource = parsed.right.resource.split(":")[0] ?? parsed.right.resource
  return format({ ...parsed.right, resource })
}
