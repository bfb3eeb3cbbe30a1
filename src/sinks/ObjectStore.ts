import type { S3Client } from "@aws-sdk/client-s3"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * Object-store destinations (`s3://bucket/prefix`): the URL, the S3 client and what its failures
 * mean, in plain code (the encoder thread uses it too and loads no Effect). Any S3-compatible store
 * works: AWS S3, MinIO, Ceph, Cloudflare R2, Google Cloud Storage through its XML API with HMAC keys.
 * Credentials, region and endpoint come from the AWS SDK's standard sources: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE with ~/.aws/credentials and ~/.aws/config,
 * web identity (Kubernetes service accounts), ECS and EC2 instance roles; AWS_REGION;
 * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for another store, addressed path-style unless
 * AWS_S3_FORCE_PATH_STYLE=false.
 */

export interface StoreUrl {
  readonly bucket: string
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

/** `s3://bucket/a/b/` → {bucket, prefix: "a/b"}; undefined when it is no valid s3 URL. */
export const parseStoreUrl = (location: string): StoreUrl | undefined => {
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/i.exec(location)
  if (m === null) return undefined
  const bucket = m[1]!
  // S3's bucket naming rules (dots allowed, as for legacy buckets).
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) return undefined
  const prefix = (m[2] ?? "").split("/").filter((s) => s !== "").join("/")
  if (prefix.split("/").some((s) => s === "." || s === "..")) return undefined
  return { bucket, prefix }
}

export const formatStoreUrl = (url: StoreUrl): string =>
  `s3://${url.bucket}${url.prefix === "" ? "" : `/${url.prefix}`}`

/** The key of `name` below `prefix`. */
export const joinKey = (
  prefix: string,
  name: string
): string => (prefix === "" ? name : name === "" ? prefix : `${prefix}/${name}`)

type Sdk = typeof import("@aws-sdk/client-s3")

/**
 * The AWS SDK's S3 module, loaded on first use (it is large). Bundled, a dynamic import of its
 * CommonJS build yields the exports as `default`, as Node does for CommonJS.
 */
export const s3Sdk = async (): Promise<Sdk> => {
  const loaded = await import("@aws-sdk/client-s3")
  return "S3Client" in loaded ? loaded : (loaded as unknown as { default: Sdk }).default
}

let client: Promise<S3Client> | undefined

/** The S3 client of this thread, configured from the environment (loaded on first use: the SDK is large). */
export const s3Client = (): Promise<S3Client> =>
  client ??= (async () => {
    const { S3Client } = await s3Sdk()
    const endpoint = process.env.AWS_ENDPOINT_URL_S3 || process.env.AWS_ENDPOINT_URL || undefined
    const region = process.env.AWS_REGION || process.env.AWS_DEFAULT_REGION || undefined
    return new S3Client({
      ...(endpoint === undefined ? {} : { endpoint }),
      // Stores other than AWS rarely care about the region; AWS itself needs the bucket's.
      ...(region === undefined && endpoint !== undefined ? { region: "us-east-1" } : {}),
      forcePathStyle: endpoint !== undefined && process.env.AWS_S3_FORCE_PATH_STYLE !== "false",
      maxAttempts: 5
    })
  })()

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
const NETWORK_CODES = new Set([
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

/** Describes a failed store request on `location` (`doing`: "upload", "read", "list", ...). Never names a secret. */
export const describeStoreFailure = (location: string, doing: string, cause: unknown): SinkFailureFields => {
  const e = cause as {
    name?: string
    Code?: string
    code?: string
    message?: string
    $metadata?: { httpStatusCode?: number }
  }
  const code = e?.Code ?? e?.name ?? e?.code ?? "Error"
  const status = e?.$metadata?.httpStatusCode
  const text = typeof e?.message === "string" && e.message !== "" && e.message !== "UnknownError" ? e.message : code
  const bucket = /^s3:\/\/[^/]+/.exec(location)?.[0] ?? location
  if (code === "NoSuchBucket") {
    return {
      path: location,
      reason: "NoSuchBucket",
      message:
        `Cannot ${doing} ${location}: the bucket ${bucket} does not exist (NoSuchBucket). Check the bucket name in --out (and AWS_REGION or the endpoint), or create the bucket.`
    }
  }
  if (AUTH_CODES.has(code) || status === 401 || status === 403 || /credential/i.test(code)) {
    return {
      path: location,
      reason: "AccessDenied",
      message:
        `Cannot ${doing} ${location}: the store refused the credentials or the permission (${code}${
          status === undefined ? "" : `, HTTP ${status}`
        }). ` +
        "Check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, and that they may list, read, write and delete objects and abort multipart uploads under this prefix."
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
