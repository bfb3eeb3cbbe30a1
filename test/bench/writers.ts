/**
 * File writer benchmark: MB/s of payload and peak RSS for each Parquet codec and for Arrow IPC,
 * at 1 KiB, 64 KiB and 50 MB rows, against parquetjs-lite measured in the same run (the baseline).
 *
 *   npx tsx test/bench/writers.ts            256 MiB per run (six 50 MB rows), median of 3
 *   npx tsx test/bench/writers.ts --quick    64 MiB per run (two 50 MB rows), 1 run
 *   --only=zstd,arrow   only the writers whose name contains one of these (and the baseline)
 *   --sizes=1024,65536  only these row sizes (bytes; default 1024,65536,50000000)
 *   --dir=/dev/shm      where the files go (default: the OS temp dir); tmpfs takes the disk out
 *
 * Every configuration runs in its own child process so peak RSS (getrusage maxrss) is its own.
 * Every Parquet file is read back by DuckDB (row count and total data bytes) after the timing.
 */
import { tableFromIPC } from "apache-arrow"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as zlib from "node:zlib"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { ArrowFileWriter } from "../../src/sinks/ArrowFileWriter.ts"
import { FileOutput } from "../../src/sinks/FileOutput.ts"
import { type FormatWriter, type FormatWriterOptions, rangeBytes } from "../../src/sinks/FormatWriter.ts"
import { type ParquetCodec, parquetCodec, zstdCodec } from "../../src/sinks/ParquetCodecs.ts"
import { ParquetFileWriter } from "../../src/sinks/ParquetFileWriter.ts"
import { dataAt, type RowBatch, RowBatchBuilder } from "../../src/sinks/RowBatch.ts"
import { makePayload } from "./payload.ts"

const require = createRequire(import.meta.url)
const MiB = 1024 * 1024
const ROW_GROUP_BYTES = 64 * MiB
const ROWS_PER_WRITE = 64
const POOL_BYTES = 16 * MiB
const ROW_SIZES = [1024, 64 * 1024, 50_000_000]

/** Rows per batch: as many as the export collects, but no more than a row group holds (one 50 MB row). */
const rowsPerWrite = (rowSize: number) => Math.max(1, Math.min(ROWS_PER_WRITE, Math.floor(ROW_GROUP_BYTES / rowSize)))

/** A row size as the table's column names say it: 1K, 64K, 50M. */
const sizeLabel = (rowSize: number) =>
  rowSize >= 1_000_000 ? `${Math.round(rowSize / 1_000_000)}M` : `${Math.round(rowSize / 1024)}K`

// ---------------------------------------------------------------- rows

/** Batches of rows as the export collects them: each blob copied into the batch, as a fetched blob is. */
const batchSource = (rowSize: number) => {
  const pool = Array.from(
    { length: Math.max(2, Math.floor(POOL_BYTES / rowSize)) },
    (_, i) => makePayload(rowSize, i + 1)
  )
  const version = 2n ** 53n + 12345n
  return (from: number, to: number): RowBatch => {
    const builder = new RowBatchBuilder()
    for (let index = from; index < to; index++) {
      const data = pool[index % pool.length]!
      new DataView(data.buffer).setUint32(0, index)
      const hex = (index * 2654435761 >>> 0).toString(16).padStart(8, "0")
      builder.add(
        `${377894440 + index}`,
        version,
        `${hex}-1f0e-4c2a-9b3d-${hex}${hex.slice(0, 4)}`,
        rowSize,
        hex.repeat(5),
        data
      )
    }
    return builder.take()
  }
}

// ---------------------------------------------------------------- writers under test

interface Sink {
  add(batch: RowBatch): Promise<void> | void
  close(): Promise<ReadonlyArray<string>> | ReadonlyArray<string>
}

const formatWriterSink = (make: (options: FormatWriterOptions) => FormatWriter, file: string): Sink => {
  const writer = make({
    path: file,
    heretile: false,
    metadata: { catalog_hrn: "hrn:here:data::bench:catalog" },
    rowGroupBytes: ROW_GROUP_BYTES,
    createdBy: "bench"
  })
  return {
    add: (batch) => writer.add(batch, 0, batch.length, rangeBytes(batch, 0, batch.length)),
    close: () => {
      writer.finish()
      return [file]
    }
  }
}

const parquetSink = (codec: () => ParquetCodec) => (dir: string) =>
  formatWriterSink((options) => new ParquetFileWriter({ ...options, codec: codec() }), path.join(dir, "out.parquet"))

const brotli = (quality: number) => (): ParquetCodec => ({
  name: "BROTLI",
  compress: (page) => zlib.brotliCompressSync(page, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: quality } })
})

const parquetjsLite = (compression: "UNCOMPRESSED" | "SNAPPY") => (dir: string, rowSize: number): Sink => {
  const parquet = require("parquetjs-lite")
  const file = path.join(dir, "out.parquet")
  const schema = new parquet.ParquetSchema({
    partition: { type: "UTF8" },
    partition_version: { type: "INT64" },
    data_handle: { type: "UTF8" },
    data_size: { type: "INT64", optional: true },
    checksum: { type: "UTF8", optional: true },
    data: { type: "BYTE_ARRAY", optional: true, compression, statistics: false }
  })
  let writer: any
  return {
    add: async (batch) => {
      writer ??= await parquet.ParquetWriter.openFile(schema, file, {
        rowGroupSize: Math.ceil(ROW_GROUP_BYTES / rowSize)
      })
      for (let i = 0; i < batch.length; i++) {
        const data = dataAt(batch, i)!
        await writer.appendRow({
          partition: batch.partition[i],
          partition_version: Number(batch.partitionVersion[i]), // parquetjs-lite cannot write exact int64
          data_handle: batch.dataHandle[i],
          data_size: batch.dataSize[i],
          checksum: batch.checksum[i],
          data: Buffer.from(data.buffer, data.byteOffset, data.byteLength)
        })
      }
    },
    close: async () => {
      await writer.close()
      return [file]
    }
  }
}

/** RollingWriter as the export uses it: batches encoded on the encoder thread (or inline). */
const rollingSink = (format: RollingWriter.OutputFormat, encoder: Layer.Layer<Encoder>) => (dir: string): Sink => {
  // the writer's scope is opened and closed by hand so the timing loop stays a plain loop
  const scope = Effect.runSync(Scope.make())
  const context = Effect.runSync(Layer.buildWithScope(encoder, scope))
  let writer: RollingWriter.RollingWriter | undefined
  return {
    add: async (batch) => {
      writer ??= await Effect.runPromise(
        RollingWriter.make({ dir, format, metadata: { catalog_hrn: "hrn:here:data::bench:catalog" } }).pipe(
          Scope.extend(scope),
          Effect.provide(context)
        )
      )
      await Effect.runPromise(writer.write(batch))
    },
    close: async () => {
      const files = await Effect.runPromise(writer!.finish)
      await Effect.runPromise(Scope.close(scope, Exit.void))
      return files.map((f) => path.join(dir, f.path))
    }
  }
}

const diskOnly = (dir: string): Sink => {
  const output = FileOutput.create(path.join(dir, "out.bin"))
  return {
    add: (batch) => {
      for (let i = 0; i < batch.length; i++) output.write(dataAt(batch, i)!)
    },
    close: () => {
      output.close()
      return []
    }
  }
}

interface Config {
  readonly name: string
  readonly make: (dir: string, rowSize: number) => Sink
}

const configs: ReadonlyArray<Config> = [
  { name: "parquetjs-lite 0.8.7 / none (baseline)", make: parquetjsLite("UNCOMPRESSED") },
  { name: "parquetjs-lite 0.8.7 / snappy", make: parquetjsLite("SNAPPY") },
  { name: "hyparquet-writer / none", make: parquetSink(() => parquetCodec("none")) },
  { name: "hyparquet-writer / snappy (hysnappy, wasm)", make: parquetSink(() => parquetCodec("snappy")) },
  { name: "hyparquet-writer / zstd --fast=3 (zstd-napi)", make: parquetSink(() => zstdCodec(-3)) },
  { name: "hyparquet-writer / zstd --fast=1 (zstd-napi)", make: parquetSink(() => zstdCodec(-1)) },
  { name: "hyparquet-writer / zstd -1 (zstd-napi) = default", make: parquetSink(() => parquetCodec("zstd")) },
  { name: "hyparquet-writer / zstd -3 (zstd-napi)", make: parquetSink(() => zstdCodec(3)) },
  { name: "hyparquet-writer / gzip -1 (node zlib)", make: parquetSink(() => parquetCodec("gzip")) },
  { name: "hyparquet-writer / brotli -1 (node zlib)", make: parquetSink(brotli(1)) },
  {
    name: "apache-arrow IPC file / none",
    make: (dir) => formatWriterSink((o) => new ArrowFileWriter(o), path.join(dir, "out.arrow"))
  },
  { name: "RollingWriter parquet (defaults, encoder thread)", make: rollingSink("parquet", Encoder.thread) },
  { name: "RollingWriter parquet (defaults, inline)", make: rollingSink("parquet", Encoder.inline) },
  { name: "RollingWriter both (defaults, encoder thread)", make: rollingSink("both", Encoder.thread) },
  { name: "ceiling: data bytes to disk + sha256 only", make: diskOnly },
  { name: "ceiling: making the rows only", make: () => ({ add: () => {}, close: () => [] }) }
]

// ---------------------------------------------------------------- child: one measured run

interface RunResult {
  readonly seconds: number
  readonly payloadBytes: number
  readonly fileBytes: number
  readonly peakRssBytes: number
  readonly rssBeforeBytes: number
  readonly verified: string
}

const verify = async (files: ReadonlyArray<string>, rows: number, payloadBytes: number): Promise<string> => {
  const parquet = files.filter((f) => f.endsWith(".parquet"))
  const arrow = files.filter((f) => f.endsWith(".arrow"))
  const notes: Array<string> = []
  if (parquet.length > 0) {
    // loaded only now, so its memory is not counted in the writer's peak RSS
    const { DuckDBInstance } = await import("@duckdb/node-api")
    const db = await DuckDBInstance.create()
    const connection = await db.connect()
    const list = parquet.map((f) => `'${f}'`).join(", ")
    const [result] = (await connection.runAndReadAll(
      `select count(*) as n, sum(octet_length(data)) as bytes from read_parquet([${list}])`
    )).getRowObjectsJS()
    connection.closeSync()
    db.closeSync()
    if (Number(result!.n) !== rows || Number(result!.bytes) !== payloadBytes) {
      throw new Error(`DuckDB read ${result!.n} rows / ${result!.bytes} bytes, expected ${rows} / ${payloadBytes}`)
    }
    notes.push("duckdb")
  }
  if (arrow.length > 0) {
    let n = 0
    for (const file of arrow) n += tableFromIPC(fs.readFileSync(file)).numRows
    if (n !== rows) throw new Error(`apache-arrow read ${n} rows, expected ${rows}`)
    notes.push("arrow")
  }
  return notes.join("+") || "-"
}

const runChild = async (
  configIndex: number,
  rowSize: number,
  totalBytes: number,
  outDir: string
): Promise<RunResult> => {
  const config = configs[configIndex]!
  const nextBatch = batchSource(rowSize)
  const dir = fs.mkdtempSync(path.join(outDir, "bench-writers-"))
  try {
    const rows = Math.ceil(totalBytes / rowSize)
    const sink = config.make(dir, rowSize)
    nextBatch(0, 1)
    const rssBeforeBytes = process.memoryUsage().rss
    const started = performance.now()
    const step = rowsPerWrite(rowSize)
    for (let i = 0; i < rows; i += step) await sink.add(nextBatch(i, Math.min(rows, i + step)))
    const files = await sink.close()
    const seconds = (performance.now() - started) / 1000
    const peakRssBytes = process.resourceUsage().maxRSS * 1024
    const fileBytes = fs.readdirSync(dir).reduce((sum, f) => sum + fs.statSync(path.join(dir, f)).size, 0)
    const payloadBytes = rows * rowSize
    const verified = await verify(files, rows, payloadBytes)
    return { seconds, payloadBytes, fileBytes, peakRssBytes, rssBeforeBytes, verified }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------- parent: all runs, table

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  const args = process.argv.slice(2)
  if (args[0] === "--child" || args[0] === "--child-named") {
    // --child-named: the export benchmark asks for one writer by name (its figure is a ratio's denominator).
    const index = args[0] === "--child" ? Number(args[1]) : configs.findIndex((c) => c.name === args[1])
    if (index < 0) throw new Error(`no writer named ${args[1]}`)
    const result = await runChild(index, Number(args[2]), Number(args[3]), args[4]!)
    process.stdout.write(JSON.stringify(result) + "\n")
    return
  }
  const quick = args.includes("--quick")
  const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",")
  const outDir = args.find((a) => a.startsWith("--dir="))?.slice("--dir=".length) ?? os.tmpdir()
  const sizes = args.find((a) => a.startsWith("--sizes="))?.slice("--sizes=".length).split(",").map(Number) ??
    ROW_SIZES
  const totalBytes = (quick ? 64 : 256) * MiB
  const repeats = quick ? 1 : 3
  const script = fileURLToPath(import.meta.url)
  console.log(
    `# writers: ${totalBytes / MiB} MiB payload per run, ${ROW_GROUP_BYTES / MiB} MiB row groups, median of ${repeats}`
  )
  console.log(`# output in ${outDir}`)
  console.log(`# ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), Node ${process.version}`)
  const table: Array<Record<string, string>> = []
  const baseline = new Map<number, number>()
  for (const [index, config] of configs.entries()) {
    if (only && !only.some((o) => config.name.includes(o)) && index !== 0) continue
    const row: Record<string, string> = { writer: config.name }
    for (const rowSize of sizes) {
      const runs: Array<RunResult> = []
      for (let r = 0; r < repeats; r++) {
        const out = execFileSync(process.execPath, [
          ...process.execArgv,
          script,
          "--child",
          String(index),
          String(rowSize),
          String(totalBytes),
          outDir
        ], {
          encoding: "utf8",
          maxBuffer: 16 * MiB
        })
        runs.push(JSON.parse(out.trim().split("\n").at(-1)!) as RunResult)
      }
      const mbps = median(runs.map((r) => r.payloadBytes / MiB / r.seconds))
      if (index === 0) baseline.set(rowSize, mbps)
      const label = sizeLabel(rowSize)
      row[`MB/s ${label}`] = mbps.toFixed(0)
      row[`x base ${label}`] = (mbps / baseline.get(rowSize)!).toFixed(2)
      row[`peak RSS MB ${label}`] = (median(runs.map((r) => r.peakRssBytes)) / MiB).toFixed(0)
      row[`RSS before MB ${label}`] = (median(runs.map((r) => r.rssBeforeBytes)) / MiB).toFixed(0)
      row[`size ratio ${label}`] = runs[0]!.fileBytes > 0
        ? (runs[0]!.payloadBytes / runs[0]!.fileBytes).toFixed(2)
        : "-"
      row["read back"] = runs[0]!.verified
      console.error(`${config.name} ${label}: ${mbps.toFixed(0)} MB/s`)
    }
    table.push(row)
  }
  const columns = Object.keys(table[0]!)
  console.log(`| ${columns.join(" | ")} |`)
  console.log(`|${columns.map(() => "---").join("|")}|`)
  for (const row of table) console.log(`| ${columns.map((c) => row[c] ?? "").join(" | ")} |`)
}

await main()
