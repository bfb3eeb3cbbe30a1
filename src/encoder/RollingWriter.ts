import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import type { DecodeCounts, DecodeSettings } from "../decode/Decoder.ts"
import { publish } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import { defaultParquetCompression, type ParquetCompression, parquetCompressions } from "../sinks/ParquetCodecs.ts"
import type { FieldIds } from "../sinks/ParquetFieldIds.ts"
import type { RowBatch } from "../sinks/RowBatch.ts"
import { fromCause, SinkError } from "../sinks/SinkError.ts"
import type { OutputFormat, RecordedFile } from "../sinks/WrittenFile.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import { Encoder, type EncoderError, type EncoderWorkload } from "./Encoder.ts"
import type { Settings } from "./Writers.ts"

export type { OutputFormat } from "../sinks/WrittenFile.ts"

export interface Options {
  /** A local directory, or an object-store URL (`s3://bucket/prefix`) */
  readonly dir: string
  /** goes into file names `part-<shard>-<seq>` (letters, digits, `_`, `-`), so that workers writing one directory never collide */
  readonly shard?: number | string
  /** `both` writes every row to a Parquet and to an Arrow file */
  readonly format: OutputFormat
  /** adds the tile_* columns, derived from the partition ids (null where an id is not a HERE tile) */
  readonly heretile?: boolean
  /** file key-value metadata: catalog_hrn, layer_id, layer_type, content_type, ... */
  readonly metadata: Readonly<Record<string, string>>
  /** Parquet page compression; default zstd */
  readonly compression?: ParquetCompression
  /** a new file is started once the current one reaches this size; default 256 MiB */
  readonly maxFileBytes?: number
  /** row bytes per Parquet row group / Arrow record batch; default maxFileBytes / 4, at most 64 MiB */
  readonly rowGroupBytes?: number
  /** Parquet `created_by`; default "catalog-export" */
  readonly createdBy?: string
  /** What the rows are like: the Encoder decides by it where to encode them. */
  readonly workload?: EncoderWorkload
  /** Decode the blobs into columns (`--decode`); absent: the raw columns. */
  readonly decode?: DecodeSettings | undefined
  /**
   * Parquet only: the field id of each column by its path (an Iceberg table's schema, see
   * sinks/iceberg/TableSchema.ts); the written files then carry their columns' statistics.
   */
  readonly fieldIds?: FieldIds | undefined
}

export interface RollingWriter {
  /** Hands the rows to the encoder (the batch's buffers move there); done once it has taken them. */
  readonly write: (batch: RowBatch) => Effect.Effect<void, EncoderError>
  /**
   * Completes the open files, fsyncs them and renames them from `.partial` to their final names (on
   * an object store: completes their multipart uploads). Without a successful `finish` (an error, an
   * interruption, a scope closed early) no file is visible under its final name. Writes at least one
   * file per format, so an empty export still has a schema to read.
   */
  readonly finish: Effect.Effect<ReadonlyArray<RecordedFile>, EncoderError>
  /** After `finish`, for a decoding writer: what decoding did to its rows. */
  readonly decoded: () => DecodeCounts | undefined
}

export const DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024
const MAX_DEFAULT_ROW_GROUP_BYTES = 64 * 1024 * 1024
const MAX_ROW_GROUP_BYTES = 1024 * 1024 * 1024

const invalid = (dir: string, message: string) =>
  new SinkError({ path: dir, reason: "InvalidOptions", message: `Invalid file writer options for ${dir}: ${message}` })

const isPositiveInteger = (n: number) => Number.isSafeInteger(n) && n > 0

const settingsOf = (options: Options): Effect.Effect<Settings, SinkError> => {
  const dir = isObjectStore(options.dir) ? options.dir.replace(/\/+$/, "") : path.resolve(options.dir)
  const shard = String(options.shard ?? 0)
  const compression = options.compression ?? defaultParquetCompression
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES
  const rowGroupBytes = options.rowGroupBytes ??
    Math.min(MAX_DEFAULT_ROW_GROUP_BYTES, Math.max(1, Math.floor(maxFileBytes / 4)))
  if (!/^[A-Za-z0-9_-]+$/.test(shard)) {
    return Effect.fail(invalid(dir, `shard "${shard}" must be letters, digits, _ or -`))
  }
  if (!["parquet", "arrow", "both"].includes(options.format)) {
    return Effect.fail(invalid(dir, `format "${options.format}" must be parquet, arrow or both`))
  }
  if (!parquetCompressions.includes(compression)) {
    return Effect.fail(invalid(dir, `compression "${compression}" must be one of ${parquetCompressions.join(", ")}`))
  }
  if (!isPositiveInteger(maxFileBytes)) return Effect.fail(invalid(dir, "maxFileBytes must be a positive integer"))
  if (!isPositiveInteger(rowGroupBytes) || rowGroupBytes > MAX_ROW_GROUP_BYTES) {
    return Effect.fail(invalid(dir, "rowGroupBytes must be a positive integer of at most 1 GiB"))
  }
  if (options.fieldIds !== undefined && options.format !== "parquet") {
    return Effect.fail(invalid(dir, `field ids (a table's columns) need format "parquet", not "${options.format}"`))
  }
  const badKey = Object.entries(options.metadata).find(([, value]) => typeof value !== "string")
  if (badKey) return Effect.fail(invalid(dir, `metadata "${badKey[0]}" must be a string`))
  return Effect.succeed({
    dir,
    shard,
    formats: options.format === "both" ? ["parquet", "arrow"] : [options.format],
    heretile: options.heretile ?? false,
    metadata: options.metadata,
    compression,
    maxFileBytes,
    rowGroupBytes,
    createdBy: options.createdBy ?? "catalog-export",
    ...(options.decode === undefined ? {} : { decode: options.decode }),
    ...(options.fieldIds === undefined ? {} : { fieldIds: options.fieldIds })
  })
}

// Makes the renames durable. Best effort: some file systems cannot fsync a directory.
const fsyncDirectory = (dir: string) =>
  Effect.promise(async () => {
    try {
      const handle = await fs.promises.open(dir, "r")
      await handle.sync().finally(() => handle.close())
    } catch {
      // the renames are still atomic, only not yet durable
    }
  })

/** Writes rows to rolling Parquet and/or Arrow files under `options.dir` (created if missing), encoded by the Encoder. */
export const make: (options: Options) => Effect.Effect<RollingWriter, EncoderError, Scope.Scope | Encoder> = Effect.fn(
  "RollingWriter.make"
)(
  function*(options: Options) {
    const settings = yield* settingsOf(options)
    const remote = isObjectStore(settings.dir)
    if (!remote) {
      yield* Effect.tryPromise({
        try: () => fs.promises.mkdir(settings.dir, { recursive: true }),
        catch: (cause) => fromCause(settings.dir, "create the output directory", cause)
      })
    }
    const encoder = yield* Encoder
    const probe = yield* CrashProbe

    let failure: EncoderError | undefined
    let finishing = false
    let result: ReadonlyArray<RecordedFile> | undefined
    let decoded: DecodeCounts | undefined

    const workload = { ...options.workload, remote, decoding: options.decode !== undefined }
    const session = yield* Effect.acquireRelease(
      encoder.open(settings, workload),
      (session) => (result === undefined ? session.abandon : Effect.void)
    )

    // After a failure the files are in an unknown state: every later call fails with the first error.
    const guarded = <A>(effect: Effect.Effect<A, EncoderError>): Effect.Effect<A, EncoderError> =>
      Effect.suspend(() => (failure ? Effect.fail(failure) : effect)).pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            failure ??= error
          })
        )
      )

    const write = (batch: RowBatch): Effect.Effect<void, EncoderError> =>
      guarded(
        Effect.suspend(
          () => (finishing ? Effect.dieMessage("RollingWriter.write called after finish") : session.add(batch))
        )
      )

    const completeAndRename = Effect.gen(function*() {
      finishing = true
      const { files: completed, decoded: counts } = yield* session.complete
      decoded = counts
      return yield* Effect.uninterruptible(
        Effect.gen(function*() {
          const written: Array<RecordedFile> = []
          for (const file of completed) {
            const etag = yield* publish(settings.dir, file)
            probe.reached("renamed")
            const { path: name, format, rows, bytes, sha256, columns } = file
            written.push({
              path: name,
              format,
              rows,
              bytes,
              sha256,
              ...(etag === undefined ? {} : { etag }),
              ...(columns === undefined ? {} : { columns })
            })
          }
          if (!remote) yield* fsyncDirectory(settings.dir)
          result = written
          return result
        })
      )
    })

    const finish = guarded(
      Effect.suspend(() =>
        result !== undefined
          ? Effect.succeed(result)
          : finishing
          ? Effect.dieMessage("RollingWriter.finish called while it is already running")
          : completeAndRename
      )
    ).pipe(Effect.withSpan("RollingWriter.finish"))

    return { write, finish, decoded: () => decoded } satisfies RollingWriter
  }
)
