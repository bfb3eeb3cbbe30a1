import { col, type Column, partitionColumns, rawColumns } from "../sinks/Columns.ts"
import { type Slice, tileColumns, toInt64, toNullableInt64 } from "../sinks/Row.ts"
import { dataAt, type RowBatch } from "../sinks/RowBatch.ts"
import { mainMessageOf, readBundle } from "./Bundle.ts"
import type { ColumnBatch } from "./Columns.ts"
import { geoParquetMetadata, GeoStats, parseFeatures } from "./GeoJson.ts"
import { messageColumns } from "./Protobuf.ts"
import { SchemaError } from "./ProtoSchema.ts"
import { type DecodeMode, isProtobufContentType, mediaType, type OnDecodeError, UndecodableBlob } from "./Shared.ts"

/**
 * Turning blobs into columns, per row group, for the export's `--decode`. `decoderOf` looks at the
 * layer once (content type, schema bundle, flags) and returns the output columns and a `decode`
 * function that the decoding file writers (DecodingWriter.ts) call per row group, on the encoder
 * thread, off the per-partition hot path of the fetch loop. Plain code: the encoder thread loads no
 * Effect (LayerContent.ts has the Effect face, `makeDecoder`).
 */

export { type DecodeMode, decodeModes, type OnDecodeError, onDecodeErrors } from "./Shared.ts"

/** What decoding turned out to be for a layer (`raw`: today's columns, nothing decoded). */
export type DecodeKind = "raw" | "protobuf" | "geojson" | "json"

export interface LayerContent {
  readonly layerId: string
  readonly contentType: string | undefined
  /** heretile partitioning adds the tile columns */
  readonly heretile: boolean
  /** the schema bundle (ZIP): the layer's schema from the artifact API, or the user's `--schema-bundle` */
  readonly schemaBundle?: Uint8Array | undefined
}

export interface DecodeOptions {
  readonly mode: DecodeMode
  /** one row per element of this top-level repeated field (protobuf) */
  readonly explode?: string | undefined
  readonly onError: OnDecodeError
}

export interface DecodeFailure {
  readonly partition: string
  readonly dataHandle: string
  readonly reason: string
}

/** What the encoder needs to decode one writer's rows; structured-cloned to the encoder thread. */
export interface DecodeSettings {
  readonly content: LayerContent
  /** `mode` resolved already (never `auto`), so that every thread decodes alike */
  readonly options: DecodeOptions
}

/** What decoding did, for one writer (a part) or a whole export. */
export interface DecodeCounts {
  /** rows written: one per partition, feature or exploded element */
  readonly rows: number
  /** partitions that did not decode (left out with `skip`, written raw with `raw`) */
  readonly failed: number
  /** the first of them (MAX_REPORTED_FAILURES), with why */
  readonly failures: ReadonlyArray<DecodeFailure>
}

export interface DecodedBatch extends ColumnBatch {
  /** partitions in the batch (`rows` counts output rows: features, exploded elements) */
  readonly partitions: number
  /** the partitions that did not decode, skipped or written raw (`--on-decode-error skip|raw`) */
  readonly failures: ReadonlyArray<DecodeFailure>
  /** blob bytes decoded (for rates) */
  readonly bytes: number
}

export interface Decoder {
  readonly kind: DecodeKind
  /** the output columns, partition columns first; render with parquetSchema / arrowSchema */
  readonly columns: ReadonlyArray<Column>
  /** the GeoParquet geometry column (geojson only) */
  readonly geometryColumn: string | undefined
  /**
   * Decodes the rows of a batch, or of slices of batches, as the export collected them (blobs
   * decompressed; the tile columns are derived from the partition ids). Throws UndecodableBlob at the
   * first blob that does not decode when `onError` is `fail`. Pass the file's GeoStats so that its
   * GeoParquet metadata covers every row written to it. Decoded values never share memory with the
   * batch, whose buffer may be transferred afterwards.
   */
  readonly decode: (rows: RowBatch | ReadonlyArray<Slice>, geo?: GeoStats) => DecodedBatch
  /** file key-value metadata to add at the end of a file: the GeoParquet `geo` key for geojson */
  readonly fileMetadata: (geo: GeoStats) => Readonly<Record<string, string>>
}

const GEOJSON_TYPES = new Set(["application/geo+json", "application/vnd.geo+json"])

/** `auto`: protobuf with a schema and a protobuf content type, GeoJSON and JSON by content type, else raw. */
export const resolveKind = (layer: LayerContent, mode: DecodeMode): DecodeKind => {
  if (mode === "none") return "raw"
  if (mode !== "auto") return mode
  const type = mediaType(layer.contentType)
  if (isProtobufContentType(type) && layer.schemaBundle !== undefined) return "protobuf"
  if (GEOJSON_TYPES.has(type)) return "geojson"
  if (type === "application/json" || type.endsWith("+json")) return "json"
  return "raw"
}

/** Raw mode keeps what did not decode: the bytes and why. */
const RAW_COLUMNS: ReadonlyArray<Column> = [col("data", "binary"), col("decode_error", "string")]

/** The partition columns of row `i`, tile columns (of the rows from `first` on) included for heretile layers. */
const partitionValues = (
  batch: RowBatch,
  tiles: ReturnType<typeof tileColumns> | undefined,
  i: number,
  first: number
): Array<unknown> => {
  const values: Array<unknown> = [
    batch.partition[i],
    toInt64(batch.partitionVersion[i]!),
    batch.dataHandle[i],
    toNullableInt64(batch.dataSize[i]!),
    batch.checksum[i]
  ]
  if (tiles !== undefined) {
    const t = i - first
    values.push(tiles.level[t], tiles.x[t], tiles.y[t], tiles.west[t], tiles.south[t], tiles.east[t], tiles.north[t])
  }
  return values
}

/** Decoded columns that collide with a partition column get a trailing `_` (as protoc does for reserved words). */
const withoutCollisions = (reserved: ReadonlyArray<Column>, decoded: ReadonlyArray<Column>): Array<Column> => {
  const taken = new Set(reserved.map((c) => c.name))
  return decoded.map((c) => {
    let name = c.name
    while (taken.has(name)) name = `${name}_`
    taken.add(name)
    return name === c.name ? c : { ...c, name }
  })
}

// --- content decoders: bytes -> rows of decoded values --------------------------------------------

interface Content {
  readonly columns: ReadonlyArray<Column>
  /** rows of decoded values for one blob (several for explode and GeoJSON, none for an empty list) */
  readonly rows: (bytes: Uint8Array, geo: GeoStats) => ReadonlyArray<ReadonlyArray<unknown>>
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

const jsonContent: Content = {
  columns: [col("document", "json")],
  rows: (bytes) => {
    const text = utf8.decode(bytes)
    JSON.parse(text)
    return [[text]]
  }
}

const GEOMETRY = "geometry"

const geojsonContent: Content = {
  columns: [col("feature_id", "string"), col(GEOMETRY, "wkb"), col("properties", "json")],
  rows: (bytes, geo) => {
    const local = new GeoStats()
    const features = parseFeatures(utf8.decode(bytes), local)
    geo.merge(local)
    return features.map((f) => [f.id, f.wkb, f.properties])
  }
}

const protobufContent = (layer: LayerContent, explode: string | undefined): Content => {
  if (layer.schemaBundle === undefined) {
    throw new SchemaError(
      "it has no schema (schema.hrn) to decode protobuf with; pass the schema bundle with --schema-bundle FILE.zip"
    )
  }
  const message = messageColumns(mainMessageOf(readBundle(layer.schemaBundle)))
  if (explode === undefined) return { columns: message.columns, rows: (bytes) => [message.decode(bytes)] }
  const index = message.columns.findIndex((c) => c.name === explode)
  const target = message.columns[index]
  if (target === undefined || target.type.kind !== "list") {
    const lists = message.columns.filter((c) => c.type.kind === "list").map((c) => c.name)
    throw new SchemaError(
      `--explode ${explode}: ${message.type.fullName.slice(1)} has no repeated field of that name (repeated fields: ${
        lists.join(", ") || "none"
      })`
    )
  }
  const element = target.type.element
  // A message element becomes its fields as columns; a scalar element one column named after the field.
  const elementColumns: ReadonlyArray<Column> = element.kind === "struct"
    ? element.fields
    : [{ name: explode, type: element, nullable: true }]
  const names = elementColumns.map((c) => c.name)
  return {
    columns: [col(`${explode}_index`, "int32", true), ...elementColumns.map((c) => ({ ...c, nullable: true }))],
    rows: (bytes) => {
      const list = message.decode(bytes)[index] as ReadonlyArray<any>
      return list.map((item, i) => [i, ...(element.kind === "struct" ? names.map((n) => item[n]) : [item])])
    }
  }
}

/**
 * The decoder for a layer. Throws SchemaError when the settings cannot work (protobuf without a schema,
 * a bundle that does not load, an --explode field that is not a repeated field).
 */
export const decoderOf = (layer: LayerContent, options: DecodeOptions): Decoder => {
  const kind = resolveKind(layer, options.mode)
  if (options.explode !== undefined && kind !== "protobuf") {
    throw new SchemaError(`--explode applies to protobuf decoding, and this layer decodes as ${kind}`)
  }
  const base = partitionColumns(layer.heretile)
  if (kind === "raw") {
    return {
      kind,
      columns: rawColumns(layer.heretile),
      geometryColumn: undefined,
      decode: (rows) => rawBatch(slicesOf(rows), layer.heretile),
      fileMetadata: () => ({})
    }
  }
  const content = kind === "protobuf"
    ? protobufContent(layer, options.explode)
    : kind === "geojson"
    ? geojsonContent
    : jsonContent
  const decoded = withoutCollisions([...base, ...RAW_COLUMNS], content.columns)
  const raw = options.onError === "raw"
  const columns = [...base, ...decoded, ...(raw ? RAW_COLUMNS : [])]
  const width = columns.length
  const geometryColumn = kind === "geojson" ? decoded[1]!.name : undefined

  const decode = (input: RowBatch | ReadonlyArray<Slice>, geo: GeoStats = new GeoStats()): DecodedBatch => {
    const out: Array<Array<unknown>> = Array.from({ length: width }, () => [])
    const failures: Array<DecodeFailure> = []
    let rows = 0
    let partitions = 0
    let bytes = 0
    // Straight into the columns: partition values, then decoded values, then the raw-mode pair.
    const push = (
      head: ReadonlyArray<unknown>,
      values: ReadonlyArray<unknown> | null,
      data: Uint8Array | null,
      reason: string | null
    ) => {
      let c = 0
      for (const v of head) out[c++]!.push(v)
      for (let k = 0; k < decoded.length; k++) out[c++]!.push(values === null ? null : values[k])
      if (raw) {
        out[c++]!.push(data)
        out[c]!.push(reason)
      }
      rows++
    }
    for (const { batch, from, to } of slicesOf(input)) {
      const tiles = layer.heretile ? tileColumns(batch.partition.slice(from, to)) : undefined
      partitions += to - from
      for (let i = from; i < to; i++) {
        const head = partitionValues(batch, tiles, i, from)
        const data = dataAt(batch, i)
        if (data === null) {
          push(head, null, null, null)
          continue
        }
        bytes += data.byteLength
        let decodedRows: ReadonlyArray<ReadonlyArray<unknown>>
        try {
          decodedRows = content.rows(data, geo)
        } catch (e) {
          const reason = e instanceof Error ? e.message : String(e)
          const partition = batch.partition[i]!
          const dataHandle = batch.dataHandle[i]!
          if (options.onError === "fail") throw new UndecodableBlob(layer.layerId, partition, dataHandle, reason)
          failures.push({ partition, dataHandle, reason })
          if (raw) push(head, null, data.slice(), reason)
          continue
        }
        for (const values of decodedRows) push(head, values, null, null)
      }
    }
    return { rows, columns: out, partitions, failures, bytes }
  }

  return {
    kind,
    columns,
    geometryColumn,
    decode,
    fileMetadata: (geo) => (geometryColumn === undefined ? {} : { geo: geoParquetMetadata(geometryColumn, geo) })
  }
}

const slicesOf = (rows: RowBatch | ReadonlyArray<Slice>): ReadonlyArray<Slice> =>
  "partition" in rows ? [{ batch: rows, from: 0, to: rows.length }] : rows

const rawBatch = (slices: ReadonlyArray<Slice>, heretile: boolean): DecodedBatch => {
  const width = 6 + (heretile ? 7 : 0)
  const out: Array<Array<unknown>> = Array.from({ length: width }, () => [])
  let rows = 0
  let bytes = 0
  for (const { batch, from, to } of slices) {
    const tiles = heretile ? tileColumns(batch.partition.slice(from, to)) : undefined
    for (let i = from; i < to; i++) {
      const values = partitionValues(batch, tiles, i, from)
      const data = dataAt(batch, i)
      values.splice(5, 0, data?.slice() ?? null)
      for (let c = 0; c < width; c++) out[c]!.push(values[c])
      bytes += data?.byteLength ?? 0
    }
    rows += to - from
  }
  return { rows, columns: out, partitions: rows, failures: [], bytes }
}
