import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import {
  type AdditionalField,
  isAddressableHandle,
  LayerVersions,
  type Partition,
  partitionVersion,
  Parts,
  type VersionInfo,
  VersionInfos,
  VersionResponse
} from "../domain/Partition.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { requestUrl } from "./ErrorMapping.ts"
import { redactUrl, ResponseDecodeError } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"
import { MalformedListing, PartitionsScanner } from "./PartitionsParser.ts"

/**
 * Metadata API v1. Partition listings are streamed and parsed element by element; a cut connection
 * resumes with `Range` from the end of the last complete partition, and volatile `next` pages are
 * followed.
 */

export type MetadataFailure = LookupFailure

interface ListingOptions {
  readonly additionalFields?: ReadonlyArray<AdditionalField>
  /** A part id from `partitionParts` / `changesParts`. */
  readonly part?: string
  /** `default | extension | super` for composite layers. */
  readonly context?: string
  readonly billingTag?: string
}

export interface PartitionsOptions extends ListingOptions {
  /** Catalog version; required for versioned layers, omitted for volatile ones. */
  readonly version?: number
}

export interface ChangesOptions extends ListingOptions {
  /** Exclusive. */
  readonly startVersion?: number
  /** Inclusive. */
  readonly endVersion?: number
  /** Volatile layers: changes since this time (ms epoch, inclusive). */
  readonly sinceTime?: number
}

export interface PartsOptions {
  readonly numRequestedParts: number
  readonly version?: number
  readonly startVersion?: number
  readonly endVersion?: number
  readonly billingTag?: string
}

export interface MetadataApiShape {
  readonly partitions: (
    hrn: string,
    layer: string,
    options?: PartitionsOptions
  ) => Stream.Stream<Partition, MetadataFailure>
  readonly changes: (hrn: string, layer: string, options: ChangesOptions) => Stream.Stream<Partition, MetadataFailure>
  readonly partitionParts: (
    hrn: string,
    layer: string,
    options: PartsOptions
  ) => Effect.Effect<ReadonlyArray<string>, MetadataFailure>
  readonly changesParts: (
    hrn: string,
    layer: string,
    options: PartsOptions
  ) => Effect.Effect<ReadonlyArray<string>, MetadataFailure>
  /** Versions in (startVersion, endVersion], fetched 1000 at a time. */
  readonly versions: (
    hrn: string,
    range: { readonly startVersion: number; readonly endVersion: number }
  ) => Stream.Stream<VersionInfo, MetadataFailure>
  readonly latestVersion: (hrn: string, startVersion?: number) => Effect.Effect<number, MetadataFailure>
  readonly minimumVersion: (hrn: string) => Effect.Effect<number, MetadataFailure>
  /** Raises the minimum version; the service deletes every earlier version. */
  readonly setMinimumVersion: (hrn: string, version: number) => Effect.Effect<void, MetadataFailure>
  readonly layerVersions: (hrn: string, version: number) => Effect.Effect<LayerVersions, MetadataFailure>
}

/** The versions endpoint answers at most this many per call. */
export const VERSIONS_PAGE = 1000

export class MetadataApi extends Context.Tag("catalog-export/client/MetadataApi")<MetadataApi, MetadataApiShape>() {
  static readonly layer: Layer.Layer<MetadataApi, never, ApiClient | Lookup> = Layer.effect(
    MetadataApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const base = (hrn: string) => lookup.baseUrl({ api: "metadata", version: "v1", hrn })

      /** One listing document (and the pages its `next` links lead to). */
      const listing = (request: HttpClientRequest.HttpClientRequest): Stream.Stream<Partition, MetadataFailure> =>
        Stream.suspend(() => {
          const scanner = new PartitionsScanner()
          const malformed = (reason: string) =>
            new ResponseDecodeError({ method: "GET", url: redactUrl(requestUrl(request)), status: 200, reason })
          const parse = Stream.mapConcatEffect((bytes: Uint8Array) =>
            Effect.try({
              try: () => scanner.feed(bytes).map(toPartition),
              catch: (e) =>
                malformed(e instanceof MalformedListing || e instanceof InvalidPartition ? e.message : String(e))
            })
          )
          // Progress is a partition parsed: a listing cut again and again inside one element is given up on.
          return api.resumable(request, {
            resumeAt: () => scanner.rewind(),
            isComplete: () => scanner.done,
            decode: parse
          }).pipe(
            Stream.concat(
              Stream.suspend(() => {
                const next = scanner.next
                return next === undefined ? Stream.empty : listing(nextPage(request, next))
              })
            )
          )
        })

      const listingParams = (options: ListingOptions, version: number | undefined): Record<string, string> => {
        const params: Record<string, string> = {}
        if (version !== undefined) params.version = String(version)
        if (options.part !== undefined) params.part = options.part
        if (options.additionalFields !== undefined && options.additionalFields.length > 0) {
          params.additionalFields = options.additionalFields.join(",")
        }
        if (options.context !== undefined) params.context = options.context
        if (options.billingTag !== undefined) params.billingTag = options.billingTag
        return params
      }

      const layerRequest = (hrn: string, layer: string, path: string, params: Record<string, string>) =>
        Effect.map(base(hrn), (root) =>
          HttpClientRequest.get(joinUrl(root, `/layers/${segment(layer)}${path}`)).pipe(
            HttpClientRequest.acceptJson,
            HttpClientRequest.setUrlParams(params)
          ))

      const partitions = (hrn: string, layer: string, options: PartitionsOptions = {}) =>
        Stream.unwrap(
          Effect.map(layerRequest(hrn, layer, "/partitions", listingParams(options, options.version)), listing)
        )

      const changes = (hrn: string, layer: string, options: ChangesOptions) => {
        const params = listingParams(options, undefined)
        if (options.startVersion !== undefined) params.startVersion = String(options.startVersion)
        if (options.endVersion !== undefined) params.endVersion = String(options.endVersion)
        if (options.sinceTime !== undefined) params.sinceTime = String(options.sinceTime)
        return Stream.unwrap(Effect.map(layerRequest(hrn, layer, "/changes", params), listing))
      }

      const partsParams = (options: PartsOptions) => {
        const params: Record<string, string> = { numRequestedParts: String(options.numRequestedParts) }
        if (options.version !== undefined) params.version = String(options.version)
        if (options.startVersion !== undefined) params.startVersion = String(options.startVersion)
        if (options.endVersion !== undefined) params.endVersion = String(options.endVersion)
        if (options.billingTag !== undefined) params.billingTag = options.billingTag
        return params
      }

      const partitionParts = Effect.fn("MetadataApi.partitionParts")(
        function*(hrn: string, layer: string, options: PartsOptions) {
          const request = yield* layerRequest(hrn, layer, "/partitions/parts", partsParams(options))
          return (yield* api.json(request, Parts)).parts
        }
      )

      const changesParts = Effect.fn("MetadataApi.changesParts")(
        function*(hrn: string, layer: string, options: PartsOptions) {
          const request = yield* layerRequest(hrn, layer, "/changes/parts", partsParams(options))
          return (yield* api.json(request, Parts)).parts
        }
      )

      const catalogGet = <A, I>(
        hrn: string,
        path: string,
        params: Record<string, string>,
        schema: Schema.Schema<A, I>
      ) =>
        Effect.flatMap(
          base(hrn),
          (root) =>
            api.json(HttpClientRequest.get(joinUrl(root, path)).pipe(HttpClientRequest.setUrlParams(params)), schema)
        )

      const versions = (hrn: string, range: { readonly startVersion: number; readonly endVersion: number }) =>
        range.startVersion >= range.endVersion
          ? Stream.empty
          : Stream.paginateEffect(range.startVersion, (start) => {
            const end = Math.min(start + VERSIONS_PAGE, range.endVersion)
            const params = { startVersion: String(start), endVersion: String(end) }
            return Effect.map(
              catalogGet(hrn, "/versions", params, VersionInfos),
              (page) => [page.versions, end < range.endVersion ? Option.some(end) : Option.none()] as const
            )
          }).pipe(Stream.flattenIterables)

      const latestVersion = Effect.fn("MetadataApi.latestVersion")(function*(hrn: string, startVersion = -1) {
        return (yield* catalogGet(hrn, "/versions/latest", { startVersion: String(startVersion) }, VersionResponse))
          .version
      })

      const minimumVersion = Effect.fn("MetadataApi.minimumVersion")(function*(hrn: string) {
        return (yield* catalogGet(hrn, "/versions/minimum", {}, VersionResponse)).version
      })

      const setMinimumVersion = Effect.fn("MetadataApi.setMinimumVersion")(function*(hrn: string, version: number) {
        const root = yield* base(hrn)
        yield* api.discard(
          HttpClientRequest.post(joinUrl(root, "/versions/minimum")).pipe(HttpClientRequest.bodyUnsafeJson({ version }))
        )
      })

      const layerVersions = Effect.fn("MetadataApi.layerVersions")(function*(hrn: string, version: number) {
        return yield* catalogGet(hrn, "/layerVersions", { version: String(version) }, LayerVersions)
      })

      return MetadataApi.of({
        partitions,
        changes,
        partitionParts,
        changesParts,
        versions,
        latestVersion,
        minimumVersion,
        setMinimumVersion,
        layerVersions
      })
    })
  )
}

/**
 * The request for a `next` link. Absolute URLs are used as given; a path that already starts with
 * the listing's path prefix is taken from the origin; anything else is resolved against the base
 * URL the listing came from (like every other API path).
 */
export const nextPage = (
  previous: HttpClientRequest.HttpClientRequest,
  next: string
): HttpClientRequest.HttpClientRequest => {
  const current = new URL(requestUrl(previous))
  let target: string
  if (/^https?:\/\//i.test(next)) target = next
  else if (next.startsWith("?")) target = `${current.origin}${current.pathname}${next}`
  else if (next.startsWith("/")) {
    const layersAt = current.pathname.indexOf("/layers/")
    const basePath = layersAt >= 0 ? current.pathname.slice(0, layersAt) : ""
    target = next.startsWith(`${basePath}/`) && basePath !== ""
      ? `${current.origin}${next}`
      : `${current.origin}${basePath}${next}`
  } else target = new URL(next, current).toString()
  return HttpClientRequest.get(target).pipe(HttpClientRequest.acceptJson)
}

class InvalidPartition extends Error {}

/**
 * Keeps the known fields of one listed partition; unknown fields are dropped. The rules are the
 * Partition schema's (domain/Partition.ts), applied without a Schema per partition: a known optional
 * field that is null is absent, one of another type is refused.
 */
export const toPartition = (value: unknown): Partition => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidPartition("a partition is not a JSON object")
  }
  const v = value as Record<string, unknown>
  if (typeof v.partition !== "string") throw new InvalidPartition("a partition has no \"partition\" id")
  const version = partitionVersion(v.version)
  if (version === undefined) throw new InvalidPartition(`partition ${v.partition} has no integer "version"`)
  if (typeof v.dataHandle !== "string") throw new InvalidPartition(`partition ${v.partition} has no "dataHandle"`)
  if (!isAddressableHandle(v.dataHandle)) {
    throw new InvalidPartition(
      `partition ${v.partition} has the data handle "${v.dataHandle}", which no blob URL can address`
    )
  }
  const p: { -readonly [K in keyof Partition]: Partition[K] } = {
    partition: v.partition,
    version,
    dataHandle: v.dataHandle
  }
  if (typeof v.layer === "string") p.layer = v.layer
  else if (v.layer != null) throw wrongType(v.partition, "layer", "a string")
  if (typeof v.dataSize === "number") p.dataSize = v.dataSize
  else if (v.dataSize != null) throw wrongType(v.partition, "dataSize", "a number")
  if (typeof v.checksum === "string") p.checksum = v.checksum
  else if (v.checksum != null) throw wrongType(v.partition, "checksum", "a string")
  if (typeof v.compressedDataSize === "number") p.compressedDataSize = v.compressedDataSize
  else if (v.compressedDataSize != null) throw wrongType(v.partition, "compressedDataSize", "a number")
  if (typeof v.crc === "string") p.crc = v.crc
  else if (v.crc != null) throw wrongType(v.partition, "crc", "a string")
  return p
}

const wrongType = (partition: string, field: string, type: string) =>
  new InvalidPartition(`partition ${partition} has a "${field}" that is not ${type}`)
