import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ErrorBody from "../domain/ErrorBody.ts"
import { ApiError, redactUrl, TransportError } from "./Errors.ts"

/**
 * What went wrong with a request, as the client's errors say it: an error answer as an ApiError
 * (its body described, Retry-After read), no complete answer as a TransportError classified
 * retriable or not. Shared by the general stack (Http.ts) and the blob fetcher (BlobFetcher.ts).
 */

export type HttpFailure = ApiError | TransportError

/** The full URL a request goes to. */
export const requestUrl = (request: HttpClientRequest.HttpClientRequest): string => {
  const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
  return Either.isRight(url) ? url.right.toString() : request.url
}

/** A short name of a failure for logs: the status, or the transport reason and code. */
export const describeFailure = (error: HttpFailure) =>
  error._tag === "ApiError"
    ? String(error.status)
    : `${error.reason}${error.code === undefined ? "" : ` (${error.code})`}`

const NON_RETRIABLE_CODE =
  /^(ENOTFOUND|ERR_TLS|ERR_SSL|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|EPROTO|UND_ERR_INVALID_ARG|ERR_INVALID)/

const causeCode = (cause: unknown): string | undefined => {
  for (let c: any = cause, i = 0; c !== undefined && c !== null && i < 4; c = c.cause, i++) {
    if (typeof c.code === "string") return c.code
  }
  return undefined
}

const causeMessage = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = cause.cause instanceof Error && cause.cause.message !== cause.message
      ? `: ${cause.cause.message}`
      : ""
    return `${cause.message}${inner}`
  }
  return String(cause)
}

/** A failure to get a complete answer, classified retriable unless it is DNS, TLS or an invalid request. */
export const transportFailure = (method: string, url: string, cause: unknown, retriable?: boolean) => {
  const code = causeCode(cause)
  return new TransportError({
    method,
    url: redactUrl(url),
    reason: causeMessage(cause),
    code,
    retriable: retriable ?? (code === undefined || !NON_RETRIABLE_CODE.test(code))
  })
}

export const transportError = (request: HttpClientRequest.HttpClientRequest, cause: unknown, retriable?: boolean) =>
  transportFailure(request.method, requestUrl(request), cause, retriable)

/** @effect/platform's failure to send a request: an invalid request is final, a transport failure usually not. */
export const fromClientError = (request: HttpClientRequest.HttpClientRequest, error: HttpClientError.HttpClientError) =>
  error._tag === "RequestError" && error.reason !== "Transport"
    ? transportError(request, error.cause ?? error.description ?? error.reason, false)
    : transportError(request, error.cause ?? error)

/** Reads an error response into an ApiError (body shape per facts §10, Retry-After, server Date). */
export const apiErrorOf = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function*() {
    const request = response.request
    const body = request.method === "HEAD" ? "" : yield* Effect.orElseSucceed(response.text, () => "")
    return apiErrorFrom(
      request.method,
      requestUrl(request),
      response.status,
      response.headers,
      body,
      yield* Clock.currentTimeMillis
    )
  })

/** An error answer as an ApiError: its body described (facts §10), Retry-After relative to the server's Date when known. */
export const apiErrorFrom = (
  method: string,
  url: string,
  status: number,
  headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>,
  body: string,
  now: number
) => {
  const header = (name: string) => {
    const value = headers[name]
    return typeof value === "string" ? value : value?.[0]
  }
  const description = ErrorBody.describe(body, {
    "x-correlation-id": header("x-correlation-id"),
    "x-request-id": header("x-request-id")
  })
  const serverTime = parseHttpDate(header("date"))
  return new ApiError({
    status,
    method,
    url: redactUrl(url),
    title: description.title,
    detail: description.detail,
    code: description.code,
    correlationId: description.correlationId,
    retryAfterMs: parseRetryAfter(header("retry-after"), serverTime ?? now),
    serverTime
  })
}

export const parseHttpDate = (value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const time = Date.parse(value)
  return Number.isNaN(time) ? undefined : time
}

/** `Retry-After` as milliseconds: delay-seconds, or an HTTP date relative to `now` (the server's Date when known). */
export const parseRetryAfter = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = parseHttpDate(trimmed)
  return at === undefined ? undefined : Math.max(0, at - now)
}
