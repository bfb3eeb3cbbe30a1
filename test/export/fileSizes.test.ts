/**
 * Files sized by bytes, not by metadata parts (export/Merging.ts): through the real CLI against the
 * real local service, no empty data file, one file for a small export, files of about
 * --max-file-bytes for a large one, a kill while merging followed by a rerun exact; every file read
 * back by DuckDB or apache-arrow and compared with what the service holds, and the manifest naming
 * exactly the files present.
 */
import { tableFromIPC } from "apache-arrow"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectMatchesService, serviceState } from "../reliability/support.ts"
import { cli, serviceFlags } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { filesBelow, readJson, sha1, sha256File } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { changes, expectedRows, manifestOf, publish, readExport } from "../versions/support.ts"

const PARTITIONS = 1000
const BLOB_BYTES = 2048

let svc: TestService
let flags: Array<string>

beforeAll(async () => {
  svc = await startService({ seed: { partitions: PARTITIONS, versions: 2, blobBytes: BLOB_BYTES } })
  flags = await serviceFlags(svc)
})
afterAll(() => svc?.close())

const exportPlaces = (
  out: string,
  version: number,
  extra: ReadonlyArray<string> = [],
  env: Record<string, string> = {}
) =>
  cli(
    ["export", "--catalog", DEMO, "--layer", "places", "--version", String(version), "--out", out, "--parts", "4"]
      .concat(extra, flags),
    { env }
  )

const versionDir = (out: string, version: number) => path.join(out, "demo", "places", `version=${version}`)

/** The manifest names exactly the data files present, each with its size and sha256; nothing else is left. */
const expectManifestIsTheFiles = (dir: string) => {
  const manifest = manifestOf(dir)
  expect(filesBelow(dir).sort()).toEqual(
    [...manifest.files.map((f: { path: string }) => f.path), "_manifest.json"].sort()
  )
  for (const f of manifest.files as Array<{ path: string; bytes: number; sha256: string; rows: number }>) {
    expect(fs.statSync(path.join(dir, f.path)).size).toBe(f.bytes)
    expect(sha256File(path.join(dir, f.path))).toBe(f.sha256)
    expect(f.rows).toBeGreaterThan(0)
  }
  return manifest
}

/** The Arrow files' rows, read by apache-arrow, in the shape serviceState compares. */
const readArrow = (dir: string) =>
  filesBelow(dir).filter((f) => f.endsWith(".arrow")).flatMap((f) => {
    const table = tableFromIPC(fs.readFileSync(path.join(dir, f)))
    return table.toArray().map((row) => ({
      partition: row.partition as string,
      partition_version: row.partition_version as bigint,
      data_handle: row.data_handle as string,
      checksum: row.checksum as string | null,
      data_size: row.data_size as bigint | null,
      data_sha1: row.data === null ? null : sha1(row.data as Uint8Array)
    }))
  }).sort((a, b) => (a.partition < b.partition ? -1 : 1))

describe("files sized by bytes", () => {
  it("a small layer of 4 parts, in Parquet and Arrow, is one file of each", async () => {
    const out = path.join(svc.dir, "small")
    const run = await exportPlaces(out, 0, ["--format", "both"])
    expect(run.code, run.stderr).toBe(0)
    const dir = versionDir(out, 0)
    const manifest = expectManifestIsTheFiles(dir)
    expect(manifest.files.map((f: { format: string }) => f.format).sort()).toEqual(["arrow", "parquet"])
    for (const f of manifest.files) expect(f.rows).toBe(PARTITIONS)
    const expected = await serviceState(svc, "places", 0)
    expectMatchesService(await readParquet(dir), expected)
    expectMatchesService(readArrow(dir), expected)
  })

  it("a changes run with one changed partition writes exactly one data file", async () => {
    const out = path.join(svc.dir, "changes")
    const full = await exportPlaces(out, 1)
    expect(full.code, full.stderr).toBe(0)
    const version = await publish(svc, [{ partition: "changed-one", data: JSON.stringify({ changed: true }) }])
    const run = await exportPlaces(out, version, ["--mode", "changes"])
    expect(run.code, run.stderr).toBe(0)
    const dir = versionDir(out, version)
    const manifest = expectManifestIsTheFiles(dir)
    expect(manifest).toMatchObject({ mode: "changes", baseVersion: 1, partitions: 1 })
    expect(manifest.files).toHaveLength(1)
    expect(await readExport(dir)).toEqual(expectedRows(await changes(svc, "places", 1, version)))
  })

  it("a layer larger than --max-file-bytes is files of about that size, rows exact", async () => {
    const out = path.join(svc.dir, "large")
    const maxFileBytes = 400_000
    // Blobs of random bytes, uncompressed: about 2 MB in four parts of about 500 kB each.
    const run = await exportPlaces(out, 0, ["--compression", "none", "--max-file-bytes", String(maxFileBytes)])
    expect(run.code, run.stderr).toBe(0)
    const dir = versionDir(out, 0)
    const manifest = expectManifestIsTheFiles(dir)
    const sizes: Array<number> = manifest.files.map((f: { bytes: number }) => f.bytes)
    const total = sizes.reduce((n, b) => n + b, 0)
    expect(total).toBeGreaterThan(PARTITIONS * BLOB_BYTES)
    // Without merging: four parts' full files and four small tails; merged, at most one file is below half the size.
    expect(sizes.length).toBeLessThanOrEqual(Math.ceil(total / maxFileBytes) + 1)
    expect(sizes.filter((b) => b < maxFileBytes / 2).length).toBeLessThanOrEqual(1)
    for (const b of sizes) expect(b).toBeLessThan(maxFileBytes * 1.25)
    expect(manifest.files.some((f: { path: string }) => f.path.startsWith("part-s0-"))).toBe(true)
    expectMatchesService(await readParquet(dir), await serviceState(svc, "places", 0))
  })

  it("a run killed while merging, run again, is exact and leaves only the files its manifest names", async () => {
    const out = path.join(svc.dir, "killed")
    const args = ["--format", "both"]
    const killed = await exportPlaces(out, 0, args, { CATALOG_EXPORT_CRASH_AT: "merged:1" })
    expect(killed.signal, killed.stderr).toBe("SIGKILL")
    const dir = versionDir(out, 0)
    expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)
    const mergedBefore = filesBelow(dir).filter((f) => /^part-s0-.+\.(parquet|arrow)$/.test(f))
    expect(mergedBefore).toHaveLength(1)

    const rerun = await exportPlaces(out, 0, args)
    expect(rerun.code, rerun.stderr).toBe(0)
    const manifest = expectManifestIsTheFiles(dir)
    expect(manifest.files).toHaveLength(2)
    expect(manifest.files.map((f: { path: string }) => f.path)).not.toContain(mergedBefore[0])
    const expected = await serviceState(svc, "places", 0)
    expectMatchesService(await readParquet(dir), expected)
    expectMatchesService(readArrow(dir), expected)
    expect(readJson(path.join(out, "demo", "places", "_state.json")).lastVersion).toBe(0)
  })
})
