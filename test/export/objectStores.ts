/**
 * What every object store must do for an export, run through the real CLI against a real server of
 * the store's protocol (s3rver for s3:// and gs://, Azurite for az://): the tests of each store's file
 * call these inside their own `describe`. Everything written is read back from the store and checked
 * by DuckDB against what the service holds.
 */
import { expect, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { expectMatchesService, serviceState } from "../reliability/support.ts"
import { cli, failureLines } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { readJson } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

/** A store as the shared tests use it. Keys are relative to the bucket or container. */
export interface StoreUnderTest {
  /** The `--out` of `prefix`: `s3://bucket/prefix`, `az://container/prefix`, ... */
  readonly out: (prefix: string) => string
  /** The environment the CLI needs to reach the store. */
  readonly env: Record<string, string>
  readonly keys: (prefix?: string) => Promise<Array<string>>
  /** Copies every object below `prefix` to a new local directory (for DuckDB), returns it. */
  readonly download: (prefix: string) => Promise<string>
  /** Files below `prefix` being uploaded, invisible to readers: S3 multipart uploads, Azure names with staged blocks only. */
  readonly pending: (prefix?: string) => Promise<Array<string>>
  /**
   * Azure: blocks a killed run staged stay until Azure discards them (seven days; they cannot be
   * deleted); S3's uploads are aborted by the next commit.
   */
  readonly keepsStaged: boolean
}

/** A service to export from, with what it holds in `places` at version 0. */
export interface ExportService {
  readonly svc: TestService
  readonly credentials: string
  readonly expected: Awaited<ReturnType<typeof serviceState>>
}

export interface Context extends ExportService {
  readonly store: StoreUnderTest
  /** The service of the large file (`bigFile`), started once per test file when a test first needs it. */
  readonly big: () => Promise<ExportService>
}

export const PARTITIONS = 600

const exportService = async (svc: TestService): Promise<ExportService> => ({
  svc,
  credentials: await svc.credentialsFile(),
  expected: await serviceState(svc, "places", 0)
})

/**
 * Starts the service the store tests export from (600 partitions of version 0 in `places`), with its
 * expected state; `big` starts the one of the large file (2,000 blobs of 16 KiB) the first time it is
 * asked for, and `close` closes both.
 */
export const startExportService = async () => {
  const service = await exportService(
    await startService({ seed: { partitions: PARTITIONS, versions: 2, blobBytes: 256 } })
  )
  let big: Promise<ExportService> | undefined
  return {
    ...service,
    big: () =>
      big ??= startService({ seed: { partitions: 2000, versions: 1, blobBytes: 16 * 1024 } }).then(exportService),
    close: async () => {
      await service.svc.close()
      if (big !== undefined) await (await big).svc.close()
    }
  }
}

/** Runs the CLI against the context's service and store. */
export const runWith = (c: Context) => (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  cli([...args, "--lookup-url", c.svc.lookupUrl, "--credentials", c.credentials, "--quiet"], {
    env: { ...c.store.env, ...env }
  })

export const exportArgs = (out: string, extra: ReadonlyArray<string> = [], parts = 3) => [
  "export",
  "--catalog",
  DEMO,
  "--layer",
  "places",
  "--version",
  "0",
  "--out",
  out,
  "--parts",
  String(parts),
  ...extra
]

/** The export's rows, read by DuckDB from a download of the store. */
export const rowsIn = async (store: StoreUnderTest, prefix: string) =>
  readParquet(path.join(await store.download(prefix), "demo", "places", "version=0"))

/** What a committed export leaves in the store: its data files, its manifest, the cursor, the run reports; nothing half-done. */
export const expectCommitted = async (store: StoreUnderTest, prefix: string) => {
  const keys = await store.keys(`${prefix}/`)
  const local = await store.download(prefix)
  const manifest = readJson(path.join(local, "demo", "places", "version=0", "_manifest.json"))
  expect(readJson(path.join(local, "_run.json"))).toMatchObject({
    job: "export",
    exitCode: 0,
    partitions: manifest.partitions
  })
  // One report per run (_runs/<UTC start>-<job>.json), the newest also as _run.json.
  const reports = keys.filter((k) => k.startsWith(`${prefix}/_runs/`)).sort()
  expect(reports.length).toBeGreaterThan(0)
  for (const k of reports) expect(k).toMatch(/\/_runs\/\d{8}T\d{6}\.\d{3}Z-export\.json$/)
  expect(readJson(path.join(local, reports.at(-1)!.slice(prefix.length + 1)))).toEqual(
    readJson(path.join(local, "_run.json"))
  )
  expect(keys.filter((k) => !reports.includes(k))).toEqual([
    `${prefix}/_run.json`,
    `${prefix}/demo/places/_state.json`,
    ...[
      ...manifest.files.map((f: { path: string }) => `${prefix}/demo/places/version=0/${f.path}`),
      `${prefix}/demo/places/version=0/_manifest.json`
    ].sort()
  ].sort())
  expect(await store.pending(`${prefix}/`)).toEqual([])
  return manifest
}

const isExportOutput = (key: string) => /\.(parquet|arrow)$/.test(key) || key.endsWith("_manifest.json")

/**
 * The export's contract on a store: files, manifest and cursor written and read back; a re-run does
 * nothing; a kill and a resume; the retention guard reading the store. `bigFile`: a 32 MB file
 * streamed in parts, the run killed mid-upload (nothing visible) and run again. `shards`: plan, two
 * shards, commit.
 */
export const exportsToStore = (
  context: () => Context,
  options: { readonly bigFile: boolean; readonly shards: boolean }
) => {
  const run = (args: ReadonlyArray<string>, env?: Record<string, string>) => runWith(context())(args, env)

  it("writes the files, the manifest and the cursor into the store; a re-run does nothing", async () => {
    const { store, expected } = context()
    const out = store.out("nightly")
    const first = await run(exportArgs(out))
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain(`-> ${out}/demo/places/version=0\n`)
    expectMatchesService(await rowsIn(store, "nightly"), expected)
    const manifest = await expectCommitted(store, "nightly")
    expect(manifest).toMatchObject({
      catalogHrn: DEMO,
      layerId: "places",
      version: 0,
      partitions: PARTITIONS,
      mode: "full"
    })
    // Three parts' small files, merged in the store into one.
    expect(manifest.files).toHaveLength(1)
    expect(manifest.files[0]).toMatchObject({ rows: PARTITIONS, path: expect.stringMatching(/^part-s0-/) })

    const again = await run(exportArgs(out))
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toMatch(/^Already exported .*nothing to do/m)
    expect(await expectCommitted(store, "nightly")).toEqual(manifest)
  })

  if (options.bigFile) {
    it("streams a large file up in parts; a run killed mid-upload leaves nothing visible, and the next one completes", async () => {
      const { store } = context()
      // One file, no compression: a file of ~1.2 MB per 600 rows is not enough for an 8 MiB part, so the blobs are big here.
      const big = await context().big()
      const args = [
        ...exportArgs(store.out("big"), ["--compression", "none"], 1),
        "--lookup-url",
        big.svc.lookupUrl,
        "--credentials",
        big.credentials,
        "--quiet"
      ]
      // Killed once the first 8 MiB part of its 32 MB data file is on its way. Only the data file counts:
      // a store's listing of pending names can catch a small file between its two listings.
      const dataFile = /^big\/demo\/places\/version=0\/part-[^/]+\.parquet$/
      let child: ChildProcess | undefined
      let seen: Array<string> = []
      let watching = true
      const watch = (async () => {
        while (watching && seen.length === 0) {
          seen = (await store.pending("big/")).filter((key) => dataFile.test(key))
          if (seen.length > 0) child?.kill("SIGKILL")
          else await new Promise((resolve) => setTimeout(resolve, 10))
        }
      })()
      const killed = await cli(args, { env: store.env, onSpawn: (c) => (child = c) }).finally(() => {
        watching = false
      })
      await watch
      expect(killed.signal).toBe("SIGKILL")
      // Mid-upload: the data file's parts are in the store, no reader sees the file.
      expect(seen).toHaveLength(1)
      expect((await store.keys("big/")).filter(isExportOutput)).toEqual([])

      const rerun = await cli(args, { env: store.env })
      expect(rerun.code, rerun.stderr).toBe(0)
      // The killed run's file had a name of its own: its parts are never committed.
      expect(await store.pending("big/")).toEqual(store.keepsStaged ? seen : [])
      const dir = path.join(await store.download("big"), "demo", "places", "version=0")
      const manifest = readJson(path.join(dir, "_manifest.json"))
      expect(manifest.files).toHaveLength(1)
      expect(manifest.files[0].bytes).toBeGreaterThan(8 * 1024 * 1024)
      expectMatchesService(await readParquet(dir), big.expected)
    })
  }

  it("resumes after a kill from the checkpoints in the store", async () => {
    const { store, expected } = context()
    const out = store.out("resumed")
    const killed = await run(exportArgs(out), { CATALOG_EXPORT_CRASH_AT: "checkpoint:2" })
    expect(killed.signal).toBe("SIGKILL")
    expect((await store.keys("resumed/")).filter((k) => /\/_parts\/part-\d\.json$/.test(k))).toHaveLength(2)
    const rerun = await run(exportArgs(out, ["--json"]))
    expect(rerun.code, rerun.stderr).toBe(0)
    expectMatchesService(await rowsIn(store, "resumed"), expected)
    await expectCommitted(store, "resumed")
  })

  it("resumes after a kill while the parts' files were merged: the first run's merged file goes, the rows are exact", async () => {
    const { store, expected } = context()
    const out = store.out("merging")
    const killed = await run(exportArgs(out), { CATALOG_EXPORT_CRASH_AT: "merged:1" })
    expect(killed.signal).toBe("SIGKILL")
    const merged = (await store.keys("merging/")).filter((k) => /\/part-s0-[^/]+\.parquet$/.test(k))
    expect(merged).toHaveLength(1)
    const rerun = await run(exportArgs(out))
    expect(rerun.code, rerun.stderr).toBe(0)
    expectMatchesService(await rowsIn(store, "merging"), expected)
    const manifest = await expectCommitted(store, "merging")
    expect(manifest.files).toHaveLength(1)
    expect(`merging/demo/places/version=0/${manifest.files[0].path}`).not.toBe(merged[0])
  })

  if (options.shards) {
    it("runs a sharded export: plan, two shards, commit", async () => {
      const { store, expected } = context()
      const out = store.out("sharded")
      const planned = await run([
        "plan",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--version",
        "0",
        "--shards",
        "2",
        "--out",
        out
      ])
      expect(planned.code, planned.stderr).toBe(0)
      const { plan } = JSON.parse(planned.stdout.trim().split("\n").at(-1)!)
      expect(plan).toBe(`${out}/demo/places/version=0/_plan.json`)
      const shards = await Promise.all([0, 1].map((i) => run(["export", "--plan", plan, "--shard", String(i)])))
      for (const shard of shards) expect(shard.code, shard.stderr).toBe(0)
      expect((await store.keys("sharded/")).filter((k) => k.endsWith("_manifest.json"))).toEqual([])
      const committed = await run(["commit", "--plan", plan])
      expect(committed.code, committed.stderr).toBe(0)
      expectMatchesService(await rowsIn(store, "sharded"), expected)
      const keys = await store.keys("sharded/")
      // The plan's bookkeeping is gone; each shard's parts were merged into one file of its own.
      expect(keys.filter((k) => /_plan\.json$|\/_parts\/|\/_shards\//.test(k))).toEqual([])
      expect(keys.filter((k) => /\.parquet$/.test(k)).map((k) => /\/part-(s\d)-[^/]+$/.exec(k)?.[1]).sort()).toEqual([
        "s0",
        "s1"
      ])
    })
  }

  it("writes an Iceberg table (--format iceberg): absolute store URIs throughout, version-hint.text, the data files read by DuckDB; a re-run finds the tag", async () => {
    const { expected, store } = context()
    const first = await run([...exportArgs(store.out("table"), ["--format", "iceberg", "--json"])])
    expect(first.code, first.stderr).toBe(0)
    const { table } = JSON.parse(first.stdout) as { table: { location: string; metadataFile: string; tag: string } }
    expect(table.tag).toBe("v0")
    expect(table.location).toMatch(/^[a-z0-9]+:\/\/.+\/table\/demo\/places$/)
    expect(table.metadataFile).toBe(`${table.location}/metadata/v1.metadata.json`)
    const local = path.join(await store.download("table"), "demo", "places")
    expect(fs.readFileSync(path.join(local, "metadata", "version-hint.text"), "utf8").trim()).toBe("1")
    const metadata = readJson<{
      location: string
      refs: Record<string, { "snapshot-id": number }>
      snapshots: Array<{ "snapshot-id": number; "manifest-list": string }>
    }>(path.join(local, "metadata", "v1.metadata.json"))
    expect(metadata.location).toBe(table.location)
    expect(Object.keys(metadata.refs).sort()).toEqual(["main", "v0"])
    const keys = await store.keys("table/")
    for (const snapshot of metadata.snapshots) {
      expect(snapshot["manifest-list"].startsWith(`${table.location}/metadata/`)).toBe(true)
      expect(keys).toContain(`table/demo/places/${snapshot["manifest-list"].slice(table.location.length + 1)}`)
    }
    // A full export: its directory's data files hold the whole version.
    expectMatchesService(await readParquet(path.join(local, "data", "version=0")), expected)
    expect(await store.pending("table/")).toEqual([])
    const again = await run(exportArgs(store.out("table"), ["--format", "iceberg"]))
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain("Already exported")
    // Nothing of the table changed: only the run's report was added.
    const tableKeys = (all: Array<string>) => all.filter((k) => k.startsWith("table/demo/"))
    expect(tableKeys(await store.keys("table/"))).toEqual(tableKeys(keys))
  })

  it("is what retention's export guard reads: manifests in the store prove versions exported", async () => {
    const { store } = context()
    const guarded = (location: string) =>
      run([
        "retention",
        "--catalog",
        DEMO,
        "--minimum",
        "1",
        "--require-exported",
        location,
        "--layer",
        "places",
        "--dry-run"
      ])
    const proven = await guarded(store.out("nightly"))
    expect(proven.code, proven.stderr).toBe(0)
    expect(proven.stdout).toMatch(/Raising the minimum version to 1 deletes versions 0\.\.0/)
    const elsewhere = store.out("elsewhere")
    const empty = await guarded(elsewhere)
    expect(empty.code).toBe(2)
    expect(failureLines(empty)[0]).toContain(`version 0 of layer 'places' has no committed export in ${elsewhere}`)
  })
}

/**
 * A bad output location: one sentence matching `says`, exit `code`, no secret in the output, and
 * nothing written to the store.
 */
export const expectRefused = async (
  c: Context,
  out: string,
  expected: { readonly code: number; readonly says: RegExp; readonly env?: Record<string, string> },
  secrets: ReadonlyArray<string> = []
) => {
  const before = await c.store.keys()
  const pending = await c.store.pending()
  const result = await runWith(c)(exportArgs(out), expected.env)
  expect(result.code, result.stderr).toBe(expected.code)
  const lines = failureLines(result)
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(expected.says)
  for (const secret of secrets) {
    expect(result.stderr).not.toContain(secret)
    expect(result.stdout).not.toContain(secret)
  }
  expect(await c.store.keys()).toEqual(before)
  expect(await c.store.pending()).toEqual(pending)
}
