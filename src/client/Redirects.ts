import * as Headers from "@effect/platform/Headers"
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import { requestUrl } from "./ErrorMapping.ts"
import { ApiError, redactUrl } from "./Errors.ts"

/**
 * Redirects are followed by the client itself (Http.ts, BlobFetcher.ts), not by undici, so that the
 * rules below hold everywhere: credentials never cross origins, 303 (and 301/302 after a POST) turn
 * into a GET, and a chain is cut after `maxRedirects`.
 */

export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])

export interface Redirect {
  readonly url: URL
  readonly method: string
  /** Credentials never follow a redirect to another origin (e.g. a presigned storage URL). */
  readonly dropAuthorization: boolean
  /** 303, and 301/302 after a POST, turn the request into a body-less GET. */
  readonly toGet: boolean
}

/** Where a redirect answer sends a request; undefined when the Location is not a URL. */
export const redirectOf = (method: string, status: number, from: string, location: string): Redirect | undefined => {
  let url: URL
  try {
    url = new URL(location, from)
  } catch {
    return undefined
  }
  const toGet = status === 303 ? method !== "HEAD" : (status === 301 || status === 302) && method === "POST"
  return { url, method: toGet ? "GET" : method, dropAuthorization: new URL(from).origin !== url.origin, toGet }
}

/** Whether two URLs have the same origin (scheme, host, port); a text that is no URL has none. */
export const sameOrigin = (a: string, b: string): boolean => {
  try {
    return new URL(a).origin === new URL(b).origin
  } catch {
    return false
  }
}

/** The ApiError of a redirect not followed: its Location is no URL, or the chain is too long. */
export const redirectRefused = (
  method: string,
  url: string,
  status: number,
  reason: "invalid" | "too many",
  maxRedirects: number
) =>
  new ApiError({
    status,
    method,
    url: redactUrl(url),
    title: reason === "invalid" ? "Invalid redirect" : "Too many redirects",
    detail: reason === "invalid" ? "the Location header is not a URL" : `more than ${maxRedirects} redirects`
  })

/** The request a redirect answer asks for next. */
export const followRedirect = (
  current: HttpClientRequest.HttpClientRequest,
  status: number,
  location: string,
  maxRedirects: number
) =>
  Effect.gen(function*() {
    const from = requestUrl(current)
    const redirect = redirectOf(current.method, status, from, location)
    if (redirect === undefined) return yield* redirectRefused(current.method, from, status, "invalid", maxRedirects)
    let headers = current.headers
    if (redirect.dropAuthorization) headers = Headers.remove(headers, "authorization")
    if (redirect.toGet) headers = Headers.remove(headers, ["content-type", "content-length", "content-encoding"])
    const next = HttpClientRequest.setMethod(
      HttpClientRequest.get(redirect.url),
      redirect.method as HttpClientRequest.HttpClientRequest["method"]
    )
    const withHeaders = HttpClientRequest.setHeaders(next, headers)
    return redirect.toGet
      ? HttpClientRequest.setBody(withHeaders, HttpBody.empty)
      : HttpClientRequest.setBody(withHeaders, current.body)
  })
