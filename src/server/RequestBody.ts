import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { badRequest, type Reply } from "./Reply.ts"

/*
 * Request bodies as the data APIs read them: a body that cannot be read or parsed answers 400 with
 * the same words on every route.
 */

/** The body parsed as JSON, not yet checked. */
export const json: Effect.Effect<unknown, Reply, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => request.json
).pipe(Effect.catchAll(() => badRequest("body", "the request body is not valid JSON")))

/** The JSON body decoded with `schema`; by default a mismatch answers 400 with the decoder's message. */
export const decodeJson = <A, I>(
  schema: Schema.Schema<A, I>,
  invalid: (error: ParseResult.ParseError) => Reply = (e) => badRequest("body", e.message)
) => Effect.flatMap(json, (raw) => Schema.decodeUnknown(schema)(raw).pipe(Effect.mapError(invalid)))

/** The body's bytes. */
export const bytes: Effect.Effect<Uint8Array, Reply, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => request.arrayBuffer
).pipe(
  Effect.map((buffer) => new Uint8Array(buffer)),
  Effect.catchAll(() => badRequest("body", "the request body could not be read"))
)
