import * as fs from "node:fs"
import * as path from "node:path"
import type { FormatWriter, FormatWriterOptions } from "./FormatWriter.ts"
import { parquetCodec, type ParquetCompression } from "./ParquetCodecs.ts"
import { rowBytes, type RowBatch } from "./RowBatch.ts"
import { describeSinkFailure, SinkFailure } from "./SinkFailure.ts"

/**
 * The files of one writer, synchronously: rolling `part-<shard>-<seq>.<ext>.partial` files per format,
 * each up to maxFileBytes. Runs on the encoder thread (Encoder.ts); RollingWriter is its Effect face.
 */

export type FileFormat = "parquet" | "arrow"

export interface Settings {
  readonly dir: string
  readonly shard: string
  readonly formats: ReadonlyArray<FileFormat>
  readonly heretile: boolean
  readonly metadata: Readonly<Record<string, string>>
  readonly compression: ParquetCompression
  readonly maxFileBytes: number
  readonly rowGroupBytes: number
  readonly createdBy: string
}

export interface WrittenFile {
  /** relative to `dir` */
  readonly path: string
  readonly format: FileFormat
  readonly rows: number
  readonly bytes: number
  readonly sha256: string
}

/** Makes the writer of one file of a format. */
export type WriterFactory = (options: FormatWriterOptions, compression: ParquetCompression) => FormatWriter
export type WriterFactories = Partial<Record<FileFormat, WriterFactory>>

/** The writers of `formats`, each loaded only when asked for (apache-arrow alone costs 200 ms to load). */
export const loadWriters = async (formats: ReadonlyArray<FileFormat>): Promise<WriterFactories> => {
  const factories: { -readonly [F in FileFormat]?: WriterFactory } = {}
  if (formats.includes("parquet")) {
    const { ParquetFileWriter } = await import("./ParquetFileWriter.ts")
    factories.parquet = (options, compression) => new ParquetFileWriter({ ...options, codec: parquetCodec(compression) })
  }
  if (formats.includes("arrow")) {
    const { ArrowFileWriter } = await import("./ArrowFileWriter.ts")
    factories.arrow = (options) => new ArrowFileWriter(options)
  }
  return factories
}

/** A finished file, written and flushed to disk under its `.partial` name, to be renamed to `finalPath`. */
export interface CompletedFile extends WrittenFile {
  readonly partialPath: string
  readonly finalPath: string
}

class FileRoller {
  private current: { readonly writer: FormatWriter; readonly name: string } | undefined
  private nextSeq = 0
  private readonly completed: Array<CompletedFile> = []

  constructor(
    private readonly format: FileFormat,
    private readonly settings: Settings,
    private readonly factory: WriterFactory
  ) {}

  /** The file an error most likely concerns. */
  get activePath(): string {
    return this.current ? this.partialPath(this.current.name) : this.settings.dir
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

  start(): void {
    this.current ??= this.open()
  }

  completeAll(): ReadonlyArray<CompletedFile> {
    if (this.current === undefined && this.completed.length === 0) this.open()
    if (this.current !== undefined) this.completeCurrent()
    return this.completed
  }

  abandon(): void {
    this.current?.writer.abandon()
    this.current = undefined
  }

  private partialPath(name: string): string {
    return path.join(this.settings.dir, `${name}.partial`)
  }

  private open(): { readonly writer: FormatWriter; readonly name: string } {
    const name = `part-${this.settings.shard}-${String(this.nextSeq++).padStart(5, "0")}.${this.format}`
    const options: FormatWriterOptions = {
      path: this.partialPath(name),
      heretile: this.settings.heretile,
      metadata: this.settings.metadata,
      rowGroupBytes: this.settings.rowGroupBytes,
      createdBy: this.settings.createdBy
    }
    const writer = this.factory(options, this.settings.compression)
    this.current = { writer, name }
    return this.current
  }

  private completeCurrent(): void {
    const { writer, name } = this.current!
    const content = writer.finish()
    this.current = undefined
    const partialPath = this.partialPath(name)
    fsyncFile(partialPath)
    this.completed.push({ path: name, format: this.format, ...content, partialPath, finalPath: path.join(this.settings.dir, name) })
  }
}

const fsyncFile = (file: string) => {
  const fd = fs.openSync(file, "r+")
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The rolling files of every format of one writer. After a failure the files are in an unknown
 * state: every later call fails with the first error.
 */
export class Files {
  private readonly rollers: ReadonlyArray<FileRoller>
  private failure: SinkFailure | undefined

  /**
   * Creates the first file of each format at once (so a directory that cannot take files fails here,
   * and an interrupted writer leaves its `.partial` files). `writers` from `loadWriters(settings.formats)`.
   */
  constructor(settings: Settings, writers: WriterFactories) {
    this.rollers = settings.formats.map((format) => new FileRoller(format, settings, writers[format]!))
    for (const roller of this.rollers) this.attempt(roller, "create", () => roller.start())
  }

  add(batch: RowBatch): void {
    for (const roller of this.rollers) this.attempt(roller, "write", () => roller.add(batch))
  }

  /** Writes what is buffered and the footers, flushes the files to disk; they keep their `.partial` names. */
  complete(): ReadonlyArray<CompletedFile> {
    const completed: Array<CompletedFile> = []
    for (const roller of this.rollers) completed.push(...this.attempt(roller, "complete", () => roller.completeAll()))
    return completed
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
      const { path, reason, message } = describeSinkFailure(roller.activePath, doing, cause)
      throw this.failure = new SinkFailure(path, reason, message)
    }
  }
}
