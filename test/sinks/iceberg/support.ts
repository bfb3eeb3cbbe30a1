/**
 * Iceberg tables in tests: writing versions as the export does, and reading them back with an
 * independent reader, icebird (test/support/icebird.ts).
 */
import * as Effect from "effect/Effect"
import { afterAll, beforeAll } from "vitest"
import type { DecodeSettings } from "../../../src/decode/Decoder.ts"
import { Encoder, type EncoderError } from "../../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../../src/encoder/RollingWriter.ts"
import { rawColumns } from "../../../src/sinks/Columns.ts"
import { type Destination } from "../../../src/sinks/Destination.ts"
import { readCurrent } from "../../../src/sinks/iceberg/Commit.ts"
import { fileId, keyIn, type TableLocation, uriOf } from "../../../src/sinks/iceberg/Location.ts"
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
import { icebird, type IcebirdReader, type Route } from "../../support/icebird.ts"
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
    // A directory of its own per writer: named by the time alone, two writers of one version started in the
    // same millisecond wrote the same files.
    const files = yield* writeDataFiles(table, schema, options.rows, `v${options.version ?? "volatile"}-${fileId()}`)
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

export { icebird, type IcebirdReader, type Route }
export type { Destination }
