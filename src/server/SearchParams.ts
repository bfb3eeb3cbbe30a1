import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { Reply } from "./Reply.ts"

/** The query string as the router parses it: a repeated parameter has an array of values. */
export type Params = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/** One query parameter: its first value when it is repeated. */
export const Param = Schema.transform(Schema.Union(Schema.String, Schema.NonEmptyArray(Schema.String)), Schema.String, {
  strict: true,
  decode: (value) => (typeof value === "string" ? value : value[0]),
  encode: (value) => value
})

export const IntegerParam = Param.pipe(Schema.compose(Schema.NumberFromString), Schema.int())

/**
 * The query string decoded with `schema`. A parameter that does not decode is answered by
 * `invalid`, given its name and the raw parameters: each API words its own 400.
 */
export const decode = <A, I extends Params, R>(
  schema: Schema.Schema<A, I, R>,
  invalid: (name: string, params: Params) => Reply
): Effect.Effect<A, Reply, R | HttpServerRequest.ParsedSearchParams> =>
  HttpServerRequest.schemaSearchParams(schema).pipe(
    Effect.catchTag("ParseError", (error) =>
      Effect.flatMap(HttpServerRequest.ParsedSearchParams, (params) => {
        const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
        return Effect.fail(invalid(String(issue?.path[0] ?? ""), params))
      }))
  )
