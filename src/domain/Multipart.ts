import * as Schema from "effect/Schema"

/**
 * Multipart uploads of the blob API v1 (facts §5): the bodies of starting one, its links, completing
 * it, and its status. The links are opaque URLs, used as given.
 */

export const MultipartStart = Schema.Struct({
  contentType: Schema.String,
  contentEncoding: Schema.optional(Schema.Literal("gzip", "identity"))
})

const Link = Schema.Struct({ href: Schema.String, method: Schema.String })

export const MultipartLinks = Schema.Struct({
  links: Schema.Struct({ complete: Link, delete: Link, status: Link, uploadPart: Link })
})
export type MultipartLinks = typeof MultipartLinks.Type

export const MultipartComplete = Schema.Struct({
  parts: Schema.Array(Schema.Struct({ etag: Schema.String, number: Schema.Int }))
})

export const MultipartStatus = Schema.Struct({ status: Schema.Literal("processing", "completed", "failed") })

/** Every part but the last has at least this many bytes. */
export const MIN_PART_BYTES = 5 * 1024 * 1024

/** Part numbers run from 1 to this. */
export const MAX_PARTS = 10_000
