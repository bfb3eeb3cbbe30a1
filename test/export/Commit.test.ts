import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { committed } from "../../src/export/Commit.ts"
import { commitPlan, runShard } from "../../src/export/Export.ts"
import { makePlan, withShards } from "../../src/export/Plan.ts"
import { pinPlan } from "../../src/export/Shards.ts"
import { destination } from "../../src/sinks/Destination.ts"
import { TestCatalog } from "../support/catalog.ts"
import { readParquet } from "../support/duckdb.ts"
import { filesBelow, readJson } from "../support/files.ts"
import { expectedRows, HRN, stagesLayer, tempDir } from "./support.ts"

/**
 * Commit.ts in this process, with the shards of a plan run apart (`runShard`) as array-job workers
 * run them: the manifest only from finished shards, the cursor, the tidying, and what a directory
 * already holds.
 */

const DIR = "roads/places/version=3"
const SHARD_OPTIONS = { format: "parquet", concurrency: 4, listConcurrency: 2 } as const

/** A plan of places at its latest version, 4 parts dealt to 2 shards, pinned in `out`. */
const pinned = (out: string) =>
  Effect.gen(function*() {
    const dest = yield* destination(out)
    const plan = withShards(yield* makePlan({ catalog: HRN, layer: "places", version: "latest", parts: 4 }), 2)
    return { dest, plan: yield* pinPlan(dest, plan, false) }
  })

/** `pinned`, with both shards run. */
const shardsDone = (out: string) =>
  Effect.tap(
    pinned(out),
    ({ dest, plan }) => Effect.forEach([0, 1], (shard) => runShard(dest, plan, shard, SHARD_OPTIONS))
  )

describe("commit", () => {
  it.scoped("refuses while a shard has not finished, writing nothing; then commits what the shards wrote", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const { dest, plan } = yield* pinned(out)
      expect(plan.shards).toEqual([[0, 2], [1, 3]])
      const first = yield* runShard(dest, plan, 0, SHARD_OPTIONS)
      expect(first).toMatchObject({ _tag: "ShardExported", shard: { shard: 0, parts: [0, 2] } })

      const early = yield* Effect.flip(commitPlan(dest, plan))
      expect(early).toMatchObject({ _tag: "ShardsUnfinished", missing: [1], broken: [] })
      expect(early.message).toBe(
        `Not committing ${path.join(out, DIR, "_plan.json")}: shard 1 has not finished. Nothing was committed. ` +
          `Run catalog-export export --plan ${
            path.join(out, DIR, "_plan.json")
          } --shard I for shard 1, then commit again.`
      )
      expect(fs.existsSync(path.join(out, DIR, "_manifest.json"))).toBe(false)
      expect(fs.existsSync(path.join(out, "roads", "places", "_state.json"))).toBe(false)

      yield* runShard(dest, plan, 1, SHARD_OPTIONS)
      const result = yield* commitPlan(dest, plan)
      expect(result._tag).toBe("Exported")
      const partitions = catalog.partitionsAt("places", 3)
      expect(result.manifest).toMatchObject({ version: 3, mode: "full", partitions: partitions.length, deleted: 0 })
      expect(yield* Effect.promise(() => readParquet(path.join(out, DIR)))).toEqual(
        expectedRows(catalog, "places", partitions)
      )
      // One file per shard, merged from its two parts' files, and none of the bookkeeping.
      expect(result.manifest.files.map((f) => f.path.split("-")[1])).toEqual(["s0", "s1"])
      expect(filesBelow(path.join(out, DIR))).toEqual(
        [...result.manifest.files.map((f) => f.path), "_manifest.json"].sort()
      )
      expect(readJson(path.join(out, "roads", "places", "_state.json")).lastVersion).toBe(3)

      // A worker retried after the commit, and the commit run again, change nothing.
      const listings = catalog.listings.length
      expect((yield* runShard(dest, plan, 0, SHARD_OPTIONS))._tag).toBe("AlreadyExported")
      expect((yield* commitPlan(dest, plan))._tag).toBe("AlreadyExported")
      expect(catalog.listings.length).toBe(listings)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("refuses a shard whose files are not as its manifest says, naming it; the shard run again mends it", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      const { dest, plan } = yield* pinned(out)
      yield* runShard(dest, plan, 0, SHARD_OPTIONS)
      const second = yield* runShard(dest, plan, 1, SHARD_OPTIONS)
      const file = second._tag === "ShardExported" ? second.shard.files[0]! : expect.fail("shard 1 not exported")
      fs.truncateSync(path.join(out, DIR, file.path), 10)
      const refused = yield* Effect.flip(commitPlan(dest, plan))
      expect(refused).toMatchObject({
        _tag: "ShardsUnfinished",
        missing: [],
        broken: [{ shard: 1, reason: `${file.path} has 10 bytes, not ${file.bytes}` }]
      })
      expect(refused.message).toContain(`shard 1 is damaged (${file.path} has 10 bytes, not ${file.bytes})`)
      expect(fs.existsSync(path.join(out, DIR, "_manifest.json"))).toBe(false)

      // The damaged file was merged from its parts' files, which their checkpoints still vouch for:
      // the shard run again merges them again, fetching nothing.
      expect(file.path).toMatch(/^part-s1-/)
      const listings = catalog.listings.length
      const mended = yield* runShard(dest, plan, 1, SHARD_OPTIONS)
      expect(mended._tag === "ShardExported" && mended.shard.files.map((f) => f.path)).toEqual([
        expect.stringMatching(/^part-s1-/)
      ])
      expect(catalog.listings.length).toBe(listings)
      yield* commitPlan(dest, plan)
      expect(yield* Effect.promise(() => readParquet(path.join(out, DIR)))).toEqual(
        expectedRows(catalog, "places", catalog.partitionsAt("places", 3))
      )
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("removes what no manifest names: files of killed runs, and the temporary files of killed writes", () =>
    Effect.gen(function*() {
      const out = yield* tempDir
      const { dest, plan } = yield* shardsDone(out)
      const dir = path.join(out, DIR)
      const leftovers = [
        "part-0-dead-00000.parquet",
        "part-1-dead-00003.parquet.partial",
        // A JSON write killed on another host (this host's own are removed by the next write of that file).
        "_plan.json.elsewhere-4242.0badf00d.partial",
        "notes.txt"
      ]
      for (const name of leftovers) {
        fs.writeFileSync(path.join(dir, name), "left over")
      }
      const { manifest } = yield* commitPlan(dest, plan)
      expect(filesBelow(dir)).toEqual([...manifest.files.map((f) => f.path), "_manifest.json", "notes.txt"].sort())
    }).pipe(Effect.provide(stagesLayer())))
})

describe("a directory that already holds a manifest", () => {
  it.scoped("of this export: found, and the commit a kill interrupted finished (cursor, tidying)", () =>
    Effect.gen(function*() {
      const out = yield* tempDir
      const { dest, plan } = yield* shardsDone(out)
      const { manifest } = yield* commitPlan(dest, plan)
      // As if killed right after the manifest: the cursor not yet written, the bookkeeping still there.
      const dir = path.join(out, DIR)
      fs.rmSync(path.join(out, "roads", "places", "_state.json"))
      fs.writeFileSync(path.join(dir, "_plan.json"), JSON.stringify(plan))
      fs.writeFileSync(path.join(dir, "part-3-dead-00000.parquet"), "left over")
      const found = yield* committed(dest, plan)
      expect(Option.getOrThrow(found)).toEqual({ manifest })
      expect(readJson(path.join(out, "roads", "places", "_state.json")).lastVersion).toBe(3)
      expect(filesBelow(dir)).toEqual([...manifest.files.map((f) => f.path), "_manifest.json"].sort())
      // A changes export of the same version is covered by the full one.
      expect(Option.isSome(yield* committed(dest, { ...plan, mode: "changes", baseVersion: 1 }))).toBe(true)
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("of another export: a conflict that names it and says to use --force", () =>
    Effect.gen(function*() {
      const out = yield* tempDir
      const { dest, plan } = yield* shardsDone(out)
      const { manifest } = yield* commitPlan(dest, plan)
      const other = "hrn:here:data::test:other"
      fs.writeFileSync(path.join(out, DIR, "_manifest.json"), JSON.stringify({ ...manifest, catalogHrn: other }))
      const conflict = yield* Effect.flip(committed(dest, plan))
      expect(conflict).toMatchObject({
        _tag: "OutputConflict",
        message: `${
          path.join(out, DIR)
        } already holds a full export of ${other} layer places version 3; rerun with --force to replace it.`
      })
      // A full export is not covered by a changes export of the same version.
      fs.writeFileSync(path.join(out, DIR, "_manifest.json"), JSON.stringify({ ...manifest, mode: "changes" }))
      expect((yield* Effect.flip(committed(dest, plan)))._tag).toBe("OutputConflict")
    }).pipe(Effect.provide(stagesLayer())))
})
