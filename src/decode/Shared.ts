import { RejectedRow } from "../sinks/SinkFailure.ts"

/**
 * What the CLI, the export and the encoder thread share about decoding without loading a decoder
 * (protobuf.js and friends are loaded by decoding exports only). Plain code: the encoder thread loads
 * no Effect.
 */

export const decodeModes = ["auto", "none", "protobuf", "geojson", "json"] as const
export type DecodeMode = (typeof decodeModes)[number]
export const onDecodeErrors = ["fail", "skip", "raw"] as const
export type OnDecodeError = (typeof onDecodeErrors)[number]

const PROTOBUF_TYPES = new Set([
  "application/x-protobuf",
  "application/protobuf",
  "application/x-protobuffer",
  "application/vnd.google.protobuf",
  "application/octet-stream"
])

export const mediaType = (contentType: string | undefined) => (contentType ?? "").split(";")[0]!.trim().toLowerCase()

export const isProtobufContentType = (contentType: string | undefined) => PROTOBUF_TYPES.has(mediaType(contentType))

/**
 * A blob that does not decode as its layer's content, thrown by the decoder with `--on-decode-error
 * fail`: a row the decoding writer rejects (sinks' RejectedRow); the encoder turns it into a DecodeError.
 */

export interface UndecodableFields {
  readonly layer: string
  readonly partition: string
  readonly dataHandle: string
  readonly reason: string
}

export class UndecodableBlob extends RejectedRow implements UndecodableFields {
  override readonly name = "UndecodableBlob"

  constructor(
    readonly layer: string,
    readonly partition: string,
    readonly dataHandle: string,
    readonly reason: string
  ) {
    super(`partition ${partition} of layer ${layer} (data handle ${dataHandle}) does not decode: ${reason}`)
  }

  get fields(): UndecodableFields {
    return { layer: this.layer, partition: this.partition, dataHandle: this.dataHandle, reason: this.reason }
  }
}

/** Blobs that did not decode are counted; this many of them are named in summaries and manifests. */
export const MAX_REPORTED_FAILURES = 100
