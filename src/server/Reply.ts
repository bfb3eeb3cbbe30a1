import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import { accountError, dataApiError, type DetailEntry, gatewayError } from "../domain/ErrorBody.ts"

/** A finished error response. Handlers fail with it; the router turns it into the response. */
export class Reply extends Data.TaggedError("Reply")<{ readonly response: HttpServerResponse.HttpServerResponse }> {}

/** The outcome of a plain (synchronous, Effect-free) handler step: a value, or the Reply that ends the request. */
export type Result<A> = A | Reply

export const orFail = <A>(result: Result<A>): Effect.Effect<A, Reply> =>
  result instanceof Reply ? Effect.fail(result) : Effect.succeed(result)

/**
 * A response built without Effect, so the lean path (FastPath.ts) writes it straight to node:http
 * while the routes turn it into an HttpServerResponse. A body carries its own content-length header.
 */
export interface PlainResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: Uint8Array | undefined
}

export const toServerResponse = ({ body, headers, status }: PlainResponse): HttpServerResponse.HttpServerResponse =>
  body === undefined
    ? HttpServerResponse.empty({ status, headers })
    : HttpServerResponse.uint8Array(body, { status, headers, contentType: headers["content-type"]! })

export const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** Logs a request's unexpected failure (a defect) and answers it with 500. */
export const unexpectedFailure = (defect: unknown) =>
  Effect.logError("local catalog service: unexpected failure", defect).pipe(
    Effect.as(json(500, { title: "Internal Server Error", status: 500 }))
  )

/**
 * The one place where a routed request's failure becomes its response: a Reply is its own
 * response, an unknown path is 404, a defect 500 (logged), and anything else (a request the
 * platform could not read) 400 naming it.
 */
export const respond = <E, R>(self: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  self.pipe(
    Effect.catchAll((error) => Effect.succeed(failureResponse(error))),
    Effect.catchAllDefect((defect) => unexpectedFailure(defect))
  )

const failureResponse = (error: unknown) =>
  error instanceof Reply
    ? error.response
    : Predicate.isTagged(error, "RouteNotFound")
    ? json(404, { title: "Not Found", status: 404, detail: [{ name: "path", error: "no such endpoint" }] })
    : json(400, { title: "Bad Request", status: 400, detail: [{ name: "request", error: String(error) }] })

/** metadata/query/lookup/publish style error body. */
export const dataError = (status: number, title: string, detail: ReadonlyArray<DetailEntry> = []) =>
  new Reply({ response: json(status, dataApiError(status, title, detail)) })

export const badRequest = (name: string, error: string) => dataError(400, "Bad Request", [{ name, error }])
export const notFound = (name: string, error: string) => dataError(404, "Not Found", [{ name, error }])
export const conflict = (name: string, error: string) => dataError(409, "Conflict", [{ name, error }])

/**
 * A body longer than the service takes (Server.ts: maxBodyBytes). A blob's (`blob`) can go through a
 * multipart upload instead, whose parts are each below the limit.
 */
export const payloadTooLarge = (maxBytes: number, blob: boolean) =>
  dataError(413, "Payload Too Large", [{
    name: "body",
    error: `request bodies are limited to ${maxBytes} bytes` +
      (blob ? "; upload a larger blob with a multipart upload (POST .../data/{dataHandle}/multiparts)" : "")
  }])

export const unauthorized = (description: string) =>
  new Reply({
    response: json(401, gatewayError("Unauthorized", description), { "www-authenticate": "Bearer" })
  })

export const forbidden = (description = "These credentials do not authorize access to this resource.") =>
  new Reply({ response: json(403, gatewayError("Forbidden", description)) })

/** A byte range that cannot be served (blob reads, listing resumes). */
export const rangeNotSatisfiable = (error: string, headers: Record<string, string> = {}) =>
  new Reply({
    response: json(416, { title: "Range Not Satisfiable", status: 416, detail: [{ name: "range", error }] }, headers)
  })

/** The stream API's error body `{title, status, code, cause, action, correlationId}`. */
export const streamError = (status: number, title: string, code: string, cause: string, action: string) => {
  const correlationId = crypto.randomUUID()
  return new Reply({
    response: json(status, { title, status, code, cause, action, correlationId }, { "x-correlation-id": correlationId })
  })
}

/** The config API answers a missing or forbidden catalog with 403 and this plain text. */
export const catalogForbidden = () =>
  new Reply({
    response: HttpServerResponse.text(
      "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden",
      { status: 403 }
    )
  })

export const accountFailure = (httpStatus: number, errorCode: number, message: string) =>
  new Reply({
    response: json(httpStatus, accountError(httpStatus, errorCode, message, `ERROR-${crypto.randomUUID()}`))
  })
