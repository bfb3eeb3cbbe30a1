import * as Effect from "effect/Effect"
import type { ColumnChunk, FileMetaData, RowGroup } from "hyparquet"
import { parquetMetadata } from "hyparquet"
import { ByteWriter } from "hyparquet-writer"
import { writeMetadata } from "hyparquet-writer/src/metadata.js"
import { publish } from "./Destination.ts"
import type { Destination } from "./DestinationApi.ts"
import type { ByteOutput } from "./FileOutput.ts"
import { loadBacklog, loadOutputs } from "./Files.ts"
import { fromCause, type SinkError } from "./SinkError.ts"
import type { RecordedFile } from "./WrittenFile.ts"

/**
 * Several small data files of one export made into one, without encoding anything again: a Parquet
 * file's row groups and an Arrow file's record batches are byte ranges that stay valid wherever they
 * sit in a file (their offsets are in the footer, which is written anew). So merging costs a copy of
 * the bytes, at one row group or record batch in memory at a time, read from and written to the
 * destination the files are in (a local directory or an object store), the merged file `.partial`
 * or uploading until complete, then published like every data file.
 */

const PAR1 = new TextEncoder().encode("PAR1")
const ARROW1 = new TextEncoder().encode("ARROW1")
/** An Arrow stream's end: a continuation marker and a zero length. */
const ARROW_EOS = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])

/** A byte range of a file, copied as it is. */
interface Range {
  readonly start: number
  readonly end: number
}

/** Where a data file's rows are, from its footer; `schema` tells files that may share a merged file. */
export type Layout =
  | {
    readonly format: "parquet"
    readonly file: RecordedFile
    readonly schema: string
    readonly metadata: FileMetaData
    readonly groups: ReadonlyArray<Range>
  }
  | {
    readonly format: "arrow"
    readonly file: RecordedFile
    readonly schema: string
    readonly footer: ArrowFooter
    /** The schema message, after the magic. */
    readonly head: Range
    readonly batches: ReadonlyArray<Range & { readonly metaDataLength: number; readonly bodyLength: number }>
    /** Dictionary batches cannot be carried into another file (their ids would clash): such a file stays as it is. */
    readonly dictionaries: boolean
  }

type ArrowFooter = import("apache-arrow/ipc/metadata/file").Footer

/** Arrow's footer codec; the package first, which gives the schema its flatbuffer codec. */
const arrowFooter = Effect.promise(async () => {
  await import("apache-arrow")
  return import("apache-arrow/ipc/metadata/file")
})

const corrupt = (dest: Destination, key: string, what: string) =>
  fromCause(dest.at(key), "merge", new Error(`${what}: not a data file this tool wrote`))

const littleEndian = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)

const bigintReplacer = (_: string, value: unknown) => (typeof value === "bigint" ? value.toString() : value)

/** The layout of the data file `file` in `dir`, read from its footer (two ranged reads). */
export const readLayout = (dest: Destination, dir: string, file: RecordedFile): Effect.Effect<Layout, SinkError> =>
  Effect.gen(function*() {
    const key = `${dir}/${file.path}`
    const size = file.bytes
    if (file.format === "parquet") {
      const tail = littleEndian(yield* dest.readRange(key, size - 8, size))
      const footerLength = tail.getUint32(0, true)
      if (footerLength + 12 > size) return yield* corrupt(dest, key, "its Parquet footer does not fit")
      const footer = yield* dest.readRange(key, size - 8 - footerLength, size)
      const metadata = yield* Effect.try({
        try: () => parquetMetadata(toArrayBuffer(footer), { geoparquet: false }),
        catch: (cause) => fromCause(dest.at(key), "merge", cause)
      })
      return {
        format: "parquet",
        file,
        schema: JSON.stringify(metadata.schema, bigintReplacer),
        metadata,
        groups: metadata.row_groups.map(groupRange)
      } satisfies Layout
    }
    const { Footer } = yield* arrowFooter
    const tail = littleEndian(yield* dest.readRange(key, size - 10, size))
    const footerLength = tail.getInt32(0, true)
    if (footerLength <= 0 || footerLength + 18 > size) return yield* corrupt(dest, key, "its Arrow footer does not fit")
    const footerBytes = yield* dest.readRange(key, size - 10 - footerLength, size - 10)
    const footer = yield* Effect.try({
      try: () => Footer.decode(footerBytes),
      catch: (cause) => fromCause(dest.at(key), "merge", cause)
    })
    const batches = [...footer.recordBatches()].map((b) => ({
      start: b.offset,
      end: b.offset + b.metaDataLength + b.bodyLength,
      metaDataLength: b.metaDataLength,
      bodyLength: b.bodyLength
    }))
    const firstBlock = Math.min(
      ...batches.map((b) => b.start),
      ...[...footer.dictionaryBatches()].map((b) => b.offset),
      size - 10 - footerLength
    )
    const head = { start: 8, end: firstBlock }
    const schemaBytes = yield* dest.readRange(key, head.start, head.end)
    return {
      format: "arrow",
      file,
      schema: Buffer.from(schemaBytes).toString("base64"),
      footer,
      head,
      batches,
      dictionaries: footer.numDictionaries > 0
    } satisfies Layout
  })

const toArrayBuffer = (bytes: Uint8Array): ArrayBuffer =>
  bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer

/** A column chunk's first byte: its dictionary page, else its first data page. */
const chunkStart = (c: ColumnChunk) => {
  const m = c.meta_data!
  return Number(
    m.dictionary_page_offset !== undefined && m.dictionary_page_offset > 0n
      ? m.dictionary_page_offset
      : m.data_page_offset
  )
}

const groupRange = (group: RowGroup): Range => {
  let start = Infinity
  let end = 0
  for (const c of group.columns) {
    const from = chunkStart(c)
    start = Math.min(start, from)
    end = Math.max(end, from + Number(c.meta_data!.total_compressed_size))
  }
  return { start, end }
}

/** A row group moved by `delta` bytes; page indexes and bloom filters (after the row groups, not copied) are left out. */
const moved = (group: RowGroup, delta: bigint, ordinal: number): RowGroup => {
  return {
    ...group,
    ...(group.file_offset === undefined ? {} : { file_offset: group.file_offset + delta }),
    ordinal,
    columns: group.columns.map((c) => {
      const {
        column_index_length: _a,
        column_index_offset: _b,
        offset_index_length: _c,
        offset_index_offset: _d,
        ...chunk
      } = c
      const { bloom_filter_length: _e, bloom_filter_offset: _f, ...meta } = c.meta_data!
      return {
        ...chunk,
        file_offset: c.file_offset + delta,
        meta_data: {
          ...meta,
          data_page_offset: meta.data_page_offset + delta,
          ...(meta.dictionary_page_offset === undefined
            ? {}
            : { dictionary_page_offset: meta.dictionary_page_offset + delta }),
          ...(meta.index_page_offset === undefined ? {} : { index_page_offset: meta.index_page_offset + delta })
        }
      }
    })
  }
}

/**
 * Writes the rows of `layouts` (files of one format and schema) as the file `name` in `dir`, in
 * their order, and publishes it; the files merged stay (the commit's tidying removes what the
 * manifest does not name).
 */
export const writeMerged = (
  dest: Destination,
  dir: string,
  name: string,
  layouts: ReadonlyArray<Layout>
): Effect.Effect<RecordedFile, SinkError> =>
  Effect.gen(function*() {
    const at = dest.at(dir)
    const [outputs, backlog] = yield* Effect.tryPromise({
      try: () => Promise.all([loadOutputs(at), loadBacklog(at)]),
      catch: (cause) => fromCause(`${at}/${name}`, "create", cause)
    })
    const output = yield* Effect.try({
      try: () => outputs(name),
      catch: (cause) => fromCause(`${at}/${name}`, "create", cause)
    })
    const write = (bytes: Uint8Array) =>
      Effect.tryPromise({
        try: async () => {
          output.write(bytes)
          await backlog()
        },
        catch: (cause) => fromCause(output.path, "write", cause)
      })
    const copy = (file: RecordedFile, range: Range) =>
      Effect.flatMap(dest.readRange(`${dir}/${file.path}`, range.start, range.end), write)
    yield* (layouts[0]!.format === "parquet"
      ? mergeParquet(layouts as ReadonlyArray<Extract<Layout, { format: "parquet" }>>, output, write, copy)
      : mergeArrow(layouts as ReadonlyArray<Extract<Layout, { format: "arrow" }>>, output, write, copy)).pipe(
        Effect.onError(() => Effect.sync(() => output.abandon()))
      )
    const sha256 = yield* Effect.try({
      try: () => output.close(),
      catch: (cause) => fromCause(output.path, "write", cause)
    })
    const landing = yield* Effect.tryPromise({
      try: () => output.settle(),
      catch: (cause) => fromCause(output.path, "complete", cause)
    })
    const file: RecordedFile = {
      path: name,
      format: layouts[0]!.format,
      rows: layouts.reduce((n, l) => n + l.file.rows, 0),
      bytes: output.bytes,
      sha256
    }
    const etag = yield* Effect.uninterruptible(publish(at, { ...file, landing }))
    return etag === undefined ? file : { ...file, etag }
  })

type Write = (bytes: Uint8Array) => Effect.Effect<void, SinkError>
type Copy = (file: RecordedFile, range: Range) => Effect.Effect<void, SinkError>

const mergeParquet = (
  layouts: ReadonlyArray<Extract<Layout, { format: "parquet" }>>,
  output: ByteOutput,
  write: Write,
  copy: Copy
) =>
  Effect.gen(function*() {
    yield* write(PAR1)
    const groups: Array<RowGroup> = []
    for (const layout of layouts) {
      for (const [i, group] of layout.metadata.row_groups.entries()) {
        const range = layout.groups[i]!
        groups.push(moved(group, BigInt(output.bytes - range.start), groups.length))
        yield* copy(layout.file, range)
      }
    }
    const first = layouts[0]!.metadata
    const footer = new ByteWriter()
    writeMetadata(footer, {
      ...first,
      num_rows: layouts.reduce((n, l) => n + l.metadata.num_rows, 0n),
      row_groups: groups
    })
    const length = footer.offset
    footer.appendUint32(length)
    footer.appendBytes(PAR1)
    yield* write(footer.getBytes())
  })

const mergeArrow = (
  layouts: ReadonlyArray<Extract<Layout, { format: "arrow" }>>,
  output: ByteOutput,
  write: Write,
  copy: Copy
) =>
  Effect.gen(function*() {
    const { FileBlock, Footer } = yield* arrowFooter
    const first = layouts[0]!
    yield* write(new Uint8Array([...ARROW1, 0, 0]))
    yield* copy(first.file, first.head)
    const blocks: Array<InstanceType<typeof FileBlock>> = []
    for (const layout of layouts) {
      for (const batch of layout.batches) {
        blocks.push(new FileBlock(batch.metaDataLength, batch.bodyLength, output.bytes))
        yield* copy(layout.file, batch)
      }
    }
    yield* write(ARROW_EOS)
    const footer = yield* Effect.try({
      try: () => Footer.encode(new Footer(first.footer.schema, first.footer.version, blocks, [])),
      catch: (cause) => fromCause(output.path, "write", cause)
    })
    const tail = new Uint8Array(footer.byteLength + 4 + ARROW1.byteLength)
    tail.set(footer, 0)
    littleEndian(tail).setInt32(footer.byteLength, footer.byteLength, true)
    tail.set(ARROW1, footer.byteLength + 4)
    yield* write(tail)
  })
