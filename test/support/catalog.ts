/**
 * The inner ring of the tests: an in-memory catalog and the client's test layers over it
 * (`ConfigApiTest`, `MetadataApiTest`, `BlobApiTest`), so that the export's stages run in this
 * process, fast, with only the service boundary replaced. The outer ring (the local service over
 * real HTTP, the CLI) stays where behaviour crosses a boundary.
 *
 * The catalog holds layer configs, catalog versions, the partitions each publication changed, and
 * the blobs by layer and data handle; switches make it fail as the stages must handle (listings
 * that break off, blobs answered with an error status, a cut body or other bytes); logs record what
 * was asked of it. The blob loop of an export runs on `BlobFetcher` (plain undici, no Effect per
 * blob): `BlobApiTest.fetcher` gives the real BlobFetcher a dispatcher that answers from memory,
 * the same seam the client's undici agent fills.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as crypto from "node:crypto"
import { gunzipSync, gzipSync } from "node:zlib"
import { Dispatcher } from "undici"
import { ArtifactApi, SchemaNotFound } from "../../src/client/ArtifactApi.ts"
import { BlobApi, type BlobShape, type ByteRange, VolatileBlobApi } from "../../src/client/BlobApi.ts"
import { BlobFetcher } from "../../src/client/BlobFetcher.ts"
import { ConfigApi } from "../../src/client/ConfigApi.ts"
import { ApiError, CatalogNotFound } from "../../src/client/Errors.ts"
import {
  type ChangesOptions,
  MetadataApi,
  type MetadataFailure,
  type PartitionsOptions
} from "../../src/client/MetadataApi.ts"
import { outageLimit, recordRetry, retryLimits, RetryTally } from "../../src/client/Retry.ts"
import type { Catalog, Layer as CatalogLayer } from "../../src/domain/Catalog.ts"
import type { Partition } from "../../src/domain/Partition.ts"

export type LayerSpec = Pick<CatalogLayer, "id" | "layerType"> & Partial<CatalogLayer>

/** A partition as a publication sets it: its data (as readers see it), or none (deleted). */
export interface PartitionInput {
  readonly partition: string
  /** Absent: the partition is deleted. */
  readonly data?: string | Uint8Array
  /** Default: a new handle per partition and version. An empty data blob is still a blob. */
  readonly dataHandle?: string
}

/** What the blob API answers to one request before it serves the blob: an error status, another content, or a body cut short. */
export type BlobFault = number | "corrupt" | "cut"

export interface ListingFault {
  readonly after: number
  readonly error: MetadataFailure
  readonly when?: (request: ListingRequest) => boolean
  readonly wait?: Effect.Effect<void>
}

export interface ListingRequest {
  readonly layer: string
  readonly kind: "partitions" | "changes"
  readonly options: PartitionsOptions & ChangesOptions
}

const HASHES: Record<string, string> = { "MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256" }

/** The retry policy of the blob loop in tests: the production rules with waits of milliseconds. */
export const TEST_RETRY_LIMITS = retryLimits({
  maxRetries: 4,
  maxElapsed: "10 seconds",
  baseDelay: "1 millis",
  maxDelay: "5 millis"
})

const BLOB_ORIGIN = "http://blob.test"
const BLOB_PATH = /^\/(blob|volatile-blob)\/v1\/catalogs\/([^/]+)\/layers\/([^/]+)\/data\/([^/]+)$/

/** An error answer's body, as the service writes it. */
const errorBody = (status: number, title: string, detail?: string) =>
  Buffer.from(JSON.stringify({ title, status, ...(detail === undefined ? {} : { detail }) }))

const notFound = (url: string, detail: string) =>
  new ApiError({ status: 404, method: "GET", url, title: "Not Found", detail })
const badRequest = (url: string, detail: string) =>
  new ApiError({ status: 400, method: "GET", url, title: "Bad Request", detail })

export class InMemoryCatalog {
  readonly hrn: string
  readonly config: Catalog
  latest = -1
  minimum = 0
  /** Per versioned layer, every partition as each publication set it, in version order (deletions with an empty data handle). */
  private readonly published = new Map<string, Array<Partition>>()
  /** Per volatile layer, its partitions now. */
  private readonly volatile = new Map<string, Map<string, Partition>>()
  /** Bytes as stored (gzip layers: compressed), by `<layer>/<data handle>`. */
  private readonly blobs = new Map<string, Uint8Array>()
  private readonly timestamps: Array<number> = []

  /** Per data handle, the answers its next requests get before the blob itself (consumed in order). */
  readonly blobFaults = new Map<string, Array<BlobFault>>()
  /**
   * The listings `when` picks (default: all) fail with `error` once they have sent `after` partitions
   * (and `wait` has completed: a test's way to let other work finish first).
   */
  listingFault: ListingFault | undefined = undefined
  /** Partitions per chunk of a listing stream (the real client emits what each network read parsed). */
  listingChunk = 64

  /** Every call of the config and metadata test layers (`config.getCatalog`, `metadata.partitions`, ...), in order. */
  readonly requests: Array<string> = []
  /** Every listing asked for, with its options, in order. */
  readonly listings: Array<ListingRequest> = []
  /** The data handle of every blob request, retries included, in order. */
  readonly blobRequests: Array<string> = []

  readonly dispatcher: Dispatcher

  constructor(options: { readonly hrn: string; readonly layers: ReadonlyArray<LayerSpec> }) {
    this.hrn = options.hrn
    this.config = {
      id: options.hrn.slice(options.hrn.lastIndexOf(":") + 1),
      hrn: options.hrn,
      layers: options.layers.map((l) => ({ contentType: "application/octet-stream", ...l }))
    }
    for (const l of options.layers) {
      if (l.layerType === "versioned") this.published.set(l.id, [])
      if (l.layerType === "volatile") this.volatile.set(l.id, new Map())
    }
    this.dispatcher = new MemoryDispatcher((path) => this.answerBlob(path))
  }

  layer(id: string): CatalogLayer {
    const layer = this.config.layers.find((l) => l.id === id)
    if (layer === undefined) throw new Error(`the test catalog has no layer ${id}`)
    return layer
  }

  /** A new catalog version in which the versioned layers of `changes` change as given; returns the version. */
  publish(changes: Readonly<Record<string, ReadonlyArray<PartitionInput>>>): number {
    const version = ++this.latest
    this.timestamps.push(1_700_000_000_000 + version * 60_000)
    for (const [id, partitions] of Object.entries(changes)) {
      const records = this.published.get(id)
      if (records === undefined) throw new Error(`${id} is not a versioned layer of the test catalog`)
      for (const p of partitions) records.push(this.store(id, p, version))
    }
    return version
  }

  /** Sets partitions of a volatile layer (an input without data removes the partition). */
  putVolatile(id: string, partitions: ReadonlyArray<PartitionInput>): void {
    const current = this.volatile.get(id)
    if (current === undefined) throw new Error(`${id} is not a volatile layer of the test catalog`)
    for (const p of partitions) {
      if (p.data === undefined) current.delete(p.partition)
      else current.set(p.partition, this.store(id, p, -1))
    }
  }

  private store(id: string, input: PartitionInput, version: number): Partition {
    if (input.data === undefined) return { partition: input.partition, version, dataHandle: "" }
    const data = typeof input.data === "string" ? new TextEncoder().encode(input.data) : input.data
    const layer = this.layer(id)
    const dataHandle = input.dataHandle ?? `${input.partition}.v${version}.${crypto.randomBytes(3).toString("hex")}`
    this.blobs.set(`${id}/${dataHandle}`, layer.contentEncoding === "gzip" ? gzipSync(data) : data)
    const algorithm = HASHES[layer.digest ?? "SHA-1"]!
    return {
      partition: input.partition,
      version,
      dataHandle,
      dataSize: data.byteLength,
      checksum: crypto.createHash(algorithm).update(data).digest("hex")
    }
  }

  /** A layer's partitions at a catalog version (a volatile layer's now), sorted by id, with every field. */
  partitionsAt(id: string, version?: number): Array<Partition> {
    const current = this.volatile.get(id)
    if (current !== undefined) return [...current.values()].sort(byId)
    const at = new Map<string, Partition>()
    for (const p of this.records(id)) if (p.version <= version!) at.set(p.partition, p)
    return [...at.values()].filter((p) => p.dataHandle !== "").sort(byId)
  }

  /** What changed in (start, end]: each changed partition as it is at `end`, deleted ones with an empty data handle. */
  changesBetween(id: string, start: number, end: number): Array<Partition> {
    const changed = new Map<string, Partition>()
    for (const p of this.records(id)) if (p.version > start && p.version <= end) changed.set(p.partition, p)
    return [...changed.values()].sort(byId)
  }

  /** A blob as stored (gzip layers: compressed); undefined when there is none. */
  stored(id: string, dataHandle: string): Uint8Array | undefined {
    return this.blobs.get(`${id}/${dataHandle}`)
  }

  /** A blob as readers see it (unpacked); undefined when there is none. */
  blob(id: string, dataHandle: string): Uint8Array | undefined {
    const stored = this.blobs.get(`${id}/${dataHandle}`)
    if (stored === undefined || this.layer(id).contentEncoding !== "gzip") return stored
    return new Uint8Array(gunzipSync(stored))
  }

  /** Deletes a blob, as the service does when the version that owned a reused data handle is deleted. */
  deleteBlob(id: string, dataHandle: string): void {
    this.blobs.delete(`${id}/${dataHandle}`)
  }

  /** The newest version up to `version` in which the layer changed; undefined before its first publication. */
  lastChange(id: string, version: number): number | undefined {
    let last: number | undefined
    for (const p of this.records(id)) if (p.version <= version) last = p.version
    return last
  }

  private records(id: string): ReadonlyArray<Partition> {
    const records = this.published.get(id)
    if (records === undefined) throw new Error(`${id} is not a versioned layer of the test catalog`)
    return records
  }

  // --- what the test layers serve ----------------------------------------------------------------

  checkCatalog(hrn: string, url: string): Effect.Effect<never, ApiError> | undefined {
    return hrn === this.hrn ? undefined : Effect.fail(notFound(url, `Catalog ${hrn} not found`))
  }

  /** A listing, as the metadata API answers it: the fields asked for, the part asked for, in chunks. */
  listing(hrn: string, id: string, kind: ListingRequest["kind"], options: PartitionsOptions & ChangesOptions) {
    const url = `memory://metadata/${hrn}/layers/${id}/${kind}`
    return Stream.suspend(() => {
      const request: ListingRequest = { layer: id, kind, options }
      this.requests.push(`metadata.${kind}`)
      this.listings.push(request)
      const problem = this.checkCatalog(hrn, url) ?? this.checkListing(id, kind, options, url)
      if (problem !== undefined) return Stream.fromEffect(problem)
      const all = kind === "changes"
        ? this.changesBetween(id, options.startVersion ?? -1, options.endVersion ?? this.latest)
        : this.partitionsAt(id, options.version)
      const range = options.part === undefined ? undefined : JSON.parse(options.part) as PartRange
      const fields = new Set(options.additionalFields ?? [])
      const listed = all
        .filter((p) =>
          range === undefined || (p.partition > range.after && (range.upTo === null || p.partition <= range.upTo))
        )
        .map((p): Partition => ({
          partition: p.partition,
          version: p.version,
          dataHandle: p.dataHandle,
          ...(fields.has("dataSize") && p.dataSize !== undefined ? { dataSize: p.dataSize } : {}),
          ...(fields.has("checksum") && p.checksum !== undefined ? { checksum: p.checksum } : {})
        }))
      const fault = this.listingFault?.when?.(request) === false ? undefined : this.listingFault
      const stream = Stream.fromIterable(fault === undefined ? listed : listed.slice(0, fault.after)).pipe(
        Stream.rechunk(this.listingChunk)
      )
      if (fault === undefined) return stream
      return Stream.concat(
        stream,
        Stream.fromEffect(Effect.zipRight(fault.wait ?? Effect.void, Effect.fail(fault.error)))
      )
    })
  }

  private checkListing(
    id: string,
    kind: ListingRequest["kind"],
    options: PartitionsOptions & ChangesOptions,
    url: string
  ): Effect.Effect<never, ApiError> | undefined {
    const layer = this.config.layers.find((l) => l.id === id)
    const problem = (): ApiError | undefined => {
      if (layer === undefined) return notFound(url, `Layer ${id} not found`)
      if (layer.layerType === "volatile") return undefined
      if (layer.layerType !== "versioned") return badRequest(url, `Layer '${id}' is a ${layer.layerType} layer`)
      if (kind === "partitions" && options.version === undefined) return badRequest(url, "version is required")
      if (kind === "changes" && (options.startVersion ?? -1) < this.minimum - 1) {
        return badRequest(url, `Invalid version: minimum version for this catalog is ${this.minimum}`)
      }
      const version = kind === "partitions" ? options.version! : options.endVersion ?? this.latest
      return version < this.minimum || version > this.latest ? badRequest(url, `Invalid version ${version}`) : undefined
    }
    const error = problem()
    return error === undefined ? undefined : Effect.fail(error)
  }

  /** Part ids as the service makes them: ranges of partition ids of about equal size, opaque to the client. */
  parts(
    hrn: string,
    id: string,
    kind: ListingRequest["kind"],
    requested: number
  ): Effect.Effect<ReadonlyArray<string>, ApiError> {
    this.requests.push(kind === "partitions" ? "metadata.partitionParts" : "metadata.changesParts")
    const url = `memory://metadata/${hrn}/layers/${id}/${kind}/parts`
    const problem = this.checkCatalog(hrn, url)
    if (problem !== undefined) return problem
    const ids = (this.volatile.has(id) ? this.partitionsAt(id) : this.partitionsAt(id, this.latest)).map((p) =>
      p.partition
    )
    const count = Math.max(1, Math.min(requested, ids.length))
    const bounds = [""]
    for (let i = 1; i < count; i++) bounds.push(ids[Math.floor((i * ids.length) / count) - 1]!)
    return Effect.succeed(
      bounds.map((after, i) => JSON.stringify({ after, upTo: bounds[i + 1] ?? null } satisfies PartRange))
    )
  }

  versionTimestamp(version: number): number {
    return this.timestamps[version]!
  }

  /** The blob API's answer to a GET of `path`. */
  private answerBlob(path: string): BlobAnswer {
    const m = BLOB_PATH.exec(path)
    if (m === null) return { status: 404, body: errorBody(404, "Not Found") }
    const [, , hrn, layer, handle] = m.map((s) => decodeURIComponent(s)) as [string, string, string, string, string]
    this.blobRequests.push(handle)
    const fault = this.blobFaults.get(handle)?.shift()
    const stored = hrn === this.hrn ? this.blobs.get(`${layer}/${handle}`) : undefined
    if (typeof fault === "number") {
      return {
        status: fault,
        body: errorBody(fault, `injected ${fault}`),
        ...(fault === 429 ? { headers: { "retry-after": "0" } } : {})
      }
    }
    if (stored === undefined) {
      return { status: 404, body: errorBody(404, "Not Found", `No blob ${handle}`) }
    }
    if (fault === "cut") return { status: 200, body: stored, cut: true }
    if (fault === "corrupt") {
      const other = Uint8Array.from(this.blob(layer, handle)!)
      if (other.byteLength === 0) return { status: 200, body: new Uint8Array([0]) }
      other[0] = other[0]! ^ 0xff
      return { status: 200, body: this.layer(layer).contentEncoding === "gzip" ? gzipSync(other) : other }
    }
    return { status: stored.byteLength === 0 ? 204 : 200, body: stored }
  }
}

interface PartRange {
  readonly after: string
  readonly upTo: string | null
}

const byId = (a: Partition, b: Partition) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0)

interface BlobAnswer {
  readonly status: number
  readonly body: Uint8Array
  readonly headers?: Record<string, string>
  /** The connection drops after half the body. */
  readonly cut?: boolean
}

/**
 * An undici dispatcher that answers from memory, on the next turn of the event loop as a socket
 * would, through the same handler hooks undici calls (onConnect, onHeaders, onData, onComplete,
 * onError).
 */
class MemoryDispatcher extends Dispatcher {
  constructor(private readonly answer: (path: string) => BlobAnswer) {
    super()
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    let aborted = false
    handler.onConnect?.(() => {
      aborted = true
    })
    setImmediate(() => {
      if (aborted) return
      const answer = this.answer(options.path)
      const body = Buffer.from(answer.body)
      const headers = Object.entries(answer.headers ?? {}).flatMap(([k, v]) => [Buffer.from(k), Buffer.from(v)])
      handler.onHeaders?.(answer.status, headers, () => {}, "")
      if (answer.cut === true) {
        handler.onData?.(body.subarray(0, body.byteLength >> 1))
        handler.onError?.(Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }))
        return
      }
      if (answer.status !== 204 && body.byteLength > 0) handler.onData?.(body)
      handler.onComplete?.(null)
    })
    return true
  }
}

/** The catalog the test layers serve, for tests to set up, switch faults on and read the logs of. */
export class TestCatalog extends Context.Tag("test/TestCatalog")<TestCatalog, InMemoryCatalog>() {}

export const ConfigApiTest: Layer.Layer<ConfigApi, never, TestCatalog> = Layer.effect(
  ConfigApi,
  Effect.map(TestCatalog, (catalog) => {
    const get = (hrn: string) =>
      Effect.suspend(() => {
        catalog.requests.push("config.getCatalog")
        return hrn === catalog.hrn
          ? Effect.succeed(catalog.config)
          : Effect.fail(new CatalogNotFound({ hrn, status: 403, detail: "not found or not accessible" }))
      })
    const unsupported = (what: string) => () => Effect.die(new Error(`ConfigApiTest does not ${what}`))
    return ConfigApi.of({
      listCatalogs: () =>
        Effect.succeed([{
          href: `memory://config/catalogs/${catalog.hrn}`,
          hrn: catalog.hrn,
          title: catalog.config.id
        }]),
      listCatalogsVerbose: () => Effect.succeed([catalog.config]),
      getCatalog: get,
      getCatalogConfiguration: (hrn) => Effect.map(get(hrn), (c) => ({ ...c })),
      updateCatalog: unsupported("update catalogs"),
      disableAutomaticVersionDeletion: unsupported("delete versions"),
      awaitStatus: unsupported("poll status links")
    })
  })
)

export const MetadataApiTest: Layer.Layer<MetadataApi, never, TestCatalog> = Layer.effect(
  MetadataApi,
  Effect.map(TestCatalog, (catalog) => {
    /** A catalog-level call: logged as `metadata.<method>`, refused for another catalog. */
    const call = <A>(hrn: string, method: string, f: () => Effect.Effect<A, ApiError>) =>
      Effect.suspend(() => {
        catalog.requests.push(`metadata.${method}`)
        return catalog.checkCatalog(hrn, `memory://metadata/${hrn}/${method}`) ?? f()
      })
    return MetadataApi.of({
      partitions: (hrn, layer, options = {}) => catalog.listing(hrn, layer, "partitions", options),
      changes: (hrn, layer, options) => catalog.listing(hrn, layer, "changes", options),
      partitionParts: (hrn, layer, options) =>
        Effect.suspend(() => catalog.parts(hrn, layer, "partitions", options.numRequestedParts)),
      changesParts: (hrn, layer, options) =>
        Effect.suspend(() => catalog.parts(hrn, layer, "changes", options.numRequestedParts)),
      versions: (hrn, range) =>
        Stream.unwrap(call(hrn, "versions", () =>
          Effect.succeed(
            Stream.range(Math.max(range.startVersion + 1, catalog.minimum), Math.min(range.endVersion, catalog.latest))
              .pipe(
                Stream.map((version) => ({ version, timestamp: catalog.versionTimestamp(version), dependencies: [] }))
              )
          ))),
      latestVersion: (hrn) =>
        call(hrn, "latestVersion", () =>
          catalog.latest < 0
            ? Effect.fail(notFound(`memory://metadata/${hrn}/versions/latest`, "The catalog has no versions"))
            : Effect.succeed(catalog.latest)),
      minimumVersion: (hrn) => call(hrn, "minimumVersion", () => Effect.succeed(catalog.minimum)),
      setMinimumVersion: (hrn, version) =>
        call(hrn, "setMinimumVersion", () =>
          Effect.sync(() => {
            catalog.minimum = Math.max(catalog.minimum, Math.min(version, catalog.latest))
          })),
      layerVersions: (hrn, version) =>
        call(hrn, "layerVersions", () =>
          Effect.succeed({
            version,
            layerVersions: catalog.config.layers.filter((l) => l.layerType === "versioned").flatMap((l) => {
              const last = catalog.lastChange(l.id, version)
              return last === undefined
                ? []
                : [{ layer: l.id, version: last, timestamp: catalog.versionTimestamp(last) }]
            })
          }))
    })
  })
)

const blobApi = (catalog: InMemoryCatalog, api: "blob" | "volatile-blob") => {
  const url = (hrn: string, layer: string, handle: string) =>
    `${BLOB_ORIGIN}/${api}/v1/catalogs/${hrn}/layers/${encodeURIComponent(layer)}/data/${encodeURIComponent(handle)}`
  /** The blob as stored (no Content-Encoding decoding, as the real client). */
  const get = (hrn: string, layer: string, handle: string, range?: ByteRange) =>
    Effect.suspend(() => {
      const stored = hrn === catalog.hrn ? catalog.stored(layer, handle) : undefined
      if (stored === undefined) return Effect.fail(notFound(url(hrn, layer, handle), `No blob ${handle}`))
      return Effect.succeed(
        range === undefined ? stored : stored.slice(range.start, range.end === undefined ? undefined : range.end + 1)
      )
    })
  const shape: BlobShape = {
    fetcher: (hrn, layer, options) =>
      Effect.gen(function*() {
        const tally = yield* RetryTally
        const outages = yield* FiberRef.get(outageLimit)
        const token = () => Promise.resolve("test-token")
        const fetcher = yield* Effect.acquireRelease(
          Effect.sync(() =>
            new BlobFetcher({
              ...options,
              dispatcher: catalog.dispatcher,
              limits: TEST_RETRY_LIMITS,
              outageLimit: outages,
              maxRedirects: 5,
              userAgent: "catalog-export tests",
              token,
              refreshToken: token,
              onRetry: (step) => recordRetry(tally, step)
            })
          ),
          (fetcher) => Effect.sync(() => fetcher.close())
        )
        const refresh = Effect.sync(() => {
          fetcher.setTarget(`${BLOB_ORIGIN}/${api}/v1/catalogs/${hrn}`, layer)
          fetcher.setToken("test-token")
        })
        yield* refresh
        return { fetcher, refresh }
      }),
    get,
    getStream: (hrn, layer, handle, range) => Stream.fromEffect(get(hrn, layer, handle, range)),
    head: (hrn, layer, handle) =>
      Effect.map(
        Effect.option(get(hrn, layer, handle)),
        Option.match({
          onNone: () => ({
            exists: false,
            contentLength: undefined,
            contentType: undefined,
            contentEncoding: undefined,
            etag: undefined
          }),
          onSome: (bytes) => ({
            exists: true,
            contentLength: bytes.byteLength,
            contentType: catalog.layer(layer).contentType,
            contentEncoding: catalog.layer(layer).contentEncoding,
            etag: undefined
          })
        })
      ),
    put: () => Effect.die(new Error("BlobApiTest does not upload: publish into the InMemoryCatalog"))
  }
  return shape
}

/** The blob API and the volatile blob API over the catalog's blobs. */
export const BlobApiTest: Layer.Layer<BlobApi | VolatileBlobApi, never, TestCatalog> = Layer.effect(
  BlobApi,
  Effect.map(TestCatalog, (catalog) => BlobApi.of(blobApi(catalog, "blob")))
).pipe(
  Layer.merge(Layer.effect(
    VolatileBlobApi,
    Effect.map(TestCatalog, (catalog) =>
      VolatileBlobApi.of({
        ...blobApi(catalog, "volatile-blob"),
        delete: (_hrn, layer, handle) => Effect.sync(() => catalog.deleteBlob(layer, handle))
      }))
  ))
)

/** An artifact service that holds no schemas (an export asks it only when it decodes). */
export const ArtifactApiTest: Layer.Layer<ArtifactApi> = Layer.sync(ArtifactApi, () => {
  const noSchema = (hrn: string) => Effect.fail(new SchemaNotFound({ hrn, reason: "the test catalog has no schemas" }))
  const noFile = (what: string) =>
    Effect.fail(new ApiError({ status: 404, method: "GET", url: `memory://artifact/${what}`, title: "Not Found" }))
  const unsupported = () => Effect.die(new Error("ArtifactApiTest does not publish schemas"))
  return ArtifactApi.of({
    getSchema: noSchema,
    listSchemas: () => Effect.succeed([]),
    getVariant: (variant) => noFile(variant.url),
    getSchemaBundle: noSchema,
    getArtifactFile: (hrn, file) => noFile(`${hrn}/${file}`),
    putArtifactFile: unsupported,
    registerArtifact: unsupported,
    createSchema: unsupported
  })
})

/** ConfigApi, MetadataApi and the blob APIs over `catalog`, which tests reach as TestCatalog (and an artifact API without schemas). */
export const layerTest = (catalog: () => InMemoryCatalog) =>
  Layer.mergeAll(ConfigApiTest, MetadataApiTest, BlobApiTest, ArtifactApiTest).pipe(
    Layer.provideMerge(Layer.sync(TestCatalog, catalog))
  )
