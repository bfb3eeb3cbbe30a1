import * as path from "node:path"
import { type ByteOutput, FileOutput, type Landing } from "./FileOutput.ts"
import type { FormatWriter, FormatWriterOptions } from "./FormatWriter.ts"
import { describeStoreFailure, isObjectStore, joinKey, parseStoreUrl, s3Client, STORE_FORMS } from "./ObjectStore.ts"
import { parquetCodec, type ParquetCompression } from "./ParquetCodecs.ts"
import type { FieldIds } from "./ParquetFieldIds.ts"
import { type RowBatch, rowBytes } from "./RowBatch.ts"
import { describeSinkFailure, RejectedRow, SinkFailure, type SinkFailureFields } from "./SinkFailure.ts"
import type { FileFormat, RecordedFile } from "./WrittenFile.ts"

/**
 * The files of one writer, synchronously: rolling `part-<shard>-<seq>.<ext>` files per format, each up
 * to maxFileBytes, written as `.partial` files in a local directory or streamed as multipart uploads
 * or staged blocks into an object store (`dir` an `s3://`, `gs://`, `az://` or `abfss://` URL), by the format writers it is given (`Writers`: these
 * plain ones, or decode's decoding writers). Runs where the encoder runs (src/encoder: inline or on
 * its thread), which chooses the writers; RollingWriter is its Effect face.
 */

export interface Settings {
  /** A local directory or an object-store URL (`s3://bucket/prefix`, `gs://…`, `az://…`, `abfss://…`). */
  readonly dir: string
  readonly shard: string
  readonly formats: ReadonlyArray<FileFormat>
  readonly heretile: boolean
  readonly metadata: Readonly<Record<string, string>>
  readonly compression: ParquetCompression
  readonly maxFileBytes: number
  readonly rowGroupBytes: number
  readonly createdBy: string
  /** Parquet: the field id of each column (Iceberg tables); the files' column statistics come back with them. */
  readonly fieldIds?: FieldIds | undefined
}

/** Makes the output of the file `name` (relative to `dir`). */
export type OutputFactory = (name: string) => ByteOutput

const failed = ({ path, reason, message }: SinkFailureFields): never => {
  throw new SinkFailure(path, reason, message)
}

/** Local `.partial` files, or uploads into the object store `dir` names. */
export const loadOutputs = async (dir: string): Promise<OutputFactory> => {
  if (!isObjectStore(dir)) return (name) => FileOutput.create(path.join(dir, `${name}.partial`))
  const url = parseStoreUrl(dir)
  if (url === undefined) throw new Error(`${dir} is not an object-store URL this version writes (${STORE_FORMS})`)
  if (url.scheme === "az" || url.scheme === "abfss") {
    const [{ azureContainer, describeAzureFailure }, { AzureOutput }] = await Promise.all([
      import("./Azure.ts"),
      import("./AzureOutput.ts")
    ])
    const { client } = await azureContainer(url).catch((cause) => failed(describeAzureFailure(dir, "write", cause)))
    return (name) => new AzureOutput(client.getBlockBlobClient(joinKey(url.prefix, name)), `${dir}/${name}`)
  }
  const [client, { S3Output }] = await Promise.all([
    s3Client(url.scheme).catch((cause) => failed(describeStoreFailure(dir, "write", cause))),
    import("./S3Output.ts")
  ])
  return (name) => new S3Output(client, url.bucket, joinKey(url.prefix, name), `${dir}/${name}`)
}

/** Uploads in flight are behind (object stores): await this before writing more; undefined when not. */
export const loadBacklog = async (dir: string): Promise<() => Promise<void> | undefined> =>
  isObjectStore(dir) ? (await import("./PartedOutput.ts")).backlog : () => undefined

/** Makes the writer of one file of a format. */
export type WriterFactory = (options: FormatWriterOptions, compression: ParquetCompression) => FormatWriter

/** The file writer of each format of one Files. */
export type Writers = { -readonly [F in FileFormat]?: WriterFactory }

/** The plain writers of these formats (raw columns), each loaded only when asked for (apache-arrow alone costs 200 ms to load). */
export const loadWriters = async (formats: ReadonlyArray<FileFormat>): Promise<Writers> => {
  const factories: Writers = {}
  if (formats.includes("parquet")) {
    const { ParquetFileWriter } = await import("./ParquetFileWriter.ts")
    factories.parquet = (options, compression) =>
      new ParquetFileWriter({ ...options, codec: parquetCodec(compression) })
  }
  if (formats.includes("arrow")) {
    const { ArrowFileWriter } = await import("./ArrowFileWriter.ts")
    factories.arrow = (options) => new ArrowFileWriter(options)
  }
  return factories
}

/** A finished file, durable where it went, and what makes it visible under its final name (RollingWriter publishes it). */
export interface CompletedFile extends RecordedFile {
  readonly landing: Landing
}

/** A file whose footer is written, its output still settling (uploads finishing). */
interface ClosedFile extends RecordedFile {
  readonly output: ByteOutput
}

class FileRoller {
  private current: { readonly writer: FormatWriter; readonly name: string } | undefined
  private nextSeq = 0
  private readonly completed: Array<ClosedFile> = []

  constructor(
    private readonly format: FileFormat,
    private readonly settings: Settings,
    private readonly factory: WriterFactory,
    private readonly outputs: OutputFactory
  ) {}

  /** The file an error most likely concerns. */
  get activePath(): string {
    return this.current ? this.current.writer.output.path : this.settings.dir
  }

  add(batch: RowBatch): void {
    // Rows go to the open file in runs. A run ends with the row that fills the row group or, at the
    // compression seen so far, the file: so groups and files end where they would row by row.
    let from = 0
    while (from < batch.length) {
      const current = this.current ?? this.open()
      const { writer } = current
      const room = Math.min((this.settings.maxFileBytes - writer.estimatedBytes) / writer.ratio, writer.groupRoom)
      let to = from
      let bytes = 0
      do bytes += rowBytes(batch, to++)
      while (to < batch.length && bytes < room)
      writer.add(batch, from, to, bytes)
      if (writer.estimatedBytes >= this.settings.maxFileBytes) this.completeCurrent()
      from = to
    }
  }

  get buffered(): number {
    return this.current?.writer.buffered ?? 0
  }

  /** Writes the open file's buffered rows as a row group now. */
  flushGroup(): void {
    this.current?.writer.flush()
  }

  start(): void {
    this.current ??= this.open()
  }

  completeAll(): ReadonlyArray<ClosedFile> {
    if (this.current === undefined && this.completed.length === 0) this.open()
    if (this.current !== undefined) this.completeCurrent()
    return this.completed
  }

  abandon(): void {
    this.current?.writer.abandon()
    this.current = undefined
  }

  private open(): { readonly writer: FormatWriter; readonly name: string } {
    const name = `part-${this.settings.shard}-${String(this.nextSeq++).padStart(5, "0")}.${this.format}`
    const output = this.outputs(name)
    const options: FormatWriterOptions = {
      path: output.path,
      output,
      heretile: this.settings.heretile,
      metadata: this.settings.metadata,
      rowGroupBytes: this.settings.rowGroupBytes,
      createdBy: this.settings.createdBy,
      ...(this.settings.fieldIds === undefined ? {} : { fieldIds: this.settings.fieldIds })
    }
    const writer = this.factory(options, this.settings.compression)
    this.current = { writer, name }
    return this.current
  }

  private completeCurrent(): void {
    const { writer, name } = this.current!
    const content = writer.finish()
    this.current = undefined
    this.completed.push({ path: name, format: this.format, ...content, output: writer.output })
  }
}

/**
 * The rolling files of every format of one writer. After a failure the files are in an unknown
 * state: every later call fails with the first error.
 */
export class Files {
  private readonly rollers: ReadonlyArray<FileRoller>
  private failure: SinkFailure | RejectedRow | undefined

  /**
   * Creates the first file of each format at once (so a directory that cannot take files fails here,
   * and an interrupted writer leaves its `.partial` files). `writers` has one for each of the
   * settings' formats, `outputs` from `loadOutputs(settings.dir)`.
   */
  constructor(settings: Settings, writers: Writers, outputs: OutputFactory) {
    this.rollers = settings.formats.map((format) => new FileRoller(format, settings, writers[format]!, outputs))
    for (const roller of this.rollers) this.attempt(roller, "create", () => roller.start())
  }

  add(batch: RowBatch): void {
    for (const roller of this.rollers) this.attempt(roller, "write", () => roller.add(batch))
  }

  /** Row bytes buffered for row groups (each format buffers the same rows). */
  get buffered(): number {
    let most = 0
    for (const roller of this.rollers) most = Math.max(most, roller.buffered)
    return most
  }

  /** Writes the buffered rows as row groups now. */
  flushGroups(): void {
    for (const roller of this.rollers) this.attempt(roller, "write", () => roller.flushGroup())
  }

  /**
   * Writes what is buffered and the footers, then waits until every file is durable where it went
   * (flushed to disk under its `.partial` name, or every part uploaded); none is visible yet.
   */
  async complete(): Promise<ReadonlyArray<CompletedFile>> {
    const closed: Array<ClosedFile> = []
    for (const roller of this.rollers) closed.push(...this.attempt(roller, "complete", () => roller.completeAll()))
    const files: Array<CompletedFile> = []
    for (const { output, ...file } of closed) {
      try {
        const landing = await output.settle()
        files.push({
          ...file,
          landing,
          ...(landing._tag === "Stored" && landing.etag !== undefined ? { etag: landing.etag } : {})
        })
      } catch (cause) {
        const { path, reason, message } = describeSinkFailure(output.path, "complete", cause)
        throw this.failure = new SinkFailure(path, reason, message)
      }
    }
    return files
  }

  /** Closes the files as they are (they stay `.partial`). Never throws. */
  abandon(): void {
    for (const roller of this.rollers) roller.abandon()
  }

  private attempt<A>(roller: FileRoller, doing: string, run: () => A): A {
    if (this.failure !== undefined) throw this.failure
    try {
      return run()
    } catch (cause) {
      // A row the writer rejects (a blob that does not decode, --on-decode-error fail) is no failure of the files.
      if (cause instanceof RejectedRow) throw this.failure = cause
      const { path, reason, message } = describeSinkFailure(roller.activePath, doing, cause)
      throw this.failure = new SinkFailure(path, reason, message)
    }
  }
}

/**
 * The writers of one encoder (thread), by id. Rows buffered for row groups across all of them are
 * bounded by twice the largest row group size: beyond it the fullest writer's row group is written
 * early. So exporting many parts at once costs no more memory than two full row groups, at the price
 * of smaller row groups.
 */
export class OpenFiles {
  private readonly files = new Map<number, { readonly files: Files; readonly rowGroupBytes: number }>()

  open(id: number, settings: Settings, writers: Writers, outputs: OutputFactory): void {
    this.files.set(id, { files: new Files(settings, writers, outputs), rowGroupBytes: settings.rowGroupBytes })
  }

  add(id: number, batch: RowBatch): void {
    this.of(id).add(batch)
    let budget = 0
    let buffered = 0
    let fullest: Files | undefined
    for (const open of this.files.values()) {
      budget = Math.max(budget, 2 * open.rowGroupBytes)
      buffered += open.files.buffered
      if (fullest === undefined || open.files.buffered > fullest.buffered) fullest = open.files
    }
    if (buffered > budget) fullest!.flushGroups()
  }

  async complete(id: number): Promise<ReadonlyArray<CompletedFile>> {
    const completed = await this.of(id).complete()
    this.files.delete(id)
    return completed
  }

  abandon(id: number): void {
    this.files.get(id)?.files.abandon()
    this.files.delete(id)
  }

  private of(id: number): Files {
    const open = this.files.get(id)
    if (open === undefined) throw new Error(`no open writer ${id}`)
    return open.files
  }
}
