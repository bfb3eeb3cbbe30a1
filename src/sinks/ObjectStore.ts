import type { S3Client } from "@aws-sdk/client-s3"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * Object-store destinations, in plain code (the encoder thread uses it too and loads no Effect): the
 * URLs, the S3 client and what its failures mean. Azure Blob Storage (`az://`, `abfss://`) has its
 * own client and failures in Azure.ts.
 *
 * `s3://bucket/prefix`: any S3-compatible store (AWS S3, MinIO, Ceph, Cloudflare R2). Credentials,
 * region and endpoint come from the AWS SDK's standard sources: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE with ~/.aws/credentials and ~/.aws/config,
 * web identity (Kubernetes service accounts), ECS and EC2 instance roles; AWS_REGION;
 * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for another store, addressed path-style unless
 * AWS_S3_FORCE_PATH_STYLE=false.
 *
 * `gs://bucket/prefix`: Google Cloud Storage through its S3-compatible XML API, as DuckDB reaches it:
 * storage.googleapis.com (GCS_ENDPOINT_URL for another), path-style, HMAC keys from GCS_HMAC_KEY_ID /
 * GCS_HMAC_SECRET (else the AWS variables), and checksums only where the API requires them (GCS
 * rejects the AWS SDK's default CRC32 trailers).
 */

export type StoreScheme = "s3" | "gs" | "az" | "abfss"

export interface StoreUrl {
  readonly scheme: StoreScheme
  /** The bucket (s3, gs) or the container (az, abfss). */
  readonly bucket: string
  /** abfss: the storage account's Data Lake host, `<account>.dfs.core.windows.net` (or a sovereign cloud's). */
  readonly host?: string | undefined
  /** Key prefix without leading or trailing `/`; empty for the bucket's root. */
  readonly prefix: string
}

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i

/** The scheme of a location (`s3`), undefined for a local path (`file://` URLs are local paths). */
export const schemeOf = (location: string): string | undefined => {
  const scheme = SCHEME.exec(location)?.[1]?.toLowerCase()
  return scheme === "file" ? undefined : scheme
}

export const isObjectStore = (location: string): boolean => schemeOf(location) !== undefined

const STORE_SCHEMES: ReadonlyArray<string> = ["s3", "gs", "az", "abfss"] satisfies ReadonlyArray<StoreScheme>

/** The object stores this version writes, named as a sentence names them. */
export const STORE_FORMS =
  "s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or abfss://container@account.dfs.core.windows.net/prefix"

export const isStoreScheme = (scheme: string): scheme is StoreScheme => STORE_SCHEMES.includes(scheme)

/** Bucket and container names, as each store allows them (S3's with dots, as for legacy buckets). */
const BUCKET_NAMES: Record<StoreScheme, RegExp> = {
  s3: /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/,
  gs: /^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/,
  az: /^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/,
  abfss: /^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/
}

/**
 * `s3://bucket/a/b/` → {scheme, bucket, prefix: "a/b"}; likewise gs://, az://container/… and
 * abfss://container@account.dfs.core.windows.net/…; undefined when it is no valid URL of these.
 */
export const parseStoreUrl = (location: string): StoreUrl | undefined => {
  const m = /^([a-z0-9]+):\/\/([^/]+)(?:\/(.*))?$/i.exec(location)
  if (m === null) return undefined
  const scheme = m[1]!.toLowerCase()
  if (!isStoreScheme(scheme)) return undefined
  let bucket = m[2]!
  let host: string | undefined
  if (scheme === "abfss") {
    const at = /^([^@]+)@([a-z0-9]{3,24}\.dfs\.[a-z0-9.-]+)$/.exec(bucket)
    if (at === null) return undefined
    bucket = at[1]!
    host = at[2]!
  }
  if (!BUCKET_NAMES[scheme].test(bucket)) return undefined
  const prefix = (m[3] ?? "").split("/").filter((s) => s !== "").join("/")
  if (prefix.split("/").some((s) => s === "." || s === "..")) return undefined
  return { scheme, bucket, host, prefix }
}

export const formatStoreUrl = (url: StoreUrl): string =>
  `${url.scheme}://${url.bucket}${url.host === undefined ? "" : `@${url.host}`}${
    url.prefix === "" ? "" : `/${url.prefix}`
  }`

/** The key of `name` below `prefix`. */
export const joinKey = (
  prefix: string,
  name: string
): string => (prefix === "" ? name : name === "" ? prefix : `${prefix}/${name}`)

/** Runs `work` on each item, at most `limit` at once (requests a store takes one by one, such as deletes). */
export const eachLimited = async <T>(
  items: ReadonlyArray<T>,
  limit: number,
  work: (item: T) => Promise<void>
): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < items.length) await work(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

type Sdk = typeof import("@aws-sdk/client-s3")

/**
 * The AWS SDK's S3 module, loaded on first use (it is large). Bundled, a dynamic import of its
 * CommonJS build yields the exports as `default`, as Node does for CommonJS.
 */
export const s3Sdk = async (): Promise<Sdk> => {
  const loaded = await import("@aws-sdk/client-s3")
  return "S3Client" in loaded ? loaded : (loaded as unknown as { default: Sdk }).default
}

/** The S3 API's two users: S3 itself (and S3-compatible stores), and Google Cloud Storage's XML API. */
export type S3Flavour = "s3" | "gs"

const clients = new Map<string, Promise<S3Client>>()

/** Where Google Cloud Storage's XML API answers. */
export const GCS_ENDPOINT = "https://storage.googleapis.com"

/** A setting of the environment that cannot work: thrown as the failure of the first request. */
export class StoreSettingError extends Error {
  override readonly name = "StoreSettingError"
}

const gcsOptions = () => {
  const env = process.env
  const keyId = env.GCS_HMAC_KEY_ID || undefined
  const secret = env.GCS_HMAC_SECRET || undefined
  if ((keyId === undefined) !== (secret === undefined)) {
    throw new StoreSettingError(
      `${keyId === undefined ? "GCS_HMAC_SECRET" : "GCS_HMAC_KEY_ID"} is set without ${
        keyId === undefined ? "GCS_HMAC_KEY_ID" : "GCS_HMAC_SECRET"
      }: set both to an HMAC key of the bucket's project (Cloud Storage settings, Interoperability), or neither to use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.`
    )
  }
  return {
    endpoint: env.GCS_ENDPOINT_URL || GCS_ENDPOINT,
    // GCS signs with SigV4 and ignores the region; "auto" as DuckDB sends it.
    region: "auto",
    forcePathStyle: true,
    requestChecksumCalculation: "WHEN_REQUIRED" as const,
    responseChecksumValidation: "WHEN_REQUIRED" as const,
    ...(keyId === undefined ? {} : { credentials: { accessKeyId: keyId, secretAccessKey: secret! } })
  }
}

const s3Options = () => {
  const endpoint = process.env.AWS_ENDPOINT_URL_S3 || process.env.AWS_ENDPOINT_URL || undefined
  const region = process.env.AWS_REGION || process.env.AWS_DEFAULT_REGION || undefined
  return {
    ...(endpoint === undefined ? {} : { endpoint }),
    // Stores other than AWS rarely care about the region; AWS itself needs the bucket's.
    ...(region === undefined && endpoint !== undefined ? { region: "us-east-1" } : {}),
    forcePathStyle: endpoint !== undefined && process.env.AWS_S3_FORCE_PATH_STYLE !== "false"
  }
}

/**
 * The S3 client of this thread for S3 or for GCS as the environment configures it (loaded on first use: the SDK is
 * large); one per configuration, so a program that changes the environment gets a client that follows it.
 */
export const s3Client = (flavour: S3Flavour = "s3"): Promise<S3Client> => {
  let options: ReturnType<typeof gcsOptions | typeof s3Options>
  try {
    options = flavour === "gs" ? gcsOptions() : s3Options()
  } catch (e) {
    return Promise.reject(e)
  }
  const key = JSON.stringify([flavour, options, process.env.AWS_ACCESS_KEY_ID])
  let client = clients.get(key)
  if (client === undefined) {
    client = s3Sdk().then(({ S3Client }) => new S3Client({ ...options, maxAttempts: 5 }))
    client.catch(() => clients.delete(key))
    clients.set(key, client)
  }
  return client
}

const AUTH_CODES = new Set([
  "AccessDenied",
  "InvalidAccessKeyId",
  "SignatureDoesNotMatch",
  "ExpiredToken",
  "InvalidToken",
  "TokenRefreshRequired",
  "AllAccessDisabled",
  "CredentialsProviderError"
])
export const NETWORK_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "TimeoutError",
  "RequestTimeout"
])

/** What a failed request says to check, by store: S3 (and S3-compatible stores) or GCS's XML API. */
const checks = (gcs: boolean) =>
  gcs
    ? {
      bucket: "Check the bucket name in --out (and GCS_ENDPOINT_URL if set), or create the bucket.",
      credentials:
        "Check GCS_HMAC_KEY_ID/GCS_HMAC_SECRET (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY): an HMAC key whose service account may list, read, write and delete objects in the bucket (Storage Object Admin)."
    }
    : {
      bucket: "Check the bucket name in --out (and AWS_REGION or the endpoint), or create the bucket.",
      credentials:
        "Check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, and that they may list, read, write and delete objects and abort multipart uploads under this prefix."
    }

/**
 * Describes a failed S3-API request on `location` (`doing`: "upload", "read", "list", ...), an `s3://`
 * or `gs://` URL. Never names a secret. The reasons carry the exit class (SinkFailure.ts).
 */
export const describeStoreFailure = (location: string, doing: string, cause: unknown): SinkFailureFields => {
  if (cause instanceof StoreSettingError) {
    return { path: location, reason: "InvalidOptions", message: `Cannot ${doing} ${location}: ${cause.message}` }
  }
  const e = cause as {
    name?: string
    Code?: string
    code?: string
    message?: string
    $metadata?: { httpStatusCode?: number }
  }
  // A system error (ENOTFOUND, ECONNRESET) is named plain "Error": its code says more.
  const code = e?.Code ?? (e?.name === "Error" ? undefined : e?.name) ?? e?.code ?? "Error"
  const status = e?.$metadata?.httpStatusCode
  const text = typeof e?.message === "string" && e.message !== "" && e.message !== "UnknownError" ? e.message : code
  const bucket = /^[a-z0-9]+:\/\/[^/]+/i.exec(location)?.[0] ?? location
  const check = checks(schemeOf(location) === "gs")
  if (code === "NoSuchBucket") {
    return {
      path: location,
      reason: "NoSuchBucket",
      message: `Cannot ${doing} ${location}: the bucket ${bucket} does not exist (NoSuchBucket). ${check.bucket}`
    }
  }
  if (AUTH_CODES.has(code) || status === 401 || status === 403 || /credential/i.test(code)) {
    return {
      path: location,
      reason: "AccessDenied",
      message: `Cannot ${doing} ${location}: the store refused the credentials or the permission (${code}${
        status === undefined ? "" : `, HTTP ${status}`
      }). ${check.credentials}`
    }
  }
  if (/region/i.test(text) && /missing/i.test(text)) {
    return {
      path: location,
      reason: "InvalidOptions",
      message: `Cannot ${doing} ${location}: no AWS region is configured. Set AWS_REGION to the bucket's region.`
    }
  }
  if (
    (status !== undefined && (status >= 500 || status === 429 || status === 408)) || NETWORK_CODES.has(code) ||
    code === "SlowDown" || code === "ServiceUnavailable" || code === "InternalError"
  ) {
    return {
      path: location,
      reason: "Unavailable",
      message: `Cannot ${doing} ${location}: the store did not answer successfully after retries (${code}${
        status === undefined ? "" : `, HTTP ${status}`
      }). Run the same command again: finished work is kept.`
    }
  }
  return {
    path: location,
    reason: "Io",
    message: `Cannot ${doing} ${location}: ${text} (${code}${status === undefined ? "" : `, HTTP ${status}`}).`
  }
}
