import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { SELECTABLE_REGIONS } from "../domain/Region.ts"
import { ServedRegion } from "./Access.ts"
import { AuthConfig, type AuthOptions, AuthState, tokenEndpoint } from "./Auth.ts"
import { BlobFiles } from "./BlobFiles.ts"
import * as Database from "./db/Database.ts"
import * as Repositories from "./db/Repositories.ts"
import * as FastPath from "./FastPath.ts"
import * as Faults from "./Faults.ts"
import { Reads } from "./Reads.ts"
import { regionInUrl, regionPrefix, regionUnavailable } from "./Regions.ts"
import { Replicas } from "./Replicas.ts"
import { payloadTooLarge, respond } from "./Reply.ts"
import * as ArtifactRoutes from "./routes/Artifact.ts"
import * as BlobRoutes from "./routes/Blob.ts"
import * as CatalogsRoutes from "./routes/Catalogs.ts"
import * as ConfigRoutes from "./routes/Config.ts"
import * as FeaturesRoutes from "./routes/Features.ts"
import * as IngestRoutes from "./routes/Ingest.ts"
import * as LookupRoutes from "./routes/Lookup.ts"
import * as MetadataRoutes from "./routes/Metadata.ts"
import * as MultipartRoutes from "./routes/Multipart.ts"
import * as PublishRoutes from "./routes/Publish.ts"
import * as QueryRoutes from "./routes/Query.ts"
import * as RegionsRoutes from "./routes/Regions.ts"
import * as StreamRoutes from "./routes/Stream.ts"
import * as SubscriptionsRoutes from "./routes/Subscriptions.ts"
import { noSeed, seed, type SeedOptions } from "./Seed.ts"
import { DEFAULT_UPLOAD_EXPIRY_MS, Uploads } from "./Uploads.ts"
import { Collector } from "./Versions.ts"

export interface ServiceOptions {
  readonly port: number
  readonly host: string
  /** Where SQLite and blob files live; a temporary directory (removed on shutdown) when absent. */
  readonly dataDir?: string | undefined
  readonly seed: SeedOptions | undefined
  readonly faults: Faults.FaultOptions
  readonly auth: Partial<AuthOptions>
  /** Largest request body accepted, in bytes: a blob in one PUT, a part of a multipart upload. */
  readonly maxBodyBytes: number
  /** How long a multipart upload is kept after its last request (Uploads.ts). */
  readonly uploadExpiryMs: number
  /** Regions down from the start (`serve --regions-down`); `catalog-export regions up` brings them back. */
  readonly regionsDown: ReadonlyArray<string>
  /** How long a volatile or stream write to one region of a multi-region catalog takes to reach the other. */
  readonly replicationDelayMs: number
}

export const defaultServiceOptions: ServiceOptions = {
  port: 31005,
  host: "127.0.0.1",
  seed: undefined,
  faults: Faults.noFaults,
  auth: {},
  maxBodyBytes: 64 * 1024 * 1024,
  uploadExpiryMs: DEFAULT_UPLOAD_EXPIRY_MS,
  regionsDown: [],
  replicationDelayMs: 1000
}

/**
 * The catalog-bound APIs; lookup with `region=<id>` hands out their base URLs under `/regions/<id>`
 * (and so does lookup without it for a multi-region catalog: its primary region's). Each copy knows
 * the region it serves; the unprefixed paths serve each catalog's primary region.
 */
const catalogRoutes = HttpRouter.concatAll(
  MetadataRoutes.routes,
  QueryRoutes.routes,
  BlobRoutes.routes,
  MultipartRoutes.routes,
  PublishRoutes.routes,
  StreamRoutes.routes,
  IngestRoutes.routes,
  FeaturesRoutes.routes
)

/** Every route the service serves (exported so tests can probe each one, e.g. for authentication). */
export const router = HttpRouter.concatAll(
  HttpRouter.empty.pipe(HttpRouter.post("/oauth2/token", tokenEndpoint)),
  LookupRoutes.routes,
  ConfigRoutes.routes,
  CatalogsRoutes.routes,
  SubscriptionsRoutes.routes,
  ArtifactRoutes.routes,
  RegionsRoutes.routes,
  HttpRouter.provideService(catalogRoutes, ServedRegion, { region: undefined }),
  ...SELECTABLE_REGIONS.map((region) =>
    HttpRouter.prefixAll(catalogRoutes, regionPrefix(region)).pipe(HttpRouter.provideService(ServedRegion, { region }))
  )
)

/**
 * find-my-way's default answers path parameters over 100 characters with "no route", but data handles
 * may have up to 600 characters (blob API v1.0.8); longer ones must reach the handle check (400).
 */
const ROUTER_CONFIG = { maxParamLength: FastPath.MAX_PARAM_LENGTH }

/** A blob's body in one request (routes/Blob.ts), which a multipart upload could have carried instead. */
const BLOB_BODY = /\/data\/[^/?]+(\?|$)/

const app = (maxBodyBytes: number) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const length = Number(request.headers["content-length"] ?? 0)
    if (length > maxBodyBytes) return yield* payloadTooLarge(maxBodyBytes, BLOB_BODY.test(request.url))
    // A region that is down answers nothing else (the lean path likewise, FastPath.ts).
    const region = regionInUrl(request.url)
    if (region !== undefined && (yield* Replicas).down.has(region)) return yield* regionUnavailable(region)
    return yield* HttpRouter.withRouterConfig(router, ROUTER_CONFIG)
  }).pipe(respond)

const dataDirectory = (dataDir: string | undefined) =>
  dataDir !== undefined
    ? Effect.sync(() => {
      fs.mkdirSync(dataDir, { recursive: true })
      return dataDir
    })
    : Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "catalog-service-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )

/**
 * The whole local service as a layer: storage, seed, routes, and the HTTP server listening. Each
 * request goes to the lean path (FastPath.ts) when it is a blob read or a listing it can serve as the
 * router would, and to the Effect app otherwise.
 */
export const layer = (options: ServiceOptions) =>
  Layer.unwrapScoped(
    Effect.map(dataDirectory(options.dataDir), (dataDir) => {
      const filename = path.join(dataDir, "catalog.db")
      const tables = Layer.mergeAll(
        Repositories.layer,
        BlobFiles.layer(dataDir),
        AuthConfig.layer(options.auth),
        AuthState.layer
      )
      const replicas = Replicas.layer({ regionsDown: options.regionsDown, delayMs: options.replicationDelayMs })
      const services = Layer.mergeAll(replicas, Collector.layer, Uploads.layer(dataDir, options.uploadExpiryMs))
      const storage = Layer.provideMerge(services, tables).pipe(Layer.provideMerge(Database.layer(filename)))
      const seeded = Layer.effectDiscard(seed(options.seed ?? noSeed))
      const faults = Faults.isActive(options.faults) ? Faults.injector(options.faults) : undefined
      const limited = app(options.maxBodyBytes).pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(options.maxBodyBytes))
      )
      const served = faults === undefined ? limited : Faults.middleware(faults)(limited)
      const server = createServer()
      const handled = Layer.scopedDiscard(
        Effect.gen(function*() {
          const lean = yield* FastPath.make(faults)
          const routed = yield* NodeHttpServer.makeHandler(served)
          const onRequest = (req: IncomingMessage, res: ServerResponse) => {
            if (!lean(req, res)) routed(req, res)
          }
          server.on("request", onRequest)
          yield* Effect.addFinalizer(() => Effect.sync(() => server.off("request", onRequest)))
        })
      )
      return handled.pipe(
        Layer.provide(seeded),
        Layer.provideMerge(Layer.provideMerge(Reads.layer(filename), storage)),
        Layer.provideMerge(Layer.merge(
          NodeHttpServer.layerServer(() => server, { port: options.port, host: options.host }),
          NodeHttpServer.layerContext
        ))
      )
    })
  )
