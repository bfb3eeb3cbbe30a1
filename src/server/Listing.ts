import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { AdditionalField } from "../domain/Partition.ts"
import { P, type PartitionRow, type ReadsShape, type Selection } from "./Reads.ts"

/**
 * A partitions document (`{"partitions":[...]}`) produced page by page from SQLite, so a listing of
 * any size is never held in memory. The bytes are a pure function of the request, which is what makes
 * `Range: bytes=N-` resumption exact. The document is a plain iterator of chunks (the head, then one
 * chunk per page, the last one with the tail): the lean path writes it to node:http as it comes, the
 * routes wrap it in a Stream.
 */
export interface ListingRequest {
  readonly layerPk: number
  readonly layerId: string
  readonly selection: Selection
  readonly fields: ReadonlyArray<AdditionalField>
  /** Listing starts strictly after this partition id (a part's lower bound or a page token). */
  readonly after: string
  /** Inclusive upper bound of a part; null for none. */
  readonly upTo: string | null
  /** Rows of one response before a `next` link is emitted (volatile paging); null for unlimited. */
  readonly pageLimit: number | null
  /** Builds the `next` link from the last partition id of this response. */
  readonly nextLink: (lastPartition: string) => string
  /** Volatile partitions report version -1, as the platform does. */
  readonly fixedVersion: number | null
}

const PAGE = 1000

const FIELD_COLUMNS: Record<AdditionalField, number> = {
  dataSize: P.dataSize,
  checksum: P.checksum,
  compressedDataSize: P.compressedDataSize,
  crc: P.crc
}

/** Strings JSON.stringify writes as they are, between quotes (no quote, backslash, control character or surrogate). */
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/** A JSON value exactly as JSON.stringify writes it, without its generic machinery for the common cases. */
const jsonValue = (value: unknown): string =>
  typeof value === "string"
    ? (PLAIN.test(value) ? `"${value}"` : JSON.stringify(value))
    : typeof value === "number"
    ? (Number.isFinite(value) ? String(value) : "null")
    : JSON.stringify(value)

/**
 * One partition as JSON: `{version, partition, layer, dataHandle, ...fields}`, the bytes
 * `JSON.stringify` gives for that object (fields in request order, absent when null), built as a
 * string directly because this runs once per listed partition.
 */
export const partitionEncoder = (
  layerId: string,
  fields: ReadonlyArray<AdditionalField>,
  fixedVersion: number | null
) => {
  const layer = `,"layer":${JSON.stringify(layerId)},"dataHandle":`
  const names = fields.map((field) => `,${JSON.stringify(field)}:`)
  const columns = fields.map((field) => FIELD_COLUMNS[field])
  const version = fixedVersion === null ? undefined : `{"version":${jsonValue(fixedVersion)},"partition":`
  return (row: PartitionRow): string => {
    let out = (version ?? `{"version":${jsonValue(row[P.vfrom])},"partition":`) + jsonValue(row[P.partition]) + layer +
      jsonValue(row[P.dataHandle])
    for (let i = 0; i < columns.length; i++) {
      const value = row[columns[i]!]
      if (value !== null && value !== undefined) out += names[i] + jsonValue(value)
    }
    return out + "}"
  }
}

/** The whole document, chunk by chunk. */
export function* chunks(reads: ReadsShape, request: ListingRequest): Generator<Uint8Array, void, undefined> {
  const encode = partitionEncoder(request.layerId, request.fields, request.fixedVersion)
  yield Buffer.from(`{"partitions":[`)
  let after = request.after
  let emitted = 0
  while (true) {
    const room = request.pageLimit === null ? PAGE : Math.min(PAGE, request.pageLimit - emitted)
    const rows = room <= 0 ? [] : reads.partitionsPage(request.layerPk, request.selection, after, request.upTo, room)
    let body = ""
    for (const row of rows) {
      body += emitted === 0 ? encode(row) : "," + encode(row)
      emitted++
    }
    if (rows.length > 0) after = rows[rows.length - 1]![P.partition]
    const full = request.pageLimit !== null && emitted >= request.pageLimit
    if (rows.length === room && !full) {
      yield Buffer.from(body)
      continue
    }
    const more = full && reads.partitionsPage(request.layerPk, request.selection, after, request.upTo, 1).length > 0
    yield Buffer.from(body + (more ? `],"next":${JSON.stringify(request.nextLink(after))}}` : "]}"))
    return
  }
}

/**
 * The document from byte `offset` on, or undefined when the offset lies at or beyond its end (416).
 * Earlier chunks are produced and dropped; that costs what reading them would, and keeps one code path.
 */
export const chunksFrom = (
  reads: ReadsShape,
  request: ListingRequest,
  offset: number
): Iterator<Uint8Array> | undefined => {
  const all = chunks(reads, request)
  let position = 0
  for (let next = all.next(); !next.done; next = all.next()) {
    const bytes = next.value
    if (position + bytes.byteLength > offset) return resumed(bytes.subarray(offset - position), all)
    position += bytes.byteLength
  }
  return undefined
}

function* resumed(first: Uint8Array, rest: Iterator<Uint8Array>): Generator<Uint8Array, void, undefined> {
  yield first
  for (let next = rest.next(); !next.done; next = rest.next()) yield next.value
}

/** The chunks as a Stream pulled one at a time (a page is read only when the previous one was taken). */
export const toStream = (iterator: Iterator<Uint8Array>): Stream.Stream<Uint8Array> =>
  Stream.repeatEffectOption(
    Effect.suspend(() => {
      const next = iterator.next()
      return next.done ? Effect.fail(Option.none()) : Effect.succeed(next.value)
    })
  )
