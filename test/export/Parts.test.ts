import { describe, expect, it } from "@effect/vitest"
import { tableFromIPC } from "apache-arrow"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Partition } from "../../src/domain/Partition.ts"
import {
  type Checkpoint,
  checkpointKey,
  damage,
  discardUnfinished,
  finishedParts,
  listing
} from "../../src/export/Checkpoints.ts"
import { listPart } from "../../src/export/Listing.ts"
import { PartWriter, type PartWriterOptions } from "../../src/export/Parts.ts"
import { makePlan } from "../../src/export/Plan.ts"
import { type Destination, destination } from "../../src/sinks/Destination.ts"
import { type InMemoryCatalog, TestCatalog } from "../support/catalog.ts"
import { readParquet } from "../support/duckdb.ts"
import { filesBelow, readJson, sha256File } from "../support/files.ts"
import { expectedRows, HRN, stagesLayer, tempDir } from "./support.ts"

/** Parts.ts (a part's files and checkpoint) and Checkpoints.ts (which parts a resumed run keeps), in this process. */

const DIR = "roads/places/version=2"

const options = (overrides: Partial<PartWriterOptions> = {}): PartWriterOptions => ({
  format: "both",
  metadata: { catalog_hrn: HRN, layer_id: "places" },
  batchBytes: 2048,
  rowGroupBytes: 4096,
  ...overrides
})

/** The changes (0, 2] of places: updates, creations, deletions and an empty blob. */
const changes = Effect.gen(function*() {
  const plan = yield* makePlan({ catalog: HRN, layer: "places", version: 2, parts: 1, mode: "changes", baseVersion: 0 })
  return Chunk.toArray(yield* Stream.runCollect(listPart(plan, undefined)))
})

/** Writes `rows` as part `part` of run `run` the way the export does (batches handed on when full) and finishes it. */
const writePart = (
  catalog: InMemoryCatalog,
  dest: Destination,
  part: number,
  run: string,
  rows: ReadonlyArray<Partition>,
  overrides: Partial<PartWriterOptions> = {}
) =>
  Effect.scoped(Effect.gen(function*() {
    const writer = yield* PartWriter.open(dest, DIR, part, run, options(overrides), { rowBytes: 64, concurrency: 1 })
    let batches = 0
    for (const p of rows) {
      const data = p.dataHandle === "" ? null : catalog.blob("places", p.dataHandle)!
      writer.add(p.partition, p.version, p.dataHandle, data === null ? null : p.dataSize!, p.checksum ?? null, data)
      if (writer.full) {
        yield* writer.write(writer.take())
        batches++
      }
    }
    return { checkpoint: yield* writer.finish, batches }
  }))

describe("a part's writer", () => {
  it.scoped("hands full batches on, and records the finished files, counts and region in the part's checkpoint", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const dest = yield* destination(out)
      const rows = yield* changes
      const deleted = rows.filter((p) => p.dataHandle === "").length
      expect(deleted).toBeGreaterThan(0)
      const { batches, checkpoint } = yield* writePart(catalog, dest, 4, "run1", rows, { region: "eu-west-1" })
      expect(batches).toBeGreaterThan(1)
      const bytes = rows.reduce(
        (n, p) => n + (p.dataHandle === "" ? 0 : catalog.blob("places", p.dataHandle)!.length),
        0
      )
      expect(checkpoint).toMatchObject({ part: 4, partitions: rows.length, deleted, bytes, region: "eu-west-1" })
      expect(checkpoint.decode).toBeUndefined()
      expect(readJson(path.join(out, checkpointKey(DIR, 4)))).toEqual(checkpoint)

      const dir = path.join(out, DIR)
      expect(filesBelow(dir)).toEqual([...checkpoint.files.map((f) => f.path), "_parts/part-4.json"].sort())
      for (const f of checkpoint.files) {
        expect(f.path).toMatch(/^part-4-run1-\d{5}\.(parquet|arrow)$/)
        expect(fs.statSync(path.join(dir, f.path)).size).toBe(f.bytes)
        expect(sha256File(path.join(dir, f.path))).toBe(f.sha256)
      }
      expect(yield* Effect.promise(() => readParquet(dir))).toEqual(expectedRows(catalog, "places", rows))
      const arrow = checkpoint.files.filter((f) => f.format === "arrow").flatMap((f) =>
        tableFromIPC(fs.readFileSync(path.join(dir, f.path))).toArray().map((r) => r.toJSON().partition as string)
      )
      expect(arrow.sort()).toEqual(rows.map((p) => p.partition))
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("of an empty part still writes a readable file per format, and the checkpoint", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const { checkpoint } = yield* writePart(catalog, yield* destination(out), 0, "run1", [])
      expect(checkpoint).toMatchObject({ part: 0, partitions: 0, deleted: 0, bytes: 0 })
      expect(checkpoint.region).toBeUndefined()
      expect(checkpoint.files.map((f) => [f.format, f.rows])).toEqual([["parquet", 0], ["arrow", 0]])
      expect(yield* Effect.promise(() => readParquet(path.join(out, DIR)))).toEqual([])
    }).pipe(Effect.provide(stagesLayer())))
})

describe("checkpoints", () => {
  it.scoped("hold while every file they name is there with its size, and decoded as this run decodes", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const dest = yield* destination(out)
      const rows = yield* changes
      const written = new Map<number, Checkpoint>()
      for (const part of [0, 1, 2]) {
        const slice = rows.filter((_, i) => i % 3 === part)
        written.set(part, (yield* writePart(catalog, dest, part, "run1", slice, { format: "parquet" })).checkpoint)
      }
      const all = yield* finishedParts(dest, DIR, [0, 1, 2, 3], undefined)
      expect([...all.keys()]).toEqual([0, 1, 2])
      expect(all.get(1)).toEqual(written.get(1))

      const [damaged] = written.get(1)!.files
      fs.truncateSync(path.join(out, DIR, damaged!.path), 10)
      const [missing] = written.get(2)!.files
      fs.rmSync(path.join(out, DIR, missing!.path))
      const present = yield* listing(dest, DIR)
      expect(damage(written.get(1)!.files, present)).toBe(`${damaged!.path} has 10 bytes, not ${damaged!.bytes}`)
      expect(damage(written.get(2)!.files, present)).toBe(`${missing!.path} is missing`)
      expect(damage(written.get(0)!.files, present)).toBeUndefined()
      expect([...(yield* finishedParts(dest, DIR, [0, 1, 2], undefined)).keys()]).toEqual([0])

      // A raw part is not finished for a run that decodes.
      expect((yield* finishedParts(dest, DIR, [0], { kind: "json", onError: "fail" })).size).toBe(0)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("after a failed write, this run's files that no checkpoint vouches for go, and no other run's", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const dest = yield* destination(out)
      const rows = yield* changes
      const { checkpoint } = yield* writePart(catalog, dest, 0, "a", rows, { format: "parquet" })
      const dir = path.join(out, DIR)
      // Part 1 of run a renamed a file but died before its checkpoint, and had the next one open; run b is another pod's.
      const leftovers = ["part-1-a-00000.parquet", "part-1-a-00001.parquet.partial", "part-1-b-00000.parquet"]
      for (const name of leftovers) fs.writeFileSync(path.join(dir, name), "x")
      yield* discardUnfinished(dest, DIR, "a")
      expect(filesBelow(dir)).toEqual(
        [...checkpoint.files.map((f) => f.path), "_parts/part-0.json", "part-1-b-00000.parquet"].sort()
      )
    }).pipe(Effect.provide(stagesLayer())))
})
