import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runExport } from "../../src/export/Export.ts"
import { makePlan } from "../../src/export/Plan.ts"
import { cli, ROOT, serviceFlags } from "../support/cli.ts"
import { clientLayerFor, runWith } from "../support/client.ts"
import { query, withDuckDB } from "../support/duckdb.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import {
  changes,
  expectedRows,
  type ExportedRow,
  listing,
  manifestOf,
  publish,
  readExport,
  setMinimum
} from "./support.ts"

/**
 * Incremental exports (`--mode changes`, `incremental: true`): a full export at 3, deltas to 5 and 7,
 * and the DuckDB query of docs/incremental-backfill-retention.md that rebuilds a version from them.
 * Versions 0..5 are seeded; 6 and 7 are published here so that the range (5, 7] holds a deletion, an
 * update, and a partition created and deleted inside it.
 */

let svc: TestService
let flags: Array<string>
let out: string

/**
 * The rebuild query of docs/incremental-backfill-retention.md ("Rebuilding a version from a full export
 * and its deltas"); keep the two the same (checked below).
 */
const rebuildQuery = (layerDir: string, version: number) => `
WITH committed AS (          -- finished exports only: a directory without _manifest.json is not done
  SELECT version, mode FROM read_json('${layerDir}/version=*/_manifest.json', hive_partitioning = false)
  WHERE version <= ${version}
),
base AS (                    -- the newest full export at or below the version
  SELECT max(version) AS version FROM committed WHERE mode = 'full'
),
newest AS (                  -- per partition, its row in the newest export since the base
  SELECT * FROM read_parquet('${layerDir}/version=*/*.parquet', hive_partitioning = true)
  WHERE version IN (SELECT version FROM committed) AND version >= (SELECT version FROM base)
  QUALIFY row_number() OVER (PARTITION BY partition ORDER BY version DESC) = 1
)
SELECT * EXCLUDE (version) FROM newest
WHERE data_handle <> ''      -- deleted by then
ORDER BY partition`

const rebuild = (layerDir: string, version: number) =>
  withDuckDB((c) =>
    query(
      c,
      `SELECT partition, partition_version, data_handle, checksum, sha1(data) AS data_sha1 FROM (${
        rebuildQuery(layerDir, version)
      })`
    )
  ).then((rows) => rows.map((r) => ({ ...r, partition_version: Number(r.partition_version) }) as ExportedRow))

const exportChanges = (target: string, version: number | "latest") =>
  cli([
    "export",
    "--catalog",
    DEMO,
    "--layer",
    "places",
    "--mode",
    "changes",
    "--version",
    String(version),
    "--out",
    target,
    "--parts",
    "3",
    ...flags
  ])

const placesDir = (root: string) => path.join(root, "demo", "places")
const stateOf = (root: string) =>
  JSON.parse(fs.readFileSync(path.join(placesDir(root), "_state.json"), "utf8")) as { lastVersion: number }

/** A changes export holds exactly the service's changes listing: the latest state of each changed partition, deletions as null data. */
const expectChangesExport = async (dir: string, start: number, end: number) => {
  const expected = await changes(svc, "places", start, end)
  const rows = await readExport(dir)
  expect(rows).toEqual(expectedRows(expected))
  for (const row of rows) expect(row.data_sha1 === null).toBe(row.data_handle === "")
  const deleted = expected.filter((p) => p.dataHandle === "").length
  expect(manifestOf(dir)).toMatchObject({
    mode: "changes",
    baseVersion: start,
    version: end,
    partitions: expected.length,
    deleted
  })
  return { rows, deleted }
}

let deletedAt6: string
let updatedAt6: string
let updatedAt7: string

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 60, versions: 6 } })
  flags = await serviceFlags(svc)
  out = path.join(svc.dir, "out")
  const at5 = await listing(svc, "places", 5)
  deletedAt6 = at5[0]!.partition
  updatedAt6 = at5[1]!.partition
  updatedAt7 = at5[2]!.partition
  expect(
    await publish(svc, [
      { partition: "zz-temp", data: JSON.stringify({ temp: true }) },
      { partition: deletedAt6, dataHandle: "" },
      { partition: updatedAt6, data: JSON.stringify({ v: 6 }) }
    ])
  ).toBe(6)
  expect(
    await publish(svc, [
      { partition: "zz-temp", dataHandle: "" },
      { partition: updatedAt7, data: JSON.stringify({ v: 7 }) }
    ])
  ).toBe(7)
})
afterAll(() => svc.close())

describe("incremental exports", () => {
  it("without a cursor, a changes run makes a full export and says so", async () => {
    const result = await exportChanges(out, 3)
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain("no cursor (_state.json) yet: full export")
    const dir = path.join(placesDir(out), "version=3")
    expect(manifestOf(dir)).toMatchObject({ mode: "full", version: 3, deleted: 0 })
    expect(manifestOf(dir).baseVersion).toBeUndefined()
    expect(await readExport(dir)).toEqual(expectedRows(await listing(svc, "places", 3)))
    expect(stateOf(out).lastVersion).toBe(3)
  })

  it("then exports only what changed up to 5 and up to 7, with deleted partitions as null-data rows counted as deleted", async () => {
    const to5 = await exportChanges(out, 5)
    expect(to5.code, to5.stderr).toBe(0)
    expect(to5.stdout).toMatch(/version 5 \(changes\)/)
    await expectChangesExport(path.join(placesDir(out), "version=5"), 3, 5)
    expect(stateOf(out).lastVersion).toBe(5)

    const to7 = await exportChanges(out, 7)
    expect(to7.code, to7.stderr).toBe(0)
    const { rows, deleted } = await expectChangesExport(path.join(placesDir(out), "version=7"), 5, 7)
    expect(to7.stdout).toContain(`(${deleted} deleted)`)
    const byPartition = new Map(rows.map((r) => [r.partition, r]))
    // Deleted in the range, and created and deleted inside it: both rows with null data.
    expect(byPartition.get(deletedAt6)).toMatchObject({ data_handle: "", data_sha1: null })
    expect(byPartition.get("zz-temp")).toMatchObject({ data_handle: "", data_sha1: null })
    expect(deleted).toBeGreaterThanOrEqual(2)
    expect(byPartition.get(updatedAt6)?.partition_version).toBe(6)
    expect(byPartition.get(updatedAt7)?.partition_version).toBe(7)
    // Unchanged partitions are not in a delta.
    expect(rows.length).toBeLessThan((await listing(svc, "places", 7)).length)
    expect(stateOf(out).lastVersion).toBe(7)
  })

  it("the documented DuckDB query rebuilds version 7 from the full export at 3 and its deltas: exactly a full export of 7", async () => {
    const client = await clientLayerFor(svc)
    const fullOut = path.join(svc.dir, "full")
    await runWith(
      client,
      Effect.flatMap(
        makePlan({ catalog: DEMO, layer: "places", version: 7, parts: 2 }),
        (plan) => runExport(plan, { out: fullOut, format: "parquet", concurrency: 8, listConcurrency: 2, force: false })
      )
    )
    const full = await readExport(path.join(placesDir(fullOut), "version=7"))
    expect(full).toEqual(expectedRows(await listing(svc, "places", 7)))

    // An older full export in the same tree must not bring back partitions deleted before the base.
    await runWith(
      client,
      Effect.flatMap(
        makePlan({ catalog: DEMO, layer: "places", version: 1, parts: 1 }),
        (plan) => runExport(plan, { out, format: "parquet", concurrency: 8, listConcurrency: 1, force: false })
      )
    )
    const at7 = new Set((await listing(svc, "places", 7)).map((p) => p.partition))
    // (the seed deleted some partitions between 1 and 3 that no later delta mentions)
    const deltas = new Set((await changes(svc, "places", 3, 7)).map((p) => p.partition))
    expect((await listing(svc, "places", 1)).filter((p) => !at7.has(p.partition) && !deltas.has(p.partition)).length)
      .toBeGreaterThan(0)

    const rebuilt = await rebuild(placesDir(out), 7)
    expect(rebuilt).toEqual(full)
    expect(rebuilt.some((r) => r.partition === deletedAt6 || r.partition === "zz-temp")).toBe(false)
    // Any version of the chain: 5 from the full export at 3 and the delta to 5.
    expect(await rebuild(placesDir(out), 5)).toEqual(expectedRows(await listing(svc, "places", 5)))
    // A directory without a manifest (an unfinished run) is ignored by the query.
    const unfinished = path.join(placesDir(out), "version=6")
    fs.mkdirSync(unfinished)
    fs.copyFileSync(
      path.join(
        placesDir(out),
        "version=7",
        fs.readdirSync(path.join(placesDir(out), "version=7")).find((f) => f.endsWith(".parquet"))!
      ),
      path.join(unfinished, "part-0-0.parquet")
    )
    expect(await rebuild(placesDir(out), 6)).toEqual(expectedRows(await listing(svc, "places", 5)))
    fs.rmSync(unfinished, { recursive: true })

    const doc = fs.readFileSync(path.join(ROOT, "docs", "incremental-backfill-retention.md"), "utf8")
    const normalize = (sql: string) => sql.replace(/\s+/g, " ").trim()
    expect(normalize(doc)).toContain(normalize(rebuildQuery("out/demo/places", 7)))
  })

  it("a nightly job with incremental: true exports in full first (and says so), then only the changes", async () => {
    const nightlyOut = path.join(svc.dir, "nightly")
    const config = path.join(svc.dir, "nightly.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        job: "nightly-export",
        out: nightlyOut,
        format: "parquet",
        incremental: true,
        layers: [{ catalog: DEMO, layer: "places" }]
      })
    )
    const first = await cli(["run", config, ...flags])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain("no cursor (_state.json) yet: full export")
    expect(manifestOf(path.join(placesDir(nightlyOut), "version=7"))).toMatchObject({ mode: "full", version: 7 })

    const at7 = await listing(svc, "places", 7)
    expect(
      await publish(svc, [{ partition: at7[3]!.partition, dataHandle: "" }, {
        partition: at7[4]!.partition,
        data: "{}"
      }])
    ).toBe(8)
    const second = await cli(["run", config, ...flags])
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toMatch(/version 8 \(changes\): 2 partitions \(1 deleted\)/)
    await expectChangesExport(path.join(placesDir(nightlyOut), "version=8"), 7, 8)
    expect(await rebuild(placesDir(nightlyOut), 8)).toEqual(expectedRows(await listing(svc, "places", 8)))

    const third = await cli(["run", config, ...flags])
    expect(third.code).toBe(0)
    expect(third.stdout).toMatch(/Up to date: .* through version 8/)
  })

  it("a cursor below the minimum version falls back to a full export and says so", async () => {
    const target = path.join(svc.dir, "stale")
    await runWith(
      await clientLayerFor(svc),
      Effect.flatMap(
        makePlan({ catalog: DEMO, layer: "places", version: 2, parts: 1 }),
        (plan) => runExport(plan, { out: target, format: "parquet", concurrency: 8, listConcurrency: 1, force: false })
      )
    )
    expect(stateOf(target).lastVersion).toBe(2)
    // The changes after version 2 are gone once version 3 is deleted.
    expect((await setMinimum(svc, 4)).status).toBe(204)
    const result = await exportChanges(target, "latest")
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toContain(
      "the cursor (version 2) is below the minimum version 4, so its changes are gone: full export"
    )
    const dir = path.join(placesDir(target), "version=8")
    expect(manifestOf(dir)).toMatchObject({ mode: "full", version: 8 })
    expect(await readExport(dir)).toEqual(expectedRows(await listing(svc, "places", 8)))
    expect(stateOf(target).lastVersion).toBe(8)
  })
})
