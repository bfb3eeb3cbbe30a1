import * as Schema from "effect/Schema"

/** Stream API v2: a consumer subscription and the messages it reads. */

export const StreamSubscription = Schema.Struct({
  nodeBaseURL: Schema.String,
  subscriptionId: Schema.String
})
export type StreamSubscription = typeof StreamSubscription.Type

export const StreamOffset = Schema.Struct({ partition: Schema.Number, offset: Schema.Number })
export type StreamOffset = typeof StreamOffset.Type

export const StreamMessage = Schema.Struct({
  metaData: Schema.Struct({
    partition: Schema.String,
    checksum: Schema.optional(Schema.String),
    compressedDataSize: Schema.optional(Schema.Number),
    dataSize: Schema.optional(Schema.Number),
    /** Base64 of the message, when it is inlined (up to 1 MB). */
    data: Schema.optional(Schema.String),
    dataHandle: Schema.optional(Schema.String),
    timestamp: Schema.optional(Schema.Number)
  }),
  offset: StreamOffset
})
export type StreamMessage = typeof StreamMessage.Type

export const StreamMessages = Schema.Struct({ messages: Schema.Array(StreamMessage) })
