import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BackfillJob, runBackfill, type VersionOutcome } from "../../pipelines/backfill.ts"
import { MetadataApi } from "../../src/client/MetadataApi.ts"
import { load } from "../../src/export/JobConfig.ts"
import { cli, ROOT, serviceFlags } from "../support/cli.ts"
import { clientLayerFor, runWith } from "../support/client.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, latestVersion, listing, manifestOf, readExport, setMinimum } from "./support.ts"

/** `catalog-export backfill` through the real CLI against the local service (versions 0..9). */

let svc: TestService
let flags: Array<string>
let out: string

const versionDir = (root: string, version: number) => path.join(root, "demo", "places", `version=${version}`)
const committed = (root: string) =>
  fs.existsSync(path.join(root, "demo", "places"))
    ? fs.readdirSync(path.join(root, "demo", "places"))
      .filter((d) => fs.existsSync(path.join(root, "demo", "places", d, "_manifest.json")))
      .map((d) => Number(d.replace("version=", "")))
      .sort((a, b) => a - b)
    : []

/** Every file below `root`: name -> mtime, to prove a re-run rewrote nothing. */
/** The exports' files and their times; the run reports (`_run.json`, `_runs/`) are each run's own. */
const files = (root: string): Record<string, number> =>
  Object.fromEntries(
    (fs.readdirSync(root, { recursive: true }) as Array<string>).filter((f) =>
      f !== "_run.json" && f !== "_runs" && !f.startsWith("_runs/")
    ).map((f) => [f, fs.statSync(path.join(root, f)).mtimeMs])
  )

/** Each committed version holds exactly the service's partitions of that version. */
const expectVersionsMatch = async (root: string, versions: ReadonlyArray<number>) => {
  for (const v of versions) {
    const partitions = await listing(svc, "places", v)
    expect(await readExport(versionDir(root, v)), `version ${v}`).toEqual(expectedRows(partitions))
    expect(manifestOf(versionDir(root, v))).toMatchObject({
      version: v,
      mode: "full",
      partitions: partitions.length,
      deleted: 0
    })
  }
}

const backfill = (
  from: number,
  to: number,
  target: string,
  extra: Array<string> = []
) => [
  "backfill",
  "--catalog",
  DEMO,
  "--layer",
  "places",
  "--from",
  String(from),
  "--to",
  String(to),
  "--out",
  target,
  ...flags,
  ...extra
]

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 80, versions: 10 } })
  flags = await serviceFlags(svc)
  out = path.join(svc.dir, "out")
})
afterAll(() => svc.close())

describe("backfill", () => {
  it("refuses --from greater than --to with exit 2, and writes nothing", async () => {
    const result = await cli(backfill(5, 2, out))
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/--from 5 is greater than --to 2/)
    expect(fs.existsSync(out)).toBe(false)
  })

  it("killed with SIGKILL mid-range and run again, exports every version exactly once with the service's rows", async () => {
    expect(await latestVersion(svc)).toBe(9)
    const child = spawn(process.execPath, ["src/cli/bin.mjs", ...backfill(0, 9, out, ["--quiet"])], {
      cwd: ROOT,
      stdio: "ignore"
    })
    let exitedEarly = false
    child.on("exit", () => (exitedEarly = true))
    await new Promise<void>((resolve, reject) => {
      const started = Date.now()
      const timer = setInterval(() => {
        if (exitedEarly) {
          clearInterval(timer)
          reject(new Error("the backfill ended before it could be killed"))
        } else if (committed(out).length >= 2 || Date.now() - started > 45_000) {
          clearInterval(timer)
          child.kill("SIGKILL")
          resolve()
        }
      }, 10)
    })
    await new Promise((r) => child.on("close", r))
    const before = committed(out)
    expect(before.length).toBeGreaterThanOrEqual(2)
    expect(before.length).toBeLessThan(10)
    expect(before).toEqual(before.map((_, i) => i))
    const finishedAt = new Map(before.map((v) => [v, manifestOf(versionDir(out, v)).finishedAt]))

    const rerun = await cli(backfill(0, 9, out))
    expect(rerun.code, rerun.stderr).toBe(0)
    for (const v of before) expect(rerun.stdout).toContain(`version ${v}: already exported, skipped`)
    for (let v = before.length; v <= 9; v++) {
      expect(rerun.stdout).toMatch(
        new RegExp(`^version ${v}: exported ${(await listing(svc, "places", v)).length} partitions`, "m")
      )
    }
    expect(rerun.stdout).toContain(
      `${
        10 - before.length
      } exported, ${before.length} already exported, 0 unchanged, 0 without data, 0 deleted, 0 not published yet.`
    )
    expect(committed(out)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    // Exported once: what was committed before the kill was not written again.
    for (const v of before) expect(manifestOf(versionDir(out, v)).finishedAt).toBe(finishedAt.get(v))
    const names = Object.keys(files(out))
    expect(names.filter((f) => f.endsWith(".partial") || f.includes("_parts"))).toEqual([])
    await expectVersionsMatch(out, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  })

  it("run again over a finished range, exports nothing and rewrites nothing", async () => {
    const before = files(out)
    const result = await cli(backfill(0, 9, out))
    expect(result.code).toBe(0)
    expect(result.stdout).toContain(
      "0 exported, 10 already exported, 0 unchanged, 0 without data, 0 deleted, 0 not published yet."
    )
    expect(result.stdout).not.toMatch(/: exported/)
    expect(files(out)).toEqual(before)
    expect(JSON.parse(fs.readFileSync(path.join(out, "_run.json"), "utf8")).totals).toMatchObject({
      exported: 0,
      alreadyExported: 10
    })
  })

  it("reports versions below the minimum and past the latest as skipped ranges, not a crash, and exports the rest", async () => {
    const counts = new Map<number, number>()
    for (let v = 6; v <= 9; v++) counts.set(v, (await listing(svc, "places", v)).length)
    expect((await setMinimum(svc, 6)).status).toBe(204)
    const target = path.join(svc.dir, "out-after-minimum")
    // A range of thousands of versions past the latest costs one line, not a request per version.
    const result = await cli(backfill(0, 5000, target))
    expect(result.code, result.stderr).toBe(0)
    const lines = result.stdout.trim().split("\n")
    expect(lines[0]).toBe("versions 0..5: deleted (below the minimum version 6), skipped")
    expect(lines.slice(1, 5).map((l) => l.replace(/ partitions.*/, ""))).toEqual(
      [6, 7, 8, 9].map((v) => `version ${v}: exported ${counts.get(v)}`)
    )
    expect(lines[5]).toBe("versions 10..5000: not published yet (the latest version is 9), skipped")
    expect(lines[6]).toContain(
      "4 exported, 0 already exported, 0 unchanged, 0 without data, 6 deleted, 4991 not published yet."
    )
    expect(lines.length).toBe(7)
    expect(committed(target)).toEqual([6, 7, 8, 9])
    await expectVersionsMatch(target, [6, 9])
  })

  it("config/backfill.example.json is a valid job config that `catalog-export run` runs", async () => {
    const file = path.join(ROOT, "config", "backfill.example.json")
    const job = await Effect.runPromise(load(BackfillJob, file))
    expect(job.job).toBe("backfill")
    // Run as is from a scratch directory (its `out` is relative), pointed at this service by flags.
    const cwd = path.join(svc.dir, "example")
    fs.mkdirSync(cwd)
    expect((await setMinimum(svc, 8)).status).toBe(204)
    const result = await cli(["run", file, ...flags], { cwd })
    expect(result.code, result.stderr).toBe(0)
    const root = path.resolve(cwd, job.out)
    const exported = committed(root)
    expect(exported).toEqual([8, 9].filter((v) => v >= job.from && v <= job.to))
    expect(result.stdout).toContain(`versions ${job.from}..7: deleted (below the minimum version 8), skipped`)
    await expectVersionsMatch(root, [exported[0]!])
  })

  it("reports a version deleted while it is being exported as deleted, and goes on", async () => {
    const client = await clientLayerFor(svc)
    // The minimum moves past version 8 right when its partitions are about to be listed.
    const raiseDuringListing = Layer.effect(
      MetadataApi,
      Effect.map(MetadataApi, (metadata) =>
        MetadataApi.of({
          ...metadata,
          partitions: (hrn, layer, options) =>
            options?.version === 8
              ? Stream.unwrap(Effect.promise(async () => {
                expect((await setMinimum(svc, 9)).status).toBe(204)
                return metadata.partitions(hrn, layer, options)
              }))
              : metadata.partitions(hrn, layer, options)
        }))
    ).pipe(Layer.provideMerge(client))
    const target = path.join(svc.dir, "out-deleted-meanwhile")
    const outcomes: Array<VersionOutcome> = []
    const totals = await runWith(
      raiseDuringListing,
      runBackfill(
        {
          catalog: DEMO,
          layer: "places",
          from: 8,
          to: 9,
          parts: 1,
          export: { out: target, format: "parquet", concurrency: 4, listConcurrency: 1 }
        },
        (outcome) => Effect.sync(() => outcomes.push(outcome))
      )
    )
    expect(outcomes.map((o) => [o.version, o.status])).toEqual([[8, "below-minimum"], [9, "exported"]])
    expect(outcomes[0]).toMatchObject({ version: 8, through: 8, status: "below-minimum", minimum: 9 })
    expect(totals).toEqual({
      exported: 1,
      alreadyExported: 0,
      unchanged: 0,
      noData: 0,
      belowMinimum: 1,
      notYetPublished: 0,
      changeCheck: undefined
    })
    expect(committed(target)).toEqual([9])
    await expectVersionsMatch(target, [9])
  })
})
