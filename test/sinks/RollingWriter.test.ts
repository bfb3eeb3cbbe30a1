import { tableFromIPC } from "apache-arrow"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import * as RollingWriter from "../../src/sinks/RollingWriter.ts"
import { Encoder } from "../../src/sinks/Encoder.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"
import { SinkError } from "../../src/sinks/SinkError.ts"
import { expectedRecord, listDir, makeRows, metadata, query, sha256File, tempDir, type TestRow, withDuckDB, writeAll } from "./support.ts"

const dirs: Array<string> = []
const newDir = () => {
  const dir = tempDir()
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

const run = <A, E>(effect: Effect.Effect<A, E, Encoder>) => Effect.runPromise(Effect.provide(effect, Encoder.thread))
const runExit = <A, E>(effect: Effect.Effect<A, E, Encoder>) => Effect.runPromiseExit(Effect.provide(effect, Encoder.thread))
const fork = <A, E>(effect: Effect.Effect<A, E, Encoder>) => Effect.runFork(Effect.provide(effect, Encoder.thread))

const failureOf = <A, E>(exit: Exit.Exit<A, E>): SinkError => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const failure = Cause.failureOption(exit.cause)
  if (failure._tag === "None" || !(failure.value instanceof SinkError)) throw new Error(`expected a SinkError, got ${Cause.pretty(exit.cause)}`)
  return failure.value
}

describe("RollingWriter", () => {
  it("rolls to a new file at maxFileBytes; the files together hold every row once, in order", async () => {
    const dir = newDir()
    const maxFileBytes = 64 * 1024
    const rows = makeRows(600, { dataBytes: 1000 })
    const files = await writeAll({ dir, shard: 7, format: "parquet", metadata, maxFileBytes, compression: "none" }, rows, 50)

    expect(files.length).toBeGreaterThanOrEqual(8)
    expect(files.map((f) => f.path)).toEqual(files.map((_, i) => `part-7-${String(i).padStart(5, "0")}.parquet`))
    expect(files.reduce((sum, f) => sum + f.rows, 0)).toBe(rows.length)
    for (const file of files.slice(0, -1)) {
      expect(file.bytes).toBeGreaterThanOrEqual(maxFileBytes * 0.9)
      expect(file.bytes).toBeLessThan(maxFileBytes * 1.1)
    }
    expect(listDir(dir)).toEqual(files.map((f) => f.path))

    await withDuckDB(async (db) => {
      const list = files.map((f) => `'${path.join(dir, f.path)}'`).join(", ")
      const read = await query(
        db,
        `select partition, partition_version, data_handle, data_size, checksum, sha1(data) as data_sha1
         from read_parquet([${list}], filename = true, file_row_number = true) order by filename, file_row_number`
      )
      expect(read).toEqual(rows.map((row) => expectedRecord(row, false)))
      const perFile = await query(db, `select filename, count(*) as n from read_parquet([${list}], filename = true) group by filename order by filename`)
      expect(perFile.map((r) => Number(r.n))).toEqual(files.map((f) => f.rows))
    })
  })

  it("writes the same bytes on the encoder thread as inline", async () => {
    const rows = makeRows(400, { heretile: true })
    const options = (dir: string) => ({ dir, format: "both" as const, heretile: true, metadata, maxFileBytes: 32 * 1024 })
    const [threadDir, inlineDir] = [newDir(), newDir()]
    const onThread = await writeAll(options(threadDir), rows, 33, Encoder.thread)
    const inline = await writeAll(options(inlineDir), rows, 33, Encoder.inline)
    expect(onThread.length).toBeGreaterThan(4)
    expect(onThread).toEqual(inline)
    for (const file of onThread) expect(sha256File(path.join(inlineDir, file.path))).toBe(file.sha256)
  })

  it("keeps compressed files close to maxFileBytes too", async () => {
    const dir = newDir()
    const maxFileBytes = 128 * 1024
    // half random, half zeros: compresses about 2:1, so the rows buffered overstate the file's growth
    const rows = makeRows(1500, { dataBytes: 1000 }).map((row) => {
      if (row.data === null) return row
      const data = new Uint8Array(1000)
      data.set(row.data.subarray(0, 500))
      return { ...row, data }
    })
    const files = await writeAll({ dir, format: "parquet", metadata, maxFileBytes, rowGroupBytes: 32 * 1024, compression: "zstd" }, rows)
    expect(files.length).toBeGreaterThan(3)
    for (const file of files.slice(0, -1)) {
      expect(file.bytes).toBeGreaterThanOrEqual(maxFileBytes * 0.8)
      expect(file.bytes).toBeLessThan(maxFileBytes * 1.2)
    }
  })

  it("reports for each file the sha256 and size of the bytes on disk", async () => {
    const dir = newDir()
    const files = await writeAll({ dir, format: "both", metadata, maxFileBytes: 40 * 1024 }, makeRows(300, { dataBytes: 700 }))
    expect(files.length).toBeGreaterThan(4)
    for (const file of files) {
      const onDisk = path.join(dir, file.path)
      expect(file.sha256).toBe(sha256File(onDisk))
      expect(file.bytes).toBe(fs.statSync(onDisk).size)
    }
  })

  it("with format both writes every row to Parquet and to Arrow files", async () => {
    const dir = newDir()
    const rows = makeRows(250, { heretile: true })
    const files = await writeAll({ dir, format: "both", heretile: true, metadata, maxFileBytes: 48 * 1024 }, rows)
    const parquet = files.filter((f) => f.format === "parquet")
    const arrow = files.filter((f) => f.format === "arrow")
    expect(parquet.length).toBeGreaterThan(1)
    expect(arrow.length).toBeGreaterThan(1)
    expect(parquet.every((f) => f.path.endsWith(".parquet"))).toBe(true)
    expect(arrow.every((f) => f.path.endsWith(".arrow"))).toBe(true)
    expect(listDir(dir)).toEqual(files.map((f) => f.path).sort())

    const arrowRows = arrow.flatMap((f) => tableFromIPC(fs.readFileSync(path.join(dir, f.path))).toArray().map((r) => r.partition as string))
    expect(arrowRows).toEqual(rows.map((r) => r.partition))
    await withDuckDB(async (db) => {
      const list = parquet.map((f) => `'${path.join(dir, f.path)}'`).join(", ")
      const read = await query(db, `select partition from read_parquet([${list}], filename = true, file_row_number = true) order by filename, file_row_number`)
      expect(read.map((r) => r.partition)).toEqual(rows.map((r) => r.partition))
    })
  })

  it("leaves every file .partial when the run fails, including files already rolled over", async () => {
    const dir = newDir()
    const program = Effect.scoped(
      Effect.gen(function* () {
        const writer = yield* RollingWriter.make({ dir, format: "both", metadata, maxFileBytes: 16 * 1024 })
        yield* writer.write(batchOf(makeRows(100, { dataBytes: 1000 })))
        return yield* Effect.fail(new SinkError({ path: dir, reason: "Io", message: "fetch failed" }))
      })
    )
    const exit = await runExit(program)
    expect(Exit.isFailure(exit)).toBe(true)
    const names = listDir(dir)
    expect(names.filter((n) => n.endsWith(".parquet.partial")).length).toBeGreaterThan(2)
    expect(names.filter((n) => n.endsWith(".arrow.partial")).length).toBeGreaterThan(2)
    expect(names.every((n) => n.endsWith(".partial"))).toBe(true)
  })

  it("leaves every file .partial when the fiber is interrupted", async () => {
    const dir = newDir()
    const written = Effect.runSync(Deferred.make<void>())
    const fiber = fork(
      Effect.scoped(
        Effect.gen(function* () {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata, maxFileBytes: 16 * 1024 })
          yield* writer.write(batchOf(makeRows(100, { dataBytes: 1000 })))
          yield* Deferred.succeed(written, undefined)
          return yield* Effect.never
        })
      )
    )
    await Effect.runPromise(Deferred.await(written))
    const exit = await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    const names = listDir(dir)
    expect(names.length).toBeGreaterThan(2)
    expect(names.every((n) => /^part-0-\d{5}\.parquet\.partial$/.test(n))).toBe(true)
  })

  it("leaves every file .partial when the scope closes without finish", async () => {
    const dir = newDir()
    await run(
      Effect.scoped(
        Effect.gen(function* () {
          const writer = yield* RollingWriter.make({ dir, format: "arrow", metadata })
          yield* writer.write(batchOf(makeRows(10)))
        })
      )
    )
    expect(listDir(dir)).toEqual(["part-0-00000.arrow.partial"])
  })

  it("fails with a DiskFull SinkError naming the file when the disk is full, and never renames", async () => {
    const dir = newDir()
    // writes to /dev/full fail with ENOSPC
    fs.symlinkSync("/dev/full", path.join(dir, "part-0-00000.parquet.partial"))
    const exit = await runExit(
      Effect.scoped(
        Effect.gen(function* () {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata, rowGroupBytes: 4096 })
          const first = yield* Effect.exit(writer.write(batchOf(makeRows(50, { dataBytes: 1000 }))))
          const afterwards = yield* Effect.exit(writer.finish)
          return { first, afterwards }
        })
      )
    )
    if (Exit.isFailure(exit)) throw new Error(Cause.pretty(exit.cause))
    const error = failureOf(exit.value.first)
    expect(error).toBeInstanceOf(SinkError)
    expect(error.reason).toBe("DiskFull")
    expect(error.path).toBe(path.join(dir, "part-0-00000.parquet.partial"))
    expect(error.message).toContain(error.path)
    expect(error.message).toContain("no space left")
    // the failed writer refuses to finish, so nothing gets a final name
    expect(failureOf(exit.value.afterwards)).toMatchObject({ reason: error.reason, path: error.path, message: error.message })
    expect(listDir(dir)).toEqual(["part-0-00000.parquet.partial"])
  })

  it("fails with a SinkError naming the directory when the output directory cannot be created", async () => {
    const dir = newDir()
    fs.writeFileSync(path.join(dir, "not-a-directory"), "")
    const target = path.join(dir, "not-a-directory", "version=1")
    const error = failureOf(await runExit(Effect.scoped(RollingWriter.make({ dir: target, format: "parquet", metadata }))))
    expect(error.reason).toBe("NotFound")
    expect(error.path).toBe(target)
    expect(error.message).toContain(target)
  })

  it("refuses an int64 it cannot write exactly, and leaves the file .partial", async () => {
    const dir = newDir()
    const rows = makeRows(3)
    const exit = await runExit(writeAllEffect(dir, [...rows, { ...rows[0]!, partition: "p-9", partitionVersion: 2 ** 53 + 2 }]))
    const error = failureOf(exit)
    expect(error.reason).toBe("InvalidRow")
    expect(error.message).toContain(`partition "p-9": partition_version ${2 ** 53 + 2} is not an exact int64`)
    expect(listDir(dir)).toEqual(["part-0-00000.parquet.partial"])
  })

  it("rejects invalid options with InvalidOptions", async () => {
    const dir = newDir()
    const bad: ReadonlyArray<Partial<RollingWriter.Options>> = [
      { maxFileBytes: 0 },
      { rowGroupBytes: 2 ** 31 },
      { shard: "a/b" },
      { format: "csv" as never },
      { compression: "lzo" as never }
    ]
    for (const options of bad) {
      const exit = await runExit(Effect.scoped(RollingWriter.make({ dir, format: "parquet", metadata, ...options })))
      expect(failureOf(exit).reason).toBe("InvalidOptions")
    }
    expect(listDir(dir)).toEqual([])
  })

  it("overwrites a .partial left by a killed run, and finish can be asked twice", async () => {
    const dir = newDir()
    fs.writeFileSync(path.join(dir, "part-0-00000.parquet.partial"), "left over by a killed run")
    const rows = makeRows(20)
    const [first, second] = await run(
      Effect.scoped(
        Effect.gen(function* () {
          const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata })
          yield* writer.write(batchOf(rows))
          return [yield* writer.finish, yield* writer.finish] as const
        })
      )
    )
    expect(second).toEqual(first)
    expect(listDir(dir)).toEqual(["part-0-00000.parquet"])
    await withDuckDB(async (db) => {
      expect(await query(db, `select count(*) as n from read_parquet('${path.join(dir, "part-0-00000.parquet")}')`)).toEqual([{ n: 20n }])
    })
  })
})

const writeAllEffect = (dir: string, rows: ReadonlyArray<TestRow>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const writer = yield* RollingWriter.make({ dir, format: "parquet", metadata })
      yield* writer.write(batchOf(rows))
      return yield* writer.finish
    })
  )
