import { describe, expect, it } from "@effect/vitest"
import { tableFromIPC } from "apache-arrow"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as fs from "node:fs"
import * as path from "node:path"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import { SinkError } from "../../src/sinks/SinkError.ts"
import {
  expectedRecord,
  listDir,
  makeRows,
  metadata,
  query,
  sha256File,
  tempDirs,
  type TestRow,
  withDuckDB,
  writeRows
} from "./support.ts"

const newDir = tempDirs()

/** Each test encodes on its own encoder thread, as one export does. */
const onThread = Effect.provide(Encoder.thread)

const asSinkError = (error: unknown): SinkError => {
  expect(error).toBeInstanceOf(SinkError)
  return error as SinkError
}

describe("RollingWriter", () => {
  it.effect("rolls to a new file at maxFileBytes; the files together hold every row once, in order", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const maxFileBytes = 64 * 1024
      const rows = makeRows(600, { dataBytes: 1000 })
      const files = yield* writeRows(
        { dir, shard: 7, format: "parquet", metadata, maxFileBytes, compression: "none" },
        rows,
        50
      )

      expect(files.length).toBeGreaterThanOrEqual(8)
      expect(files.map((f) => f.path)).toEqual(files.map((_, i) => `part-7-${String(i).padStart(5, "0")}.parquet`))
      expect(files.reduce((sum, f) => sum + f.rows, 0)).toBe(rows.length)
      for (const file of files.slice(0, -1)) {
        expect(file.bytes).toBeGreaterThanOrEqual(maxFileBytes * 0.9)
        expect(file.bytes).toBeLessThan(maxFileBytes * 1.1)
      }
      expect(listDir(dir)).toEqual(files.map((f) => f.path))

      yield* Effect.promise(() =>
        withDuckDB(async (db) => {
          const list = files.map((f) => `'${path.join(dir, f.path)}'`).join(", ")
          const read = await query(
            db,
            `select partition, partition_version, data_handle, data_size, checksum, sha1(data) as data_sha1
             from read_parquet([${list}], filename = true, file_row_number = true) order by filename, file_row_number`
          )
          expect(read).toEqual(rows.map((row) => expectedRecord(row, false)))
          const perFile = await query(
            db,
            `select filename, count(*) as n from read_parquet([${list}], filename = true) group by filename order by filename`
          )
          expect(perFile.map((r) => Number(r.n))).toEqual(files.map((f) => f.rows))
        })
      )
    }).pipe(onThread))

  it.effect("writes the same bytes on the encoder thread as inline", () =>
    Effect.gen(function*() {
      const rows = makeRows(400, { heretile: true })
      const options = (dir: string) => ({
        dir,
        format: "both" as const,
        heretile: true,
        metadata,
        maxFileBytes: 32 * 1024
      })
      const [threadDir, inlineDir] = [newDir(), newDir()]
      const thread = yield* writeRows(options(threadDir), rows, 33).pipe(Effect.provide(Encoder.thread))
      const inline = yield* writeRows(options(inlineDir), rows, 33).pipe(Effect.provide(Encoder.inline))
      expect(thread.length).toBeGreaterThan(4)
      expect(thread).toEqual(inline)
      for (const file of thread) expect(sha256File(path.join(inlineDir, file.path))).toBe(file.sha256)
    }))

  it.effect("keeps compressed files close to maxFileBytes too", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const maxFileBytes = 128 * 1024
      // half random, half zeros: compresses about 2:1, so the rows buffered overstate the file's growth
      const rows = makeRows(1500, { dataBytes: 1000 }).map((row) => {
        if (row.data === null) return row
        const data = new Uint8Array(1000)
        data.set(row.data.subarray(0, 500))
        return { ...row, data }
      })
      const files = yield* writeRows({
        dir,
        format: "parquet",
        metadata,
        maxFileBytes,
        rowGroupBytes: 32 * 1024,
        compression: "zstd"
      }, rows)
      expect(files.length).toBeGreaterThan(3)
      for (const file of files.slice(0, -1)) {
        expect(file.bytes).toBeGreaterThanOrEqual(maxFileBytes * 0.8)
        expect(file.bytes).toBeLessThan(maxFileBytes * 1.2)
      }
    }).pipe(onThread))

  it.effect("reports for each file the sha256 and size of the bytes on disk", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const files = yield* writeRows(
        { dir, format: "both", metadata, maxFileBytes: 40 * 1024 },
        makeRows(300, { dataBytes: 700 })
      )
      expect(files.length).toBeGreaterThan(4)
      for (const file of files) {
        const onDisk = path.join(dir, file.path)
        expect(file.sha256).toBe(sha256File(onDisk))
        expect(file.bytes).toBe(fs.statSync(onDisk).size)
      }
    }).pipe(onThread))

  it.effect("with format both writes every row to Parquet and to Arrow files", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const rows = makeRows(250, { heretile: true })
      const files = yield* writeRows({ dir, format: "both", heretile: true, metadata, maxFileBytes: 48 * 1024 }, rows)
      const parquet = files.filter((f) => f.format === "parquet")
      const arrow = files.filter((f) => f.format === "arrow")
      expect(parquet.length).toBeGreaterThan(1)
      expect(arrow.length).toBeGreaterThan(1)
      expect(parquet.every((f) => f.path.endsWith(".parquet"))).toBe(true)
      expect(arrow.every((f) => f.path.endsWith(".arrow"))).toBe(true)
      expect(listDir(dir)).toEqual(files.map((f) => f.path).sort())

      const arrowRows = arrow.flatMap((f) =>
        tableFromIPC(fs.readFileSync(path.join(dir, f.path))).toArray().map((r) => r.partition as string)
      )
      expect(arrowRows).toEqual(rows.map((r) => r.partition))
      yield* Effect.promise(() =>
        withDuckDB(async (db) => {
          const list = parquet.map((f) => `'${path.join(dir, f.path)}'`).join(", ")
          const read = await query(
            db,
            `select partition from read_parquet([${list}], filename = true, file_row_number = true) order by filename, file_row_number`
          )
          expect(read.map((r) => r.partition)).toEqual(rows.map((r) => r.partition))
        })
      )
    }).pipe(onThread))

  it.effect("leaves every file .partial when the run fails, including files already rolled over", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const exit = yield* Effect.exit(Effect.scoped(
        Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "both", metadata, maxFileBytes: 16 * 1024 })
          yield* writer.write(batchOf(makeRows(100, { dataBytes: 1000 })))
          return yield* new SinkError({ path: dir, reason: "Io", message: "fetch failed" })
        })
      ))
      expect(Exit.isFailure(exit)).toBe(true)
      const names = listDir(dir)
      expect(names.filter((n) => n.endsWith(".parquet.partial")).length).toBeGreaterThan(2)
      expect(names.filter((n) => n.endsWith(".arrow.partial")).length).toBeGreaterThan(2)
      expect(names.every((n) => n.endsWith(".partial"))).toBe(true)
    }).pipe(onThread))

  it.effect("leaves every file .partial when the fiber is interrupted", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const written = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(Effect.scoped(
        Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata, maxFileBytes: 16 * 1024 })
          yield* writer.write(batchOf(makeRows(100, { dataBytes: 1000 })))
          yield* Deferred.succeed(written, undefined)
          return yield* Effect.never
        })
      ))
      yield* Deferred.await(written)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      const names = listDir(dir)
      expect(names.length).toBeGreaterThan(2)
      expect(names.every((n) => /^part-0-\d{5}\.parquet\.partial$/.test(n))).toBe(true)
    }).pipe(onThread))

  it.effect("leaves every file .partial when the scope closes without finish", () =>
    Effect.gen(function*() {
      const dir = newDir()
      yield* Effect.scoped(
        Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "arrow", metadata })
          yield* writer.write(batchOf(makeRows(10)))
        })
      )
      expect(listDir(dir)).toEqual(["part-0-00000.arrow.partial"])
    }).pipe(onThread))

  it.effect("fails with a DiskFull SinkError naming the file when the disk is full, and never renames", () =>
    Effect.gen(function*() {
      const dir = newDir()
      // writes to /dev/full fail with ENOSPC
      fs.symlinkSync("/dev/full", path.join(dir, "part-0-00000.parquet.partial"))
      const { afterwards, error } = yield* Effect.scoped(
        Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata, rowGroupBytes: 4096 })
          const error = asSinkError(yield* Effect.flip(writer.write(batchOf(makeRows(50, { dataBytes: 1000 })))))
          const afterwards = yield* Effect.flip(writer.finish)
          return { error, afterwards }
        })
      )
      expect(error.reason).toBe("DiskFull")
      expect(error.path).toBe(path.join(dir, "part-0-00000.parquet.partial"))
      expect(error.message).toContain(error.path)
      expect(error.message).toContain("no space left")
      // the failed writer refuses to finish, so nothing gets a final name
      expect(asSinkError(afterwards)).toMatchObject({ reason: error.reason, path: error.path, message: error.message })
      expect(listDir(dir)).toEqual(["part-0-00000.parquet.partial"])
    }).pipe(onThread))

  it.effect("fails with a SinkError naming the directory when the output directory cannot be created", () =>
    Effect.gen(function*() {
      const dir = newDir()
      fs.writeFileSync(path.join(dir, "not-a-directory"), "")
      const target = path.join(dir, "not-a-directory", "version=1")
      const error = asSinkError(
        yield* Effect.flip(Effect.scoped(RollingWriter.make({ dir: target, format: "parquet", metadata })))
      )
      expect(error.reason).toBe("NotFound")
      expect(error.path).toBe(target)
      expect(error.message).toContain(target)
    }).pipe(onThread))

  it.effect("refuses an int64 it cannot write exactly, and leaves the file .partial", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const rows = makeRows(3)
      const error = asSinkError(
        yield* Effect.flip(writeOnce(dir, [...rows, { ...rows[0]!, partition: "p-9", partitionVersion: 2 ** 53 + 2 }]))
      )
      expect(error.reason).toBe("InvalidRow")
      expect(error.message).toContain(`partition "p-9": partition_version ${2 ** 53 + 2} is not an exact int64`)
      expect(listDir(dir)).toEqual(["part-0-00000.parquet.partial"])
    }).pipe(onThread))

  it.effect("rejects invalid options with InvalidOptions", () =>
    Effect.gen(function*() {
      const dir = newDir()
      const bad: ReadonlyArray<Partial<RollingWriter.Options>> = [
        { maxFileBytes: 0 },
        { rowGroupBytes: 2 ** 31 },
        { shard: "a/b" },
        { format: "csv" as never },
        { compression: "lzo" as never }
      ]
      for (const options of bad) {
        const error = asSinkError(
          yield* Effect.flip(Effect.scoped(RollingWriter.make({ dir, format: "parquet", metadata, ...options })))
        )
        expect(error.reason).toBe("InvalidOptions")
      }
      expect(listDir(dir)).toEqual([])
    }).pipe(onThread))

  it.effect("overwrites a .partial left by a killed run, and finish can be asked twice", () =>
    Effect.gen(function*() {
      const dir = newDir()
      fs.writeFileSync(path.join(dir, "part-0-00000.parquet.partial"), "left over by a killed run")
      const rows = makeRows(20)
      const [first, second] = yield* Effect.scoped(
        Effect.gen(function*() {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata })
          yield* writer.write(batchOf(rows))
          return [yield* writer.finish, yield* writer.finish] as const
        })
      )
      expect(second).toEqual(first)
      expect(listDir(dir)).toEqual(["part-0-00000.parquet"])
      yield* Effect.promise(() =>
        withDuckDB(async (db) => {
          expect(await query(db, `select count(*) as n from read_parquet('${path.join(dir, "part-0-00000.parquet")}')`))
            .toEqual([{ n: 20n }])
        })
      )
    }).pipe(onThread))
})

/** All rows in one batch to one Parquet writer, then finish. */
const writeOnce = (dir: string, rows: ReadonlyArray<TestRow>) =>
  writeRows({ dir, format: "parquet", metadata }, rows, rows.length)
