import { Effect, Option, Stream } from "effect"
import type { AdditionalField } from "../domain/Partition.ts"
import type { PartitionRow, Selection, StoreShape } from "./Store.ts"

/**
 * A partitions document (`{"partitions":[...]}`) produced page by page from SQLite, so a listing of
 * any size is never held in memory. The bytes are a pure function of the request, which is what makes
 * `Range: bytes=N-` resumption exact.
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
const encoder = new TextEncoder()

export const encodePartition = (
  row: PartitionRow,
  layerId: string,
  fields: ReadonlyArray<AdditionalField>,
  fixedVersion: number | null
): string => {
  const out: Record<string, unknown> = {
    version: fixedVersion ?? row.vfrom,
    partition: row.partition,
    layer: layerId,
    dataHandle: row.data_handle
  }
  for (const field of fields) {
    const value = field === "dataSize"
      ? row.data_size
      : field === "checksum"
      ? row.checksum
      : field === "compressedDataSize"
      ? row.compressed_data_size
      : row.crc
    if (value !== null && value !== undefined) out[field] = value
  }
  return JSON.stringify(out)
}

interface Cursor {
  readonly phase: "head" | "rows" | "done"
  readonly after: string
  readonly emitted: number
}

/** One chunk of the document and the cursor after it; None at the end. */
const step = (store: StoreShape, request: ListingRequest) =>
(cursor: Cursor): Effect.Effect<Option.Option<readonly [Uint8Array, Cursor]>> =>
  Effect.gen(function*() {
    switch (cursor.phase) {
      case "head":
        return Option.some([encoder.encode(`{"partitions":[`), { ...cursor, phase: "rows" }] as const)
      case "done":
        return Option.none()
      case "rows": {
        const room = request.pageLimit === null ? PAGE : Math.min(PAGE, request.pageLimit - cursor.emitted)
        const rows = room <= 0
          ? []
          : yield* store.partitionsPage(request.layerPk, request.selection, cursor.after, request.upTo, room).pipe(Effect.orDie)
        const body = rows
          .map((row, i) => (cursor.emitted + i === 0 ? "" : ",") + encodePartition(row, request.layerId, request.fields, request.fixedVersion))
          .join("")
        const emitted = cursor.emitted + rows.length
        const after = rows.length > 0 ? rows[rows.length - 1]!.partition : cursor.after
        const full = request.pageLimit !== null && emitted >= request.pageLimit
        if (rows.length === room && !full) {
          return Option.some([encoder.encode(body), { phase: "rows", after, emitted }] as const)
        }
        const more = full && (yield* store.partitionsPage(request.layerPk, request.selection, after, request.upTo, 1).pipe(Effect.orDie)).length > 0
        const tail = more ? `],"next":${JSON.stringify(request.nextLink(after))}}` : "]}"
        return Option.some([encoder.encode(body + tail), { phase: "done", after, emitted }] as const)
      }
    }
  })

const start: Cursor = { phase: "head", after: "", emitted: 0 }

export const stream = (store: StoreShape, request: ListingRequest): Stream.Stream<Uint8Array> =>
  Stream.unfoldEffect({ ...start, after: request.after }, step(store, request))

/**
 * The document from byte `offset` on, or None when the offset lies at or beyond its end (416).
 * Earlier chunks are produced and dropped; that costs what reading them would, and keeps one code path.
 */
export const streamFrom = (store: StoreShape, request: ListingRequest, offset: number) =>
  Effect.gen(function*() {
    const next = step(store, request)
    let cursor: Cursor = { ...start, after: request.after }
    let position = 0
    while (true) {
      const chunk = yield* next(cursor)
      if (Option.isNone(chunk)) return Option.none()
      const [bytes, after] = chunk.value
      cursor = after
      if (position + bytes.byteLength > offset) {
        const head = bytes.subarray(offset - position)
        return Option.some(Stream.concat(Stream.make(head), Stream.unfoldEffect(cursor, next)))
      }
      position += bytes.byteLength
    }
  })
