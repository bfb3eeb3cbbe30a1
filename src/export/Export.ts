import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { gunzipSync } from "node:zlib"
import { Effect, Exit, Option, Schema, Scope, Stream } from "effect"
import { BlobApi, type BlobFailure, VolatileBlobApi } from "../client/BlobApi.ts"
import { MetadataApi } from "../client/MetadataApi.ts"
import * as HereTile from "../domain/HereTile.ts"
import type { Partition } from "../domain/Partition.ts"
import { TOOL } from "../domain/Tool.ts"
import type { ParquetCompression } from "../sinks/ParquetCodecs.ts"
import * as RollingWriter from "../sinks/RollingWriter.ts"
import type { Row } from "../sinks/Row.ts"
import { fromCause } from "../sinks/SinkError.ts"
import { crashPoint, crashPointSync } from "./CrashHook.ts"
import { IntegrityError, OutputConflict } from "./Errors.ts"
import { advanceState, type Manifest, MANIFEST, readManifest, WrittenFile, writeJsonAtomic } from "./Manifest.ts"
import { exportDir, Plan } from "./Plan.ts"
import { Counters } from "./Progress.ts"

export interface ExportOptions {
  readonly out: string
  readonly format: RollingWriter.OutputFormat
  readonly compression?: ParquetCompression | undefined
  /** Blob requests in flight at once, across all parts. */
  readonly concurrency: number
  /** Parts listed (and written) at once. */
  readonly listConcurrency: number
  readonly maxFileBytes?: number | undefined
  readonly rowGroupBytes?: number | undefined
  /** Re-export even when a manifest says it is done. */
  readonly force: boolean
  /** Integrity re-fetches of one blob before a checksum mismatch fails the run. */
  readonly integrityAttempts?: number
}

export type ExportResult =
  | { readonly _tag: "Exported"; readonly dir: string; readonly manifest: Manifest; readonly counters: Counters }
  | { readonly _tag: "AlreadyExported"; readonly dir: string; readonly manifest: Manifest }

const PARTS_DIR = "_parts"
/**
 * Rows buffered per open part file before a row group is written. Up to `listConcurrency` parts
 * are open at once, so this bounds memory (4 x 16 MiB by default) while keeping row groups large
 * enough for analytics readers.
 */
const ROW_GROUP_BYTES = 16 * 1024 * 1024
const ADDITIONAL_FIELDS = ["dataSize", "checksum"] as const

/** What one finished part wrote; the proof that lets a resumed run skip it. */
const Checkpoint = Schema.Struct({
  part: Schema.Number,
  files: Schema.Array(WrittenFile),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number
})
type Checkpoint = typeof Checkpoint.Type

const HASHES: Record<string, string> = { "MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256" }
const HASH_BY_LENGTH: Record<number, string> = { 32: "md5", 40: "sha1", 64: "sha256" }

/** The digest algorithm of a checksum: the layer's `digest`, else guessed from the hex length. */
const hashOf = (digest: string | undefined, checksum: string): string | undefined =>
  (digest === undefined ? undefined : HASHES[digest.toUpperCase()]) ?? HASH_BY_LENGTH[checksum.length]

const isGzip = (bytes: Uint8Array) => bytes.byteLength >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b

const tileColumns = (partition: string) => {
  const id = HereTile.parseTileId(partition)
  if (id === undefined) {
    return { tileLevel: null, tileX: null, tileY: null, tileWest: null, tileSouth: null, tileEast: null, tileNorth: null }
  }
  const { level, column, row } = HereTile.toAddress(id)
  const box = HereTile.boundingBox(id)
  return { tileLevel: level, tileX: column, tileY: row, tileWest: box.west, tileSouth: box.south, tileEast: box.east, tileNorth: box.north }
}

const readJsonFile = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
  Effect.promise(() => fs.readFile(file, "utf8").catch(() => undefined)).pipe(
    Effect.flatMap((text) =>
      text === undefined
        ? Effect.succeed(Option.none<A>())
        : Schema.decodeUnknown(Schema.parseJson(schema))(text).pipe(Effect.option)
    )
  )

const fileSize = (file: string) => fs.stat(file).then((s) => s.size, () => -1)

/** A checkpoint counts only if every file it names is on disk with its recorded size. */
const validCheckpoint = (dir: string, checkpoint: Checkpoint) =>
  Effect.promise(async () => {
    for (const f of checkpoint.files) if ((await fileSize(path.join(dir, f.path))) !== f.bytes) return false
    return true
  })

/** Removes what an unfinished run of a part left: its `.partial` files and any final files without a checkpoint. */
const clearPart = (dir: string, part: number) =>
  Effect.promise(async () => {
    const prefix = `part-${part}-`
    for (const name of await fs.readdir(dir)) if (name.startsWith(prefix)) await fs.rm(path.join(dir, name), { force: true })
  })

const samePlan = (a: Plan, b: Plan) =>
  a.catalogHrn === b.catalogHrn && a.layerId === b.layerId && a.version === b.version && a.mode === b.mode &&
  a.baseVersion === b.baseVersion && a.snapshot === b.snapshot

/** Moves the incremental cursor forward to the exported version; never back (a backfill of old versions leaves it). */
const advanceCursor = (out: string, plan: Plan, updatedAt: string) =>
  advanceState(path.join(out, plan.catalogId, plan.layerId), { catalogHrn: plan.catalogHrn, layerId: plan.layerId, lastVersion: plan.version, updatedAt })

/**
 * After the output volume failed (disk full, I/O error): removes what no checkpoint vouches for and
 * cannot be resumed anyway, giving the space back and leaving nothing half-written, and the
 * directories left empty. Finished parts stay for the next run.
 */
const discardUnfinished = (out: string, dir: string) =>
  Effect.promise(async () => {
    // A committed export (the cursor failed to move after its manifest) is finished: keep all of it.
    if ((await fileSize(path.join(dir, MANIFEST))) >= 0) return
    const partsDir = path.join(dir, PARTS_DIR)
    const kept = new Set<string>()
    for (const name of await fs.readdir(partsDir).catch(() => [] as Array<string>)) {
      if (!/^part-\d+\.json$/.test(name)) continue
      try {
        for (const f of JSON.parse(await fs.readFile(path.join(partsDir, name), "utf8")).files) kept.add(f.path)
      } catch {
        // an unreadable checkpoint vouches for nothing
      }
    }
    for (const name of await fs.readdir(dir).catch(() => [] as Array<string>)) {
      if (name !== PARTS_DIR && !kept.has(name)) await fs.rm(path.join(dir, name), { recursive: true, force: true }).catch(() => undefined)
    }
    if (kept.size > 0) return
    await fs.rm(partsDir, { recursive: true, force: true }).catch(() => undefined)
    const root = path.resolve(out)
    for (let d = path.resolve(dir); d.startsWith(root + path.sep); d = path.dirname(d)) {
      if (!(await fs.rmdir(d).then(() => true, () => false))) break
    }
  })

/**
 * Runs a plan: lists each part, fetches blobs with bounded concurrency, writes Parquet/Arrow files
 * per part, checkpoints each finished part, and commits the manifest last. A re-run after a crash
 * reuses finished parts; a re-run after a commit does nothing. When writing fails (a full disk), the
 * unfinished files are removed; other failures leave them `.partial` for the next run to replace.
 */
export const runExport = (plan: Plan, options: ExportOptions, counters = new Counters()) =>
  exportPlan(plan, options, counters).pipe(
    Effect.tapError((error) => (error._tag === "SinkError" ? discardUnfinished(options.out, path.join(options.out, exportDir(plan))) : Effect.void))
  )

const exportPlan = Effect.fn("Export.run")(function*(plan: Plan, options: ExportOptions, counters: Counters) {
  const dir = path.join(options.out, exportDir(plan))
  const existing = yield* readManifest(dir)
  if (Option.isSome(existing) && !options.force) {
    const m = existing.value
    // A full export of the version holds everything a changes export of it would.
    const covers = m.mode === plan.mode || (m.mode === "full" && plan.mode === "changes")
    if (m.catalogHrn === plan.catalogHrn && m.layerId === plan.layerId && m.version === plan.version && covers) {
      // A run killed right after its manifest left `_parts/` and the cursor behind: finish its commit.
      yield* Effect.promise(() => fs.rm(path.join(dir, PARTS_DIR), { recursive: true, force: true }))
      if (plan.layerType === "versioned") yield* advanceCursor(options.out, plan, m.finishedAt)
      return { _tag: "AlreadyExported", dir, manifest: m } satisfies ExportResult
    }
    return yield* new OutputConflict({
      message: `${dir} already holds a ${m.mode} export of ${m.catalogHrn} layer ${m.layerId} version ${m.version}; rerun with --force to replace it.`
    })
  }
  const partsDir = path.join(dir, PARTS_DIR)
  yield* Effect.tryPromise({ try: () => fs.mkdir(partsDir, { recursive: true }), catch: (cause) => fromCause(partsDir, "create", cause) })
  if (options.force) {
    yield* Effect.promise(() => fs.rm(path.join(dir, MANIFEST), { force: true }))
    yield* Effect.promise(() => fs.rm(partsDir, { recursive: true, force: true }).then(() => fs.mkdir(partsDir, { recursive: true })))
  }
  // A resumed run keeps the plan (and so the part ids) of the run it continues.
  const stored = yield* readJsonFile(Plan, path.join(partsDir, "plan.json"))
  const effective = Option.isSome(stored) && samePlan(stored.value, plan) ? stored.value : plan
  if (Option.isSome(stored) && effective !== stored.value) {
    yield* Effect.promise(() => fs.rm(partsDir, { recursive: true, force: true }).then(() => fs.mkdir(partsDir, { recursive: true })))
  }
  yield* writeJsonAtomic(path.join(partsDir, "plan.json"), effective)

  const startedAt = new Date().toISOString()
  const parts: ReadonlyArray<string | undefined> = effective.parts.length === 0 ? [undefined] : effective.parts
  const metadata = yield* MetadataApi
  const blobs = effective.layerType === "volatile" ? yield* VolatileBlobApi : yield* BlobApi
  const integrityAttempts = options.integrityAttempts ?? 3

  const fetchData = (p: Partition) =>
    Effect.gen(function*() {
      for (let attempt = 1;; attempt++) {
        const stored = yield* blobs.get(effective.catalogHrn, effective.layerId, p.dataHandle)
        const data = effective.contentEncoding === "gzip" && isGzip(stored) ? new Uint8Array(gunzipSync(stored)) : stored
        const hash = p.checksum === undefined ? undefined : hashOf(effective.digest, p.checksum)
        if (hash === undefined || createHash(hash).update(data).digest("hex") === p.checksum!.toLowerCase()) return { stored, data }
        if (attempt >= integrityAttempts) {
          return yield* new IntegrityError({
            message: `The blob of partition '${p.partition}' (data handle ${p.dataHandle}) in ${effective.catalogHrn} layer ${effective.layerId} ` +
              `does not match its ${hash} checksum after ${attempt} downloads. The data in the catalog is inconsistent; report it to the catalog's owner.`
          })
        }
        yield* Effect.logWarning("checksum mismatch, downloading again").pipe(Effect.annotateLogs({ partition: p.partition, attempt }))
      }
    })

  const toRow = (p: Partition) =>
    Effect.gen(function*() {
      const base = { partition: p.partition, partitionVersion: p.version, dataHandle: p.dataHandle, checksum: p.checksum ?? null }
      const tile = effective.heretile ? tileColumns(p.partition) : {}
      if (p.dataHandle === "") return { ...base, ...tile, dataSize: null, data: null } satisfies Row
      const { stored, data } = yield* fetchData(p)
      yield* crashPoint("fetched")
      return { ...base, ...tile, dataSize: p.dataSize ?? stored.byteLength, data } satisfies Row
    })

  const listing = (part: string | undefined) => {
    const common = { additionalFields: ADDITIONAL_FIELDS, ...(part === undefined ? {} : { part }) }
    if (effective.mode === "changes") {
      return metadata.changes(effective.catalogHrn, effective.layerId, { ...common, startVersion: effective.baseVersion ?? -1, endVersion: effective.version })
    }
    return metadata.partitions(
      effective.catalogHrn,
      effective.layerId,
      effective.layerType === "versioned" ? { ...common, version: effective.version } : common
    )
  }

  const fileMetadata: Record<string, string> = {
    catalog_hrn: effective.catalogHrn,
    layer_id: effective.layerId,
    layer_type: effective.layerType,
    content_type: effective.contentType,
    content_encoding: effective.contentEncoding ?? "",
    catalog_version: String(effective.version),
    tool_version: `${TOOL.name} ${TOOL.version}`
  }

  const openWriter = (index: number) =>
    Effect.gen(function*() {
      yield* clearPart(dir, index)
      const scope = yield* Scope.make()
      const writer = yield* RollingWriter.make({
        dir,
        shard: index,
        format: options.format,
        heretile: effective.heretile,
        metadata: fileMetadata,
        createdBy: `${TOOL.name} ${TOOL.version}`,
        ...(options.compression === undefined ? {} : { compression: options.compression }),
        ...(options.maxFileBytes === undefined ? {} : { maxFileBytes: options.maxFileBytes }),
        rowGroupBytes: options.rowGroupBytes ?? ROW_GROUP_BYTES,
        onRenamed: () => crashPointSync("renamed")
      }).pipe(Scope.extend(scope))
      return { scope, writer, pending: [] as Array<Row>, stats: { partitions: 0, deleted: 0, bytes: 0 } }
    })
  type PartWriter = Effect.Effect.Success<ReturnType<typeof openWriter>>

  // Earlier runs' finished parts are kept; the others are fetched again.
  const checkpoints = new Map<number, Checkpoint>()
  const todo: Array<number> = []
  for (const [index] of parts.entries()) {
    const previous = yield* readJsonFile(Checkpoint, path.join(partsDir, `part-${index}.json`))
    if (Option.isSome(previous) && (yield* validCheckpoint(dir, previous.value))) {
      counters.skippedParts++
      counters.partitions += previous.value.partitions
      counters.deleted += previous.value.deleted
      counters.bytes += previous.value.bytes
      checkpoints.set(index, previous.value)
    } else {
      todo.push(index)
    }
  }

  /**
   * Every part's listing feeds one fetch stage, so `concurrency` is one bound shared by all parts
   * (no semaphore, whose release wakes every waiter). Each listing ends with a marker that reaches
   * the writer stage after the part's last row, which is when the part's files are finished.
   */
  type Item = { readonly _tag: "Listed"; readonly part: number; readonly partition: Partition } | { readonly _tag: "End"; readonly part: number }
  type Fetched = { readonly _tag: "Row"; readonly part: number; readonly row: Row } | { readonly _tag: "End"; readonly part: number }
  const writers = new Map<number, PartWriter>()
  const writerOf = (index: number) =>
    Effect.suspend(() => {
      const open = writers.get(index)
      return open !== undefined ? Effect.succeed(open) : Effect.tap(openWriter(index), (w) => Effect.sync(() => writers.set(index, w)))
    })
  const WRITE_BATCH = 256
  const finishPart = (index: number) =>
    Effect.gen(function*() {
      const part = yield* writerOf(index)
      if (part.pending.length > 0) yield* part.writer.write(part.pending.splice(0))
      const files = yield* part.writer.finish
      yield* Scope.close(part.scope, Exit.void)
      writers.delete(index)
      const checkpoint: Checkpoint = { part: index, files: files.map((f) => ({ ...f })), ...part.stats }
      yield* writeJsonAtomic(path.join(partsDir, `part-${index}.json`), checkpoint)
      checkpoints.set(index, checkpoint)
      yield* crashPoint("checkpoint")
    })
  const accept = (index: number, row: Row) =>
    Effect.gen(function*() {
      const part = yield* writerOf(index)
      const bytes = row.data?.byteLength ?? 0
      part.stats.partitions++
      part.stats.bytes += bytes
      counters.partitions++
      counters.bytes += bytes
      if (row.data === null) {
        part.stats.deleted++
        counters.deleted++
      }
      part.pending.push(row)
      if (part.pending.length >= WRITE_BATCH) {
        yield* part.writer.write(part.pending.splice(0))
        yield* crashPoint("written")
      }
    })

  // Blobs are fetched unordered: in order, one blob waiting out a Retry-After would hold back every
  // download behind it (throttled runs were 10x slower). So a part is finished when its listing has
  // ended and as many rows as it listed have arrived, whatever their order.
  const tally = new Map<number, { listed: number; accepted: number; ended: boolean }>()
  const tallyOf = (index: number) => {
    let t = tally.get(index)
    if (t === undefined) tally.set(index, t = { listed: 0, accepted: 0, ended: false })
    return t
  }
  yield* Stream.mergeAll(
    todo.map((index) =>
      listing(parts[index]).pipe(
        Stream.map((partition): Item => {
          crashPointSync("listed")
          tallyOf(index).listed++
          return { _tag: "Listed", part: index, partition }
        }),
        Stream.concat(Stream.succeed<Item>({ _tag: "End", part: index }))
      )
    ),
    { concurrency: options.listConcurrency }
  ).pipe(
    Stream.mapEffect(
      (item): Effect.Effect<Fetched, BlobFailure | IntegrityError> =>
        item._tag === "End" ? Effect.succeed(item) : Effect.map(toRow(item.partition), (row) => ({ _tag: "Row", part: item.part, row })),
      { concurrency: options.concurrency, unordered: true }
    ),
    Stream.runForEach((item) =>
      Effect.gen(function*() {
        const t = tallyOf(item.part)
        if (item._tag === "End") t.ended = true
        else {
          yield* accept(item.part, item.row)
          t.accepted++
        }
        if (t.ended && t.accepted === t.listed) yield* finishPart(item.part)
      })
    ),
    // An aborted run leaves its open files `.partial`: RollingWriter renames only on finish.
    Effect.ensuring(Effect.suspend(() => Effect.forEach(writers.values(), (w) => Scope.close(w.scope, Exit.void), { discard: true })))
  )
  const finished = [...checkpoints.values()].sort((a, b) => a.part - b.part)

  const manifest: Manifest = {
    formatVersion: 1,
    catalogHrn: effective.catalogHrn,
    layerId: effective.layerId,
    layerType: effective.layerType,
    version: effective.version,
    ...(effective.snapshot === undefined ? {} : { snapshot: effective.snapshot }),
    contentType: effective.contentType,
    ...(effective.contentEncoding === undefined ? {} : { contentEncoding: effective.contentEncoding }),
    mode: effective.mode,
    ...(effective.baseVersion === undefined ? {} : { baseVersion: effective.baseVersion }),
    partitions: finished.reduce((n, c) => n + c.partitions, 0),
    deleted: finished.reduce((n, c) => n + c.deleted, 0),
    bytes: finished.reduce((n, c) => n + c.bytes, 0),
    files: finished.flatMap((c) => c.files),
    startedAt,
    finishedAt: new Date().toISOString(),
    tool: { name: TOOL.name, version: TOOL.version }
  }
  yield* crashPoint("manifest")
  yield* writeJsonAtomic(path.join(dir, MANIFEST), manifest)
  yield* crashPoint("committed")
  yield* Effect.promise(() => fs.rm(partsDir, { recursive: true, force: true }))
  if (effective.layerType === "versioned") yield* advanceCursor(options.out, effective, manifest.finishedAt)
  return { _tag: "Exported", dir, manifest, counters } satisfies ExportResult
})
