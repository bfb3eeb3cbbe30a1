import * as Layer from "effect/Layer"
import { AdminApi } from "./AdminApi.ts"
import { ApiClient } from "./ApiClient.ts"
import { ArtifactApi } from "./ArtifactApi.ts"
import { Auth } from "./Auth.ts"
import { BlobApi, VolatileBlobApi } from "./BlobApi.ts"
import { BlobUploads } from "./BlobUpload.ts"
import { ConfigApi } from "./ConfigApi.ts"
import { Credentials, type CredentialsShape } from "./Credentials.ts"
import type { CredentialsError } from "./Errors.ts"
import { Http } from "./Http.ts"
import { HttpOptions, type HttpOptionsShape, undiciLayer } from "./HttpOptions.ts"
import { Lookup } from "./Lookup.ts"
import { MetadataApi } from "./MetadataApi.ts"
import { PublishApi } from "./PublishApi.ts"
import { QueryApi } from "./QueryApi.ts"
import { RetryPolicy, type RetryPolicyShape } from "./Retry.ts"
import { StreamApi } from "./StreamApi.ts"
import { SubscriptionsApi } from "./SubscriptionsApi.ts"

/** Everything the Data API client needs, in one place. */
export interface DataClientOptions {
  /** e.g. https://api-lookup.data.api.platform.here.com/lookup/v1, or the local service's lookupUrl. */
  readonly lookupUrl: string
  /** Where the lookup URL came from ("came from --lookup-url", ...), for the errors that say it is wrong. */
  readonly lookupFrom?: string
  /** Lookup's `region` for catalog-bound APIs (a multi-region catalog's secondary region); default: the primary. */
  readonly region?: string
  /** credentials.properties; default $HERE_CREDENTIALS_FILE, then ~/.here/credentials.properties. */
  readonly credentialsPath?: string
  /** Credentials given directly (tests, embedding); wins over `credentialsPath`. */
  readonly credentials?: Omit<CredentialsShape, "source" | "userId" | "clientId" | "scope"> & Partial<CredentialsShape>
  /** Requests the caller runs at once; sizes the connection pool per origin. Default 16. */
  readonly concurrency?: number
  readonly retry?: Partial<RetryPolicyShape>
  readonly timeouts?: {
    readonly connect?: HttpOptionsShape["connectTimeout"]
    readonly firstByte?: HttpOptionsShape["firstByteTimeout"]
    readonly idle?: HttpOptionsShape["idleTimeout"]
  }
  readonly maxRedirects?: number
  readonly userAgent?: string
  /** Requested token lifetime in seconds. Default 3600. */
  readonly tokenExpiresIn?: number
}

export type DataClient =
  | ConfigApi
  | MetadataApi
  | QueryApi
  | BlobApi
  | VolatileBlobApi
  | BlobUploads
  | PublishApi
  | AdminApi
  | SubscriptionsApi
  | StreamApi
  | ArtifactApi
  | Lookup
  | ApiClient
  | Auth
  | Http
  | HttpOptions
  | RetryPolicy
  | Credentials

const httpOptions = (options: DataClientOptions): Partial<HttpOptionsShape> => {
  const out: { -readonly [K in keyof HttpOptionsShape]?: HttpOptionsShape[K] } = {}
  if (options.concurrency !== undefined) out.concurrency = options.concurrency
  if (options.timeouts?.connect !== undefined) out.connectTimeout = options.timeouts.connect
  if (options.timeouts?.firstByte !== undefined) out.firstByteTimeout = options.timeouts.firstByte
  if (options.timeouts?.idle !== undefined) out.idleTimeout = options.timeouts.idle
  if (options.maxRedirects !== undefined) out.maxRedirects = options.maxRedirects
  if (options.userAgent !== undefined) out.userAgent = options.userAgent
  return out
}

/**
 * The whole client as one layer. Build it once (a module constant or once per run) and provide it
 * at the top: layers are memoized by reference.
 */
export const layer = (options: DataClientOptions): Layer.Layer<DataClient, CredentialsError> => {
  const config = Layer.merge(HttpOptions.layer(httpOptions(options)), RetryPolicy.layer(options.retry))
  const http = Http.layer.pipe(Layer.provide(undiciLayer), Layer.provideMerge(config))
  const credentials = options.credentials !== undefined
    ? Credentials.layerValue(options.credentials)
    : Credentials.layer(options.credentialsPath)
  const auth = Auth.layer(options.tokenExpiresIn === undefined ? {} : { expiresIn: options.tokenExpiresIn }).pipe(
    Layer.provideMerge(Layer.merge(http, credentials))
  )
  const api = ApiClient.layer.pipe(Layer.provideMerge(auth))
  const lookup = Lookup.layer({
    lookupUrl: options.lookupUrl,
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.lookupFrom === undefined ? {} : { from: options.lookupFrom })
  }).pipe(Layer.provideMerge(api))
  const services = Layer.mergeAll(
    ConfigApi.layer,
    MetadataApi.layer,
    QueryApi.layer,
    BlobApi.layer,
    VolatileBlobApi.layer,
    PublishApi.layer,
    SubscriptionsApi.layer,
    StreamApi.layer,
    ArtifactApi.layer
  ).pipe(Layer.provideMerge(lookup))
  return Layer.merge(AdminApi.layer, BlobUploads.layer).pipe(Layer.provideMerge(services))
}
