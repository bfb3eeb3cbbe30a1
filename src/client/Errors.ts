import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"

/**
 * Failures of the Data API client. Every message names what failed and, where the user can act,
 * what to do. None of them carries a token or a key secret; URLs are passed through `redactUrl`.
 */

/** The service answered with a status the caller did not accept. */
export class ApiError extends Schema.TaggedError<ApiError>()("ApiError", {
  status: Schema.Number,
  method: Schema.String,
  url: Schema.String,
  title: Schema.optional(Schema.String),
  detail: Schema.optional(Schema.String),
  code: Schema.optional(Schema.String),
  correlationId: Schema.optional(Schema.String),
  /** Delay asked for by `Retry-After`, in milliseconds. */
  retryAfterMs: Schema.optional(Schema.Number),
  /** The server's clock from its `Date` header, in epoch milliseconds. */
  serverTime: Schema.optional(Schema.Number)
}) {
  /** An answer the caller did not expect, by what its status says. */
  get exitCode(): ExitCode {
    const s = this.status
    return s === 401 || s === 403
      ? ExitCode.auth
      : s === 404
      ? ExitCode.notFound
      : s === 400 || s === 413 || s === 416
      ? ExitCode.usage
      : s === 408 || s === 429 || s >= 500
      ? ExitCode.transient
      : ExitCode.failure
  }

  override get message(): string {
    const what = [this.title, this.detail].filter((s) => s !== undefined && s !== "").join(": ")
    return (
      `${this.method} ${this.url} answered ${this.status}` +
      (what === "" ? "" : ` ${what}`) +
      (this.code === undefined ? "" : ` (code ${this.code})`) +
      (this.correlationId === undefined ? "" : ` [correlation id ${this.correlationId}]`)
    )
  }
}

/** The request did not get a complete answer: connection refused or reset, timeout, TLS failure, cut body. */
export class TransportError extends Schema.TaggedError<TransportError>()("TransportError", {
  method: Schema.String,
  url: Schema.String,
  reason: Schema.String,
  code: Schema.optional(Schema.String),
  retriable: Schema.Boolean
}) {
  get exitCode() {
    return ExitCode.failure
  }

  override get message(): string {
    const hint = this.code !== undefined && UNTRUSTED_CERTIFICATE.test(this.code)
      ? ". The server's certificate is not trusted: behind a proxy or gateway that presents its own certificate, point NODE_EXTRA_CA_CERTS at its CA bundle (PEM)"
      : ""
    return `${this.method} ${this.url} failed: ${this.reason}${this.code === undefined ? "" : ` (${this.code})`}${hint}`
  }
}

const UNTRUSTED_CERTIFICATE =
  /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_UNTRUSTED)$/

/** Transient failures went on longer than the retry policy allows. Safe to run again later. */
export class RetryBudgetExhausted extends Schema.TaggedError<RetryBudgetExhausted>()("RetryBudgetExhausted", {
  method: Schema.String,
  url: Schema.String,
  retries: Schema.Number,
  elapsedMs: Schema.Number,
  lastError: Schema.Union(ApiError, TransportError)
}) {
  get exitCode() {
    return ExitCode.transient
  }

  override get message(): string {
    return (
      `Gave up on ${this.method} ${this.url} after ${this.retries} ${this.retries === 1 ? "retry" : "retries"} ` +
      `in ${(this.elapsedMs / 1000).toFixed(1)} s; last failure: ${this.lastError.message}. ` +
      `The service kept failing transiently; it is safe to run the same command again later (work already finished is kept), or to allow a larger retry budget.`
    )
  }
}

/**
 * A request kept failing the way a regional outage does (5xx or no connection, several times in a
 * row), where the caller has another region to turn to (a multi-region catalog): it stops retrying
 * early so the caller can fail over. Safe to run again later when no region was left.
 */
export class RegionUnavailable extends Schema.TaggedError<RegionUnavailable>()("RegionUnavailable", {
  method: Schema.String,
  url: Schema.String,
  failures: Schema.Number,
  lastError: Schema.Union(ApiError, TransportError)
}) {
  get exitCode() {
    return ExitCode.transient
  }

  override get message(): string {
    return (
      `${this.method} ${this.url} failed ${this.failures} times in a row (last: ${this.lastError.message}): the region serving it looks unavailable. ` +
      `It is safe to run the same command again later (work already finished is kept).`
    )
  }
}

/** A successful response whose body is not what the API promises. */
export class ResponseDecodeError extends Schema.TaggedError<ResponseDecodeError>()("ResponseDecodeError", {
  method: Schema.String,
  url: Schema.String,
  status: Schema.Number,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.failure
  }

  override get message(): string {
    return `${this.method} ${this.url} answered ${this.status} with an unexpected body: ${this.reason}`
  }
}

/** Reading credentials.properties failed. */
export class CredentialsError extends Schema.TaggedError<CredentialsError>()("CredentialsError", {
  path: Schema.String,
  key: Schema.optional(Schema.String),
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.auth
  }

  override get message(): string {
    const where = this.key === undefined
      ? `Credentials file ${this.path}`
      : `Credentials file ${this.path}, key "${this.key}"`
    return `${where}: ${this.reason}`
  }
}

/** The token endpoint refused to issue a token. */
export class AuthError extends Schema.TaggedError<AuthError>()("AuthError", {
  endpoint: Schema.String,
  status: Schema.optional(Schema.Number),
  code: Schema.optional(Schema.String),
  reason: Schema.String,
  /** Where the key came from (the credentials file), so the message can name it. */
  credentials: Schema.optional(Schema.String)
}) {
  get exitCode() {
    return ExitCode.auth
  }

  override get message(): string {
    return (
      `Could not get an access token from ${this.endpoint}` +
      (this.status === undefined ? "" : ` (${this.status}${this.code === undefined ? "" : `, code ${this.code}`})`) +
      `: ${this.reason.replace(/\.+$/, "")}. Check here.access.key.id and here.access.key.secret in the credentials${
        this.credentials === undefined ? "" : ` (${this.credentials})`
      } and that the key is enabled.`
    )
  }
}

/** The lookup service knows no such API for the catalog (or platform). */
export class ApiNotFound extends Schema.TaggedError<ApiNotFound>()("ApiNotFound", {
  api: Schema.String,
  version: Schema.String,
  hrn: Schema.optional(Schema.String),
  lookupUrl: Schema.String,
  available: Schema.Array(Schema.String)
}) {
  get exitCode() {
    return ExitCode.notFound
  }

  override get message(): string {
    const scope = this.hrn === undefined ? "the platform" : this.hrn
    const known = this.available.length === 0 ? "none" : this.available.join(", ")
    return `The lookup service ${this.lookupUrl} has no "${this.api}" ${this.version} API for ${scope} (available: ${known}). Check the lookup URL and the catalog HRN.`
  }
}

/**
 * Nothing answers at the lookup URL (connection refused, or no such host) on the first request to it:
 * a wrong or missing lookup URL, not an outage to wait out. `from` says where the URL came from.
 */
export class LookupUnreachable extends Schema.TaggedError<LookupUnreachable>()("LookupUnreachable", {
  lookupUrl: Schema.String,
  from: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message(): string {
    return (
      `Nothing answers at the lookup URL ${this.lookupUrl} (${this.reason}; the URL ${this.from}). ` +
      `Give the lookup service's URL with --lookup-url URL (or CATALOG_LOOKUP_URL, or "lookupUrl" in a job config); ` +
      `the local service prints it as "lookupUrl" when it starts (catalog-export serve).`
    )
  }
}

/** The lookup URL answers, but not as a lookup service does (its `/platform/apis` is not found): a service's root URL, say. */
export class NotALookupService extends Schema.TaggedError<NotALookupService>()("NotALookupService", {
  lookupUrl: Schema.String,
  from: Schema.String,
  status: Schema.Number
}) {
  get exitCode() {
    return ExitCode.usage
  }

  /** Where the lookup API would be if the URL is the root (or the `/lookup` path) of a service. */
  get suggestion(): string {
    const base = this.lookupUrl.replace(/\/+$/, "")
    return /\/lookup$/.test(base) ? `${base}/v1` : /\/lookup\/v1$/.test(base) ? base : `${base}/lookup/v1`
  }

  override get message(): string {
    const guess = this.suggestion === this.lookupUrl.replace(/\/+$/, "")
      ? "check the host and port"
      : `did you mean ${this.suggestion}?`
    return (
      `${this.lookupUrl} is not a lookup service (GET ${
        this.lookupUrl.replace(/\/+$/, "")
      }/platform/apis answered ${this.status}; ` +
      `the URL ${this.from}): ${guess} The local service prints its lookup URL as "lookupUrl" when it starts.`
    )
  }
}

/** The catalog does not exist or the credentials may not see it (the config API answers 403 for both). */
export class CatalogNotFound extends Schema.TaggedError<CatalogNotFound>()("CatalogNotFound", {
  hrn: Schema.String,
  status: Schema.Number,
  detail: Schema.optional(Schema.String)
}) {
  get exitCode() {
    return ExitCode.notFound
  }

  override get message(): string {
    return (
      `Catalog ${this.hrn} was not found or is not accessible with these credentials (${this.status}` +
      `${
        this.detail === undefined ? "" : `: ${this.detail}`
      }). Check the HRN and that the app has read access to the catalog.`
    )
  }
}

/**
 * An upload did not leave the blob it sent under its data handle: the handle holds other bytes (a
 * 409 for a blob that is not this upload's), or the service gave up assembling a multipart upload.
 */
export class BlobIntegrityError extends Schema.TaggedError<BlobIntegrityError>()("BlobIntegrityError", {
  hrn: Schema.String,
  layer: Schema.String,
  dataHandle: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.integrity
  }

  override get message(): string {
    return `Data handle ${this.dataHandle} in layer ${this.layer} of ${this.hrn}: ${this.reason}. ` +
      `Nothing that refers to it was published; someone should look at what else writes to this layer.`
  }
}

/** A local file to upload cannot be read. */
export class LocalFileError extends Schema.TaggedError<LocalFileError>()("LocalFileError", {
  path: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message(): string {
    return `Cannot read ${this.path}: ${this.reason.replace(/\.+$/, "")}.`
  }
}

/** What one authorized call can fail with. */
export type RequestFailure = ApiError | TransportError | RetryBudgetExhausted | RegionUnavailable | AuthError

export type ClientError =
  | RequestFailure
  | ResponseDecodeError
  | CredentialsError
  | ApiNotFound
  | CatalogNotFound
  | LookupUnreachable
  | NotALookupService

const SECRET_PARAM = /key|token|sig|secret|credential|password|auth|session/i

/** The URL without userinfo and with the values of secret-looking query parameters replaced. */
export const redactUrl = (input: string | URL): string => {
  let url: URL
  try {
    url = new URL(String(input))
  } catch {
    return String(input).replace(/\?.*$/, "")
  }
  const secretKeys = [...url.searchParams.keys()].filter((k) => SECRET_PARAM.test(k))
  if (secretKeys.length === 0 && url.username === "" && url.password === "") return String(input)
  url.username = ""
  url.password = ""
  for (const k of secretKeys) url.searchParams.set(k, "REDACTED")
  return url.toString()
}
