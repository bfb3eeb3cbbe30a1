import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { icebird, type IcebirdReader } from "../sinks/iceberg/support.ts"
import { cli, serviceFlags } from "../support/cli.ts"
import { startStore, type TestStore } from "../support/s3.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { listing } from "./support.ts"

/**
 * `--format iceberg` into an S3 bucket (the test's S3 server answers conditional PUT), and an export
 * killed with SIGKILL at each step of its commit, then run again: every tag reads as the service's
 * version (icebird, an independent reader), nothing is committed twice.
 */

let svc: TestService
let store: TestStore
let flags: Array<string>
let reader: IcebirdReader

beforeAll(async () => {
  ;[svc, store] = await Promise.all([startService({ seed: { partitions: 40, versions: 5 } }), startStore()])
  flags = await serviceFlags(svc)
  reader = await icebird(store)
}, 60_000)
afterAll(async () => {
  await reader?.close()
  await store?.close()
  await svc?.close()
})

const exportTo = (out: string, version: number, env: Record<string, string> = {}, ...extra: Array<string>) =>
  cli(
    [
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
      "2",
      ...extra,
      ...flags
    ],
    { env: { ...store.env, ...env } }
  )

/** Partition ids and versions of a tag as icebird reads them, against the service's listing. */
const expectTag = async (table: string, version: number) => {
  const rows = (await reader.read(table, `v${version}`)).map((r) => [r.partition, Number(r.partition_version)])
  const expected = (await listing(svc, "places", version))
    .map((p) => [p.partition, p.version])
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0))
  expect(rows, `v${version}`).toEqual(expected)
}

describe("export --format iceberg on S3", () => {
  it("a full export and a changes run commit tags v2 and v4 under s3://, each read back as the service's version", async () => {
    const out = `s3://${store.bucket}/tables`
    const full = await exportTo(out, 2)
    expect(full.code, full.stderr).toBe(0)
    const table = `s3://${store.bucket}/tables/demo/places`
    expect(full.stdout).toContain(`table ${table}, tag v2, metadata ${table}/metadata/v1.metadata.json`)
    const changes = await exportTo(out, 4, {}, "--mode", "changes")
    expect(changes.code, changes.stderr).toBe(0)
    await expectTag(table, 2)
    await expectTag(table, 4)
    const keys = await store.keys("tables/demo/places/")
    expect(keys.filter((k) => /\/_(plan|parts|shards)/.test(k))).toEqual([])
  })
})

describe("an export killed at each step of its commit", () => {
  it.each(["manifest:1", "staged:1", "versioned:1", "committed:1"])(
    "killed at %s, then run again: the table has each tag once and reads as the service's versions",
    async (at) => {
      const out = path.join(svc.dir, `killed-${at.replace(":", "-")}`)
      const table = pathToFileURL(path.join(out, "demo", "places")).href
      const first = await exportTo(out, 1)
      expect(first.code, first.stderr).toBe(0)
      const killed = await exportTo(out, 3, { CATALOG_EXPORT_CRASH_AT: at }, "--mode", "changes")
      expect(killed.signal, killed.stderr).toBe("SIGKILL")
      // Readable at its last commit (and, killed after the create, at the new one).
      await expectTag(table, 1)
      const again = await exportTo(out, 3, {}, "--mode", "changes")
      expect(again.code, again.stderr).toBe(0)
      await expectTag(table, 1)
      await expectTag(table, 3)
      const dir = path.join(out, "demo", "places", "metadata")
      const hint = fs.readFileSync(path.join(dir, "version-hint.text"), "utf8").trim()
      const metadata = JSON.parse(fs.readFileSync(path.join(dir, `v${hint}.metadata.json`), "utf8")) as {
        snapshots: Array<{ summary: Record<string, string> }>
      }
      const of3 = metadata.snapshots.filter((s) =>
        s.summary["catalog-export.catalog-version"] === "3" && s.summary.operation !== "replace"
      )
      expect(of3).toHaveLength(1)
      // The killed run's bookkeeping is gone: only data files are left in its directory.
      const run = path.join(out, "demo", "places", "data", "version=3")
      expect(fs.readdirSync(run).filter((f) => !f.endsWith(".parquet"))).toEqual([])
    }
  )
})
