import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { icebird, type IcebirdReader } from "../sinks/iceberg/support.ts"
import { cli, serviceFlags } from "../support/cli.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, listing, publish, readExport, readTableTag, tableMetadataJson } from "./support.ts"

/**
 * `--format iceberg` through the real CLI against the local service, beyond iceberg.test.ts: two
 * processes committing to one table at once, a volatile layer's snapshots and their expiry
 * (--keep-snapshots), retention's --json telling what it applied, a late shard and commit of a
 * committed table plan naming the table, and a job's dry run and `check` deciding from the table's
 * tags. Every tag is read back by icebird (an independent reader) and compared with the service.
 */

let svc: TestService
let flags: Array<string>
let reader: IcebirdReader

const exportTable = (out: string, layer: string, ...extra: Array<string>) =>
  cli([
    "export",
    "--catalog",
    DEMO,
    "--layer",
    layer,
    "--format",
    "iceberg",
    "--out",
    out,
    "--parts",
    "2",
    ...extra,
    ...flags
  ])

const tableDir = (out: string, layer: string) => path.join(out, "demo", layer)
const tableUri = (out: string, layer: string) => pathToFileURL(tableDir(out, layer)).href

const metadataJson = (out: string, layer: string) => tableMetadataJson(tableDir(out, layer))

const readTag = (out: string, layer: string, tag: string) => readTableTag(reader, tableUri(out, layer), tag)

const jobConfig = (name: string, body: Record<string, unknown>) => {
  const file = path.join(svc.dir, `${name}.json`)
  fs.writeFileSync(file, JSON.stringify(body))
  return file
}

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 40, versions: 4 } })
  flags = await serviceFlags(svc)
  reader = await icebird()
}, 60_000)
afterAll(async () => {
  await reader?.close()
  await svc?.close()
})

describe("export --format iceberg through the CLI", () => {
  it("two processes committing to one table at once both land (the loser re-applies) or one exits 5 naming the table; every tag reads as the service", async () => {
    const out = path.join(svc.dir, "race")
    const runs = await Promise.all([1, 2, 3].map((v) => exportTable(out, "places", "--version", String(v))))
    const landed: Array<number> = []
    runs.forEach((r, i) => {
      const version = i + 1
      if (r.code === 0) landed.push(version)
      else {
        expect(r.code, r.stderr).toBe(5)
        expect(r.stderr).toContain(tableUri(out, "places"))
      }
    })
    expect(landed.length).toBeGreaterThan(0)
    const m = metadataJson(out, "places")
    // One metadata file per commit, none lost or overwritten: each landed version is a tag.
    expect(Object.keys(m.refs).filter((t) => t !== "main").sort()).toEqual(landed.map((v) => `v${v}`))
    expect(m.snapshots).toHaveLength(landed.length)
    expect(m.refs.main!["snapshot-id"]).toBe(m.refs[`v${Math.max(...landed)}`]!["snapshot-id"])
    for (const version of landed) {
      const expected = expectedRows(await listing(svc, "places", version))
      expect(await readTag(out, "places", `v${version}`), `v${version}`).toEqual(expected)
      // DuckDB on the data files: a full export's directory holds the whole version.
      expect(await readExport(path.join(tableDir(out, "places"), "data", `version=${version}`)), `version=${version}`)
        .toEqual(expected)
    }
    // A failed writer is run again and completes the table.
    for (const version of [1, 2, 3].filter((v) => !landed.includes(v))) {
      const again = await exportTable(out, "places", "--version", String(version))
      expect(again.code, again.stderr).toBe(0)
      expect(await readTag(out, "places", `v${version}`)).toEqual(expectedRows(await listing(svc, "places", version)))
    }
  })

  it("a volatile layer commits a snapshot per run tagged snapshot-<time>, main the newest; --keep-snapshots 2 expires the oldest and the files only it used", async () => {
    const out = path.join(svc.dir, "volatile")
    const tags: Array<string> = []
    for (const run of [1, 2, 3]) {
      // A snapshot's tag names its second: one run per second.
      await new Promise((r) => setTimeout(r, 1100))
      const r = await exportTable(out, "traffic", "--json", ...(run === 3 ? ["--keep-snapshots", "2"] : []))
      expect(r.code, r.stderr).toBe(0)
      const summary = JSON.parse(r.stdout) as Record<string, any>
      const layer = (summary.layers ?? [summary])[0]!
      expect(layer.table).toMatchObject({ location: tableUri(out, "traffic") })
      expect(layer.table.tag).toMatch(/^snapshot-\d{8}T\d{6}Z$/)
      tags.push(layer.table.tag as string)
      if (run === 3) expect(layer.removedSnapshots).toEqual([tags[0]])
      const m = metadataJson(out, "traffic")
      expect(m.refs.main!["snapshot-id"]).toBe(m.refs[layer.table.tag]!["snapshot-id"])
      const expected = expectedRows(await listing(svc, "traffic"))
      expect(expected.length).toBeGreaterThan(0)
      expect(await readTag(out, "traffic", layer.table.tag)).toEqual(expected)
      expect(await readTag(out, "traffic", "main")).toEqual(expected)
    }
    const m = metadataJson(out, "traffic")
    expect(Object.keys(m.refs).sort()).toEqual(["main", tags[1], tags[2]].sort())
    expect(m.snapshots.map((s) => s["snapshot-id"]).sort()).toEqual(
      [m.refs[tags[1]!]!["snapshot-id"], m.refs[tags[2]!]!["snapshot-id"]].sort()
    )
    // The expired snapshot's data files were its own (each run writes the whole layer): gone, the kept ones' stay.
    const dataDir = path.join(tableDir(out, "traffic"), "data")
    const filesOf = (tag: string) => {
      const dir = path.join(dataDir, `snapshot=${tag.slice("snapshot-".length)}`)
      return fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true }).map(String) : []
    }
    expect(filesOf(tags[0]!)).toEqual([])
    for (const tag of tags.slice(1)) {
      expect(filesOf(tag).filter((f) => f.endsWith(".parquet")).length).toBeGreaterThan(0)
    }
    for (const tag of tags.slice(1)) {
      expect(await readTag(out, "traffic", tag), tag).toEqual(expectedRows(await listing(svc, "traffic")))
    }
  })

  it("a late shard and commit of a committed table plan name the table, its tag and snapshot; the snapshot records the layer's content type", async () => {
    const out = path.join(svc.dir, "sharded")
    const planned = await cli([
      "plan",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "2",
      "--format",
      "iceberg",
      "--shards",
      "2",
      "--parts",
      "2",
      "--out",
      out,
      ...flags
    ])
    expect(planned.code, planned.stderr).toBe(0)
    const { plan } = JSON.parse(planned.stdout.trim()) as { plan: string }
    for (const shard of [0, 1]) {
      const r = await cli(["export", "--plan", plan, "--shard", String(shard), ...flags])
      expect(r.code, r.stderr).toBe(0)
    }
    const committed = await cli(["commit", "--plan", plan, "--json", ...flags])
    expect(committed.code, committed.stderr).toBe(0)
    const table = JSON.parse(committed.stdout).table as {
      location: string
      tag: string
      snapshotId: number
      metadataFile: string
    }
    expect(table).toMatchObject({ location: tableUri(out, "places"), tag: "v2" })
    const snapshot = metadataJson(out, "places").snapshots.find((s) => s["snapshot-id"] === table.snapshotId)!
    expect(snapshot.summary["catalog-export.content-type"]).toBe("application/json")
    expect(await readTag(out, "places", "v2")).toEqual(expectedRows(await listing(svc, "places", 2)))

    const named = `table ${table.location}, tag v2 (snapshot ${table.snapshotId}), metadata ${table.metadataFile}`
    const late = await cli(["export", "--plan", plan, "--shard", "1", ...flags])
    expect(late.code, late.stderr).toBe(0)
    expect(late.stdout).toContain(`Already committed: ${named} (`)
    expect(late.stdout).not.toContain("_manifest.json")
    const lateJson = await cli(["export", "--plan", plan, "--shard", "0", "--json", ...flags])
    expect(lateJson.code, lateJson.stderr).toBe(0)
    expect(JSON.parse(lateJson.stdout)).toMatchObject({ status: "already-committed", shard: 0, table })
    const again = await cli(["commit", "--plan", plan, ...flags])
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain(`Already committed: ${named}; nothing to do.`)
    const againJson = await cli(["commit", "--plan", plan, "--json", ...flags])
    expect(JSON.parse(againJson.stdout)).toMatchObject({ status: "already-committed", table, partitions: 40 })
  })

  it("a nightly job with format iceberg: run --dry-run and check decide from the table's tags (up to date, then the changes since the newest tag)", async () => {
    const out = path.join(svc.dir, "nightly")
    const config = jobConfig("nightly-iceberg", {
      job: "nightly-export",
      lookupUrl: svc.lookupUrl,
      credentials: await svc.credentialsFile(),
      out,
      format: "iceberg",
      parts: 2,
      incremental: true,
      layers: [{ catalog: DEMO, layer: "places" }]
    })
    const preview = async () => {
      const r = await cli(["run", config, "--dry-run", "--json"])
      expect(r.code, r.stderr).toBe(0)
      return (JSON.parse(r.stdout) as { layers: Array<Record<string, unknown>> }).layers[0]!
    }
    const decision = async () => {
      const r = await cli(["check", config])
      expect(r.code, r.stdout + r.stderr).toBe(0)
      return r.stdout.split("\n").find((l) => l.includes("decision"))
    }
    expect(await preview()).toMatchObject({ action: "export", version: 3, mode: "full" })
    const first = await cli(["run", config])
    expect(first.code, first.stderr).toBe(0)
    expect(await readTag(out, "places", "v3")).toEqual(expectedRows(await listing(svc, "places", 3)))
    expect(await preview()).toMatchObject({ action: "up-to-date", version: 3 })
    expect(await decision()).toContain(`${DEMO} places: up to date at version 3`)

    const at3 = await listing(svc, "places", 3)
    expect(await publish(svc, [{ partition: at3[0]!.partition, data: JSON.stringify({ v: 4 }) }])).toBe(4)
    expect(await preview()).toMatchObject({ action: "export", version: 4, mode: "changes", baseVersion: 3 })
    expect(await decision()).toContain(`${DEMO} places: a run would export version 4 (the changes since version 3)`)
    // No cursor file beside the table: the decision came from its tags.
    expect(fs.readdirSync(tableDir(out, "places")).sort()).toEqual(["data", "metadata"])
  })

  // Last: it raises the catalog's minimum version.
  it("retention --json reports the expiry as applied: the tags and files removed, and a table that could not be expired says why", async () => {
    const out = path.join(svc.dir, "retention")
    for (const layer of ["places", "roads"]) {
      for (const version of ["0", "1"]) {
        const r = await exportTable(out, layer, "--version", version)
        expect(r.code, r.stderr).toBe(0)
      }
    }
    // A file only v0 of places uses, turned into a directory: planning lists it, removing it fails.
    const v0Dir = path.join(tableDir(out, "places"), "data", "version=0")
    const stuck = path.join(v0Dir, fs.readdirSync(v0Dir).find((f) => f.endsWith(".parquet"))!)
    fs.rmSync(stuck)
    fs.mkdirSync(stuck)
    fs.writeFileSync(path.join(stuck, "keep"), "")
    const r = await cli([
      "retention",
      "--catalog",
      DEMO,
      "--minimum",
      "1",
      "--require-exported",
      out,
      "--layer",
      "places",
      "--layer",
      "roads",
      "--yes",
      "--json",
      ...flags
    ])
    expect(r.code, r.stderr).toBe(0)
    // One JSON document, printed once the minimum was raised and the tables expired.
    const done = JSON.parse(r.stdout) as {
      applied: boolean
      target: number
      tables: Array<{ layerId: string; location: string; tags: Array<string>; files: Array<string>; failed?: string }>
    }
    expect(done).toMatchObject({ applied: true, target: 1 })
    const byLayer = new Map(done.tables.map((t) => [t.layerId, t]))
    const roads = byLayer.get("roads")!
    expect(roads).toMatchObject({ location: tableUri(out, "roads"), tags: ["v0"] })
    expect(roads.failed).toBeUndefined()
    expect(roads.files.length).toBeGreaterThan(0)
    for (const uri of roads.files) expect(fs.existsSync(new URL(uri.replace(/\/$/, ""))), uri).toBe(false)
    expect(Object.keys(metadataJson(out, "roads").refs).sort()).toEqual(["main", "v1"])
    const places = byLayer.get("places")!
    expect(places.location).toBe(tableUri(out, "places"))
    expect(places.failed).toContain(stuck)
    expect(await readTag(out, "places", "v1")).toEqual(expectedRows(await listing(svc, "places", 1)))
  })
})
