import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { icebird, type IcebirdReader } from "../sinks/iceberg/support.ts"
import { cli, failureLines, serviceFlags } from "../support/cli.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, listing, publish, readTableTag, tableMetadataJson } from "./support.ts"

/**
 * `--format iceberg` through the real CLI against the local service: a full export, changes runs
 * with deletions between them, every tag read back by icebird (an independent reader) and compared
 * with the service's listing of that version; the summary names the table and its metadata file;
 * a layer directory holding the other kind of export is refused with nothing written.
 */

let svc: TestService
let flags: Array<string>
let out: string
let reader: IcebirdReader

const exportIceberg = (version: number, ...extra: Array<string>) =>
  cli([
    "export",
    "--catalog",
    DEMO,
    "--layer",
    "places",
    "--format",
    "iceberg",
    "--version",
    String(version),
    "--out",
    out,
    "--parts",
    "3",
    ...extra,
    ...flags
  ])

const tableDir = () => path.join(out, "demo", "places")
const tableUri = () => pathToFileURL(tableDir()).href

const readTag = (tag: string) => readTableTag(reader, tableUri(), tag)

const metadataJson = () => tableMetadataJson(tableDir())

const snapshotOf = (tag: string) => {
  const m = metadataJson()
  return m.snapshots.find((s) => s["snapshot-id"] === m.refs[tag]!["snapshot-id"])!
}

type SnapshotJson = ReturnType<typeof snapshotOf>

/** The snapshot a compaction (operation replace) rewrote: the version's own commit. */
const parentOfReplace = (snapshot: SnapshotJson): SnapshotJson => {
  if (snapshot.summary.operation !== "replace") return snapshot
  return parentOfReplace(
    metadataJson().snapshots.find((s) => s["snapshot-id"] === snapshot["parent-snapshot-id"])!
  )
}

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 60, versions: 6 } })
  flags = await serviceFlags(svc)
  out = path.join(svc.dir, "out")
  reader = await icebird()
  const at5 = await listing(svc, "places", 5)
  expect(
    await publish(svc, [
      { partition: "zz-temp", data: JSON.stringify({ temp: true }) },
      { partition: at5[0]!.partition, dataHandle: "" },
      { partition: at5[1]!.partition, data: JSON.stringify({ v: 6 }) }
    ])
  ).toBe(6)
  expect(
    await publish(svc, [
      { partition: "zz-temp", dataHandle: "" },
      { partition: at5[2]!.partition, dataHandle: "" },
      { partition: at5[3]!.partition, data: JSON.stringify({ v: 7 }) }
    ])
  ).toBe(7)
}, 60_000)
afterAll(async () => {
  await reader?.close()
  await svc?.close()
})

describe("export --format iceberg", () => {
  it("a full export of version 3 is snapshot v3 of the layer's table, and the summary names it", async () => {
    const r = await exportIceberg(3, "--json")
    expect(r.code, r.stderr).toBe(0)
    const summary = JSON.parse(r.stdout) as { layers: Array<Record<string, any>> } & Record<string, any>
    const layer = (summary.layers ?? [summary])[0]!
    expect(layer).toMatchObject({ status: "exported", version: 3, mode: "full" })
    expect(layer.table).toMatchObject({ location: tableUri(), tag: "v3" })
    expect(layer.table.metadataFile).toMatch(/\/metadata\/v1\.metadata\.json$/)
    expect(fs.existsSync(new URL(layer.table.metadataFile))).toBe(true)
    expect(await readTag("v3")).toEqual(expectedRows(await listing(svc, "places", 3)))
    expect(await readTag("main")).toEqual(await readTag("v3"))
    expect(snapshotOf("v3").summary).toMatchObject({
      operation: "append",
      "catalog-export.catalog-version": "3",
      "catalog-export.mode": "full",
      "total-records": String((await listing(svc, "places", 3)).length)
    })
    // Only the table's directories: nothing of the run (plan, checkpoints) is left.
    expect(fs.readdirSync(tableDir()).sort()).toEqual(["data", "metadata"])
    const runDirs = fs.readdirSync(path.join(tableDir(), "data"))
    for (const d of runDirs) {
      const inRun = fs.readdirSync(path.join(tableDir(), "data", d))
      expect(inRun.filter((f) => f.startsWith("_"))).toEqual([])
    }
  })

  it("changes runs to 5, 6 and 7 commit only what changed: each tag reads as the service's version", async () => {
    const compacted: Array<number> = []
    for (const version of [5, 6, 7]) {
      const r = await exportIceberg(version, "--mode", "changes")
      expect(r.code, r.stderr).toBe(0)
      if (r.stdout.includes("compacted the table")) compacted.push(version)
      expect(r.stdout).toContain(`version ${version} (changes)`)
      expect(r.stdout).toContain(`table ${tableUri()}, tag v${version}, metadata ${tableUri()}/metadata/v`)
      const snapshot = parentOfReplace(snapshotOf(`v${version}`))
      expect(snapshot.summary).toMatchObject({
        "catalog-export.mode": "changes",
        "catalog-export.catalog-version": String(version)
      })
      expect(Number(snapshot.summary["added-records"])).toBeLessThan((await listing(svc, "places", version)).length)
    }
    // 6 and 7 deleted partitions: their old rows are position-deleted.
    expect(Number(parentOfReplace(snapshotOf("v7")).summary["added-position-deletes"])).toBeGreaterThan(0)
    // With this few rows the deletes pass the threshold (docs/iceberg-tables.md): main was compacted, its tag moved along.
    expect(compacted.length).toBeGreaterThan(0)
    expect(snapshotOf(`v${compacted.at(-1)}`).summary.operation).toBe("replace")
    for (const version of [3, 5, 6, 7]) {
      expect(await readTag(`v${version}`), `v${version}`).toEqual(expectedRows(await listing(svc, "places", version)))
    }
    const m = metadataJson()
    expect(m.refs.main!["snapshot-id"]).toBe(m.refs.v7!["snapshot-id"])
    expect(parentOfReplace(snapshotOf("v7"))["parent-snapshot-id"]).toBe(m.refs.v6!["snapshot-id"])
  })

  it("a version already tagged is up to date; --force is not needed to see it", async () => {
    const r = await exportIceberg(7, "--mode", "changes")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/Up to date|Already exported/)
    const again = await exportIceberg(5)
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain("Already exported")
    expect(again.stdout).toContain("tag v5")
  })

  it("backfill --format iceberg tags the older versions off main, each read as the service's version; again: nothing to do", async () => {
    const mainBefore = metadataJson().refs.main!["snapshot-id"]
    const backfill = () =>
      cli([
        "backfill",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--format",
        "iceberg",
        "--from",
        "0",
        "--to",
        "7",
        "--every-version",
        "--out",
        out,
        "--json",
        ...flags
      ])
    const r = await backfill()
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).totals).toMatchObject({ exported: 4, alreadyExported: 4 })
    for (const version of [0, 1, 2, 4]) {
      expect(await readTag(`v${version}`), `v${version}`).toEqual(expectedRows(await listing(svc, "places", version)))
    }
    const m = metadataJson()
    expect(m.refs.main!["snapshot-id"]).toBe(mainBefore)
    // v4 builds on v3: the changes between them (its nearest older tag), not a full copy.
    expect(parentOfReplace(snapshotOf("v4")).summary["catalog-export.mode"]).toBe("changes")
    expect(await readTag("v7")).toEqual(expectedRows(await listing(svc, "places", 7)))

    const again = await backfill()
    expect(again.code, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout).totals).toMatchObject({ exported: 0, alreadyExported: 8 })
    expect(metadataJson()).toEqual(m)
  })

  it("retention --require-exported counts the tags; raising the minimum to 2 expires v0 and v1 and the files only they used", async () => {
    const retention = (...extra: Array<string>) =>
      cli([
        "retention",
        "--catalog",
        DEMO,
        "--minimum",
        "2",
        "--require-exported",
        out,
        "--layer",
        "places",
        ...extra,
        ...flags
      ])
    const before = metadataJson()
    const dry = await retention("--dry-run", "--json")
    expect(dry.code, dry.stderr).toBe(0)
    const planned = JSON.parse(dry.stdout) as {
      tables: Array<{ location: string; tags: Array<string>; files: Array<string> }>
    }
    expect(planned.tables).toHaveLength(1)
    expect(planned.tables[0]).toMatchObject({ location: tableUri() })
    expect([...planned.tables[0]!.tags].sort()).toEqual(["v0", "v1"])
    const doomed = planned.tables[0]!.files
    expect(doomed.length).toBeGreaterThan(0)
    for (const uri of doomed) expect(fs.existsSync(new URL(uri)), uri).toBe(true)
    expect(metadataJson()).toEqual(before)

    const r = await retention()
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`table ${tableUri()}: expired 2 tags`)
    const m = metadataJson()
    expect(Object.keys(m.refs).filter((t) => t === "v0" || t === "v1")).toEqual([])
    for (const uri of doomed) expect(fs.existsSync(new URL(uri.replace(/\/$/, ""))), uri).toBe(false)
    for (const version of [2, 3, 4, 5, 6, 7]) {
      expect(await readTag(`v${version}`), `v${version}`).toEqual(expectedRows(await listing(svc, "places", version)))
    }
  })

  it("compact rewrites main's mostly deleted files (or says there is nothing to do); every live tag reads as before", async () => {
    const r = await cli(["compact", "--out", out, "--catalog", DEMO, "--layer", "places", "--json"])
    expect(r.code, r.stderr).toBe(0)
    const done = JSON.parse(r.stdout) as { location: string; metadataFile?: string; deleteFilesAfter: number }
    expect(done.location).toBe(tableUri())
    if (done.metadataFile !== undefined) {
      expect(snapshotOf("main").summary.operation).toBe("replace")
      expect(done.deleteFilesAfter).toBeLessThanOrEqual(1)
    }
    for (const version of [2, 3, 4, 5, 6, 7]) {
      expect(await readTag(`v${version}`), `v${version}`).toEqual(expectedRows(await listing(svc, "places", version)))
    }
    const missing = await cli(["compact", "--out", out, "--catalog", DEMO, "--layer", "roads"])
    expect(missing.code, missing.stderr).toBe(2)
    expect(failureLines(missing).join("\n")).toContain("There is no Iceberg table at")
  })

  it("plan --format iceberg, two shards and commit make one snapshot of the shards' data files; a shard run with --format arrow is refused", async () => {
    const sharded = path.join(svc.dir, "sharded")
    const planned = await cli([
      "plan",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "6",
      "--format",
      "iceberg",
      "--shards",
      "2",
      "--parts",
      "4",
      "--out",
      sharded,
      ...flags
    ])
    expect(planned.code, planned.stderr).toBe(0)
    const { plan } = JSON.parse(planned.stdout.trim()) as { plan: string }
    expect(plan).toBe(path.join(sharded, "demo", "places", "data", "version=6", "_plan.json"))
    const arrow = await cli(["export", "--plan", plan, "--shard", "0", "--format", "arrow", ...flags])
    expect(arrow.code, arrow.stderr).toBe(2)
    expect(failureLines(arrow).join("\n")).toContain("--format arrow does not fit this plan")
    for (const shard of [0, 1]) {
      const r = await cli(["export", "--plan", plan, "--shard", String(shard), ...flags])
      expect(r.code, r.stderr).toBe(0)
    }
    const committed = await cli(["commit", "--plan", plan, "--json", ...flags])
    expect(committed.code, committed.stderr).toBe(0)
    const table = pathToFileURL(path.join(sharded, "demo", "places")).href
    expect(JSON.parse(committed.stdout)).toMatchObject({ status: "committed", table: { location: table, tag: "v6" } })
    const rows = (await reader.read(table, "v6")).map((r) => r.partition)
    expect(rows).toEqual((await listing(svc, "places", 6)).map((p) => p.partition).sort())
    // Late runs of a committed plan (a retried worker) find the commit and do nothing.
    const again = await cli(["commit", "--plan", plan, ...flags])
    expect(again.code, again.stderr).toBe(0)
    const late = await cli(["export", "--plan", plan, "--shard", "1", ...flags])
    expect(late.code, late.stderr).toBe(0)
    expect(late.stdout).toContain("Already committed")
  })

  it("a nightly-export job config with format iceberg (run) commits the latest version to the table, then is up to date", async () => {
    const nightlyOut = path.join(svc.dir, "nightly")
    const config = path.join(svc.dir, "nightly-iceberg.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        job: "nightly-export",
        lookupUrl: svc.lookupUrl,
        credentials: await svc.credentialsFile(),
        out: nightlyOut,
        format: "iceberg",
        parts: 2,
        incremental: true,
        layers: [{ catalog: DEMO, layer: "places" }]
      })
    )
    const first = await cli(["run", config, "--json"])
    expect(first.code, first.stderr).toBe(0)
    const table = pathToFileURL(path.join(nightlyOut, "demo", "places")).href
    expect(JSON.stringify(JSON.parse(first.stdout))).toContain(`"location":"${table}"`)
    const rows = (await reader.read(table, "v7")).map((r) => r.partition)
    expect(rows).toEqual((await listing(svc, "places", 7)).map((p) => p.partition).sort())
    const second = await cli(["run", config])
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toContain("Up to date")
  })

  it("a layer directory holding a table refuses a Parquet export, and one holding Parquet refuses a table: exit 2, nothing written", async () => {
    const before = metadataJson()
    const plain = await cli([
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "4",
      "--out",
      out,
      ...flags
    ])
    expect(plain.code, plain.stderr).toBe(2)
    expect(failureLines(plain).join("\n")).toContain("holds an Apache Iceberg table")
    expect(fs.existsSync(path.join(tableDir(), "version=4"))).toBe(false)
    expect(metadataJson()).toEqual(before)

    const other = path.join(svc.dir, "plain")
    const files = await cli([
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "4",
      "--out",
      other,
      ...flags
    ])
    expect(files.code, files.stderr).toBe(0)
    const listed = () => fs.readdirSync(path.join(other, "demo", "places")).sort()
    const was = listed()
    const table = await cli([
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--format",
      "iceberg",
      "--version",
      "5",
      "--out",
      other,
      ...flags
    ])
    expect(table.code, table.stderr).toBe(2)
    expect(failureLines(table).join("\n")).toMatch(/places/)
    expect(listed()).toEqual(was)
  })
})
