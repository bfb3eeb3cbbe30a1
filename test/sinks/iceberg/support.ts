/**
 * Reading Iceberg tables back with an independent reader: icebird (npm), which reads v2 tables
 * (manifests with its own Avro decoder, Parquet through hyparquet, position and equality deletes)
 * through the global `fetch`. The tables record absolute `file://` and `s3://` URIs; the test's
 * fetch sends `file://` URLs to a loopback HTTP server over the local files (with Range requests)
 * and icebird's `https://BUCKET.s3.amazonaws.com/KEY` to the test's S3 server, path-style. Reading a
 * tag: icebird reads a table's current snapshot, so it is given the table's metadata with the
 * tag's snapshot as current.
 */
import * as Effect from "effect/Effect"
import { icebergMetadata, icebergRead } from "icebird"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll } from "vitest"
import type { DecodeSettings } from "../../../src/decode/Decoder.ts"
import { Encoder, type EncoderError } from "../../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../../src/encoder/RollingWriter.ts"
import { rawColumns } from "../../../src/sinks/Columns.ts"
import { type Destination } from "../../../src/sinks/Destination.ts"
import { readCurrent } from "../../../src/sinks/iceberg/Commit.ts"
import { keyIn, type TableLocation, uriOf } from "../../../src/sinks/iceberg/Location.ts"
import {
  commitVersion,
  dataFileMetadata,
  loadTable,
  schemaFor,
  type TableIdentity,
  type VersionCommit
} from "../../../src/sinks/iceberg/Table.ts"
import type { TableMetadata } from "../../../src/sinks/iceberg/TableMetadata.ts"
import type { Evolved } from "../../../src/sinks/iceberg/TableSchema.ts"
import { batchOf } from "../../../src/sinks/RowBatch.ts"
import type { RecordedFile } from "../../../src/sinks/WrittenFile.ts"
import { cleanups } from "../../support/files.ts"
import type { TestStore } from "../../support/s3.ts"

export const IDENTITY: TableIdentity = { catalogHrn: "hrn:here:data::olp-here:iceberg-test", layerId: "places" }

/** A catalog row as the tests model it: `data` is text, which icebird (decoding binary as UTF-8) reads back exactly. */
export interface Row {
  readonly partition: string
  readonly partitionVersion: bigint
  readonly dataHandle: string
  readonly dataSize: bigint | null
  readonly checksum: string | null
  readonly data: string | null
}

/** A layer's partitions at one version, by id. */
export type Layer = ReadonlyMap<string, Row>

const encoder = new TextEncoder()

/** A row of partition `id` as of catalog version `version`. */
export const rowOf = (id: string, version: number): Row => {
  const text = `${id}@${version}: ${"ÿ€🗺".repeat((id.length + version) % 4)}${
    "x".repeat((id.length * 7 + version) % 40)
  }`
  return {
    partition: id,
    partitionVersion: BigInt(version),
    dataHandle: `handle-${id}-${version}`,
    dataSize: version % 5 === 0 ? null : BigInt(encoder.encode(text).byteLength),
    checksum: version % 3 === 0 ? null : `sum-${id}-${version}`,
    data: version % 7 === 6 ? null : text
  }
}

/** A layer of `count` partitions at version 0. */
export const initialLayer = (count: number): Map<string, Row> =>
  new Map(Array.from({ length: count }, (_, i) => {
    const id = i % 11 === 0 ? `straße-${i}` : String(100000 + i)
    return [id, rowOf(id, 0)]
  }))

/** The next version of `layer`: every `step`-th partition changed, every `step + 1`-th deleted, `added` new ones. */
export const nextVersion = (layer: Layer, version: number, step: number, added: number) => {
  const next = new Map(layer)
  const changed: Array<string> = []
  const deleted: Array<string> = []
  let i = 0
  for (const id of layer.keys()) {
    if (i % (step + 1) === version % (step + 1)) {
      next.delete(id)
      deleted.push(id)
    } else if (i % step === version % step) {
      next.set(id, rowOf(id, version))
      changed.push(id)
    }
    i++
  }
  for (let j = 0; j < added; j++) {
    const id = `new-${version}-${j}`
    next.set(id, rowOf(id, version))
    changed.push(id)
  }
  return { layer: next, changed, deleted }
}

/** What icebird returns for a row (int64 as bigint). */
export const expectedRecord = (row: Row) => ({
  partition: row.partition,
  partition_version: row.partitionVersion,
  data_handle: row.dataHandle,
  data_size: row.dataSize,
  checksum: row.checksum,
  data: row.data
})

export const expectedRows = (rows: Iterable<Row>) =>
  [...rows].map(expectedRecord).sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0))

const batch = (rows: ReadonlyArray<Row>) =>
  batchOf(rows.map((r) => ({
    partition: r.partition,
    partitionVersion: r.partitionVersion,
    dataHandle: r.dataHandle,
    dataSize: r.dataSize,
    checksum: r.checksum,
    data: r.data === null ? null : encoder.encode(r.data)
  })))

/**
 * Writes `rows` as the export would for the table: Parquet data files with the table's field ids
 * under `data/<run>/`, small files so that a version spans several.
 */
export const writeDataFiles = (
  table: TableLocation,
  schema: Evolved,
  rows: ReadonlyArray<Row>,
  run: string,
  options: { readonly maxFileBytes?: number; readonly decode?: DecodeSettings } = {}
): Effect.Effect<Array<{ uri: string; file: RecordedFile }>, EncoderError> =>
  Effect.scoped(Effect.gen(function*() {
    const dir = keyIn(table, `data/${run}`)
    const maxFileBytes = options.maxFileBytes ?? 16 * 1024
    const writer = yield* RollingWriter.make({
      decode: options.decode,
      dir: table.dest.at(dir),
      format: "parquet",
      metadata: { catalog_hrn: IDENTITY.catalogHrn, layer_id: IDENTITY.layerId, ...dataFileMetadata(schema) },
      fieldIds: schema.fieldIds,
      maxFileBytes,
      rowGroupBytes: maxFileBytes / 4
    })
    for (let i = 0; i < rows.length; i += 97) yield* writer.write(batch(rows.slice(i, i + 97)))
    const files = yield* writer.finish
    return files.map((file) => ({ uri: uriOf(table, `${dir}/${file.path}`), file }))
  })).pipe(Effect.provide(Encoder.inline))

export const raw = rawColumns(false)

/** Exports a version into the table as the export will: schema, data files, commit. */
export const exportVersion = (
  table: TableLocation,
  options: {
    readonly version: number | undefined
    readonly rows: ReadonlyArray<Row>
    readonly mode?: "full" | "changes"
    readonly baseVersion?: number
    readonly deleted?: ReadonlySet<string>
    readonly commit?: VersionCommit["commit"]
  }
) =>
  Effect.gen(function*() {
    const current = yield* loadTable(table, IDENTITY)
    const schema = yield* schemaFor(table, current, raw)
    const files = yield* writeDataFiles(table, schema, options.rows, `v${options.version ?? "volatile"}-${Date.now()}`)
    return yield* commitVersion(table, {
      identity: IDENTITY,
      version: options.version,
      mode: options.mode ?? "full",
      baseVersion: options.baseVersion,
      deleted: options.deleted,
      schema,
      files,
      createdBy: "catalog-export test",
      commit: options.commit
    })
  })

/** A local HTTP server over the file system (GET with Range), for icebird's fetches of `file://` URLs. */
const startFileServer = async () => {
  const server = http.createServer((req, res) => {
    const file = decodeURIComponent(new URL(req.url!, "http://x").pathname)
    fs.stat(file, (error, stat) => {
      if (error !== null || !stat.isFile()) {
        res.writeHead(404).end()
        return
      }
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "")
      if (range === null) {
        res.writeHead(200, { "content-length": stat.size })
        fs.createReadStream(file).pipe(res)
        return
      }
      const start = Number(range[1])
      const end = range[2] === "" ? stat.size - 1 : Math.min(Number(range[2]), stat.size - 1)
      res.writeHead(206, {
        "content-length": end - start + 1,
        "content-range": `bytes ${start}-${end}/${stat.size}`
      })
      fs.createReadStream(file, { start, end }).pipe(res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

export interface IcebirdReader {
  /** The rows of the table's snapshot `tag` (main: "main"), as icebird reads them, sorted by partition. */
  readonly read: (tableUri: string, tag: string) => Promise<Array<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

/** Where a table URI of another store (gs://, abfss://) is read in a test: an HTTP URL of its emulator, or undefined. */
export type Route = (uri: string) => string | undefined

/** icebird, its fetches sent to the local files, the test's S3 server and the stores `more` routes to. */
export const icebird = async (store?: TestStore, more?: Route): Promise<IcebirdReader> => {
  const files = await startFileServer()
  const realFetch = globalThis.fetch
  const route = (url: string): string => {
    if (url.startsWith("file://")) return `${files.base}${encodeURI(url.slice("file://".length))}`
    const s3 = /^https:\/\/([^.]+)\.s3\.amazonaws\.com\/(.*)$/.exec(url)
    if (s3 !== null && store !== undefined) return `${store.endpoint}/${s3[1]}/${s3[2]}`
    return more?.(url) ?? url
  }
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) =>
    realFetch(
      route(typeof input === "string" ? input : input instanceof URL ? input.href : input.url),
      init
    )) as typeof fetch
  return {
    read: async (tableUrl, tag) => {
      const metadata = await icebergMetadata({ tableUrl })
      const ref = (metadata.refs as Record<string, { "snapshot-id": number }> | undefined)?.[tag]
      if (ref === undefined) throw new Error(`no ref ${tag} in ${tableUrl}`)
      const rows = await icebergRead({ tableUrl, metadata: { ...metadata, "current-snapshot-id": ref["snapshot-id"] } })
      return rows.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0))
    },
    close: async () => {
      globalThis.fetch = realFetch
      await new Promise<void>((resolve) => files.server.close(() => resolve()))
    }
  }
}

/**
 * For a test file: temporary directories removed after it, and icebird reading through the local
 * files (and through `store`, when given: started by then).
 */
export const tablesTest = (prefix: string, store?: () => TestStore, more?: Route) => {
  const { tempDir } = cleanups()
  let reader: IcebirdReader | undefined
  beforeAll(async () => {
    reader = await icebird(store?.(), more)
  })
  afterAll(async () => {
    await reader?.close()
  })
  return {
    tempDir: () => tempDir(prefix),
    read: (tableUri: string, tag: string) => reader!.read(tableUri, tag)
  }
}

/** The table's current metadata. */
export const metadataOf = async (table: TableLocation): Promise<TableMetadata> =>
  (await Effect.runPromise(readCurrent(table))).metadata!

/** Runs an Effect of the library, failing the test with its error. */
export const run = <A>(effect: Effect.Effect<A, unknown>): Promise<A> => Effect.runPromise(effect)

export type { Destination }
