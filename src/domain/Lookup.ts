import * as Schema from "effect/Schema"

/** One entry of a lookup response: `{api, version, baseURL, parameters}`. */
export const ApiEntry = Schema.Struct({
  api: Schema.String,
  version: Schema.String,
  baseURL: Schema.String,
  parameters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})
export type ApiEntry = typeof ApiEntry.Type

export const ApiEntries = Schema.Array(ApiEntry)
