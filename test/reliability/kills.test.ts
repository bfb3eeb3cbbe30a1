/**
 * SIGKILL at every stage of an export (the CLI's crash probe CATALOG_EXPORT_CRASH_AT=<point>:<n>, see
 * src/telemetry/CrashProbe.ts): after each kill nothing looks finished, every file left with a final name
 * is a complete file, and the next run ends with output identical, row for row, to an undisturbed
 * run, without fetching again the blobs of parts already committed to a checkpoint.
 */
import { tableFromIPC } from "apache-arrow"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli } from "../support/cli.ts"
import { literal, query, readParquet, withDuckDB } from "../support/duckdb.ts"
import { filesBelow, readJson } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectMatchesService, handleOf, isBlobRequest, type Proxy, serviceState, startProxy } from "./support.ts"

const PARTITIONS = 800

let svc: TestService
let proxy: Proxy
let credentials: string
let root: string
let reference: { rows: Awaited<ReturnType<typeof readParquet>>; manifest: any; state: any }

const exportArgs = (out: string) => [
  "export",
  "--catalog",
  DEMO,
  "--layer",
  "places",
  "--version",
  "0",
  "--out",
  out,
  "--format",
  "both",
  "--parts",
  "3",
  "--list-concurrency",
  "2",
  "--concurrency",
  "8",
  "--lookup-url",
  proxy.lookupUrl,
  "--credentials",
  credentials,
  "--quiet"
]
const versionDir = (out: string) => path.join(out, "demo", "places", "version=0")

beforeAll(async () => {
  svc = await startService({ seed: { partitions: PARTITIONS, versions: 1, blobBytes: 128 } })
  proxy = await startProxy(svc.url)
  credentials = await svc.credentialsFile()
  root = fs.mkdtempSync(path.join(os.tmpdir(), "reliability-kills-"))
  // The undisturbed run every killed-and-resumed run must equal.
  const out = path.join(root, "undisturbed")
  const run = await cli(exportArgs(out))
  expect(run.code, run.stderr).toBe(0)
  const dir = versionDir(out)
  reference = {
    rows: await readParquet(dir),
    manifest: readJson(path.join(dir, "_manifest.json")),
    state: readJson(path.join(out, "demo", "places", "_state.json"))
  }
  expectMatchesService(reference.rows, await serviceState(svc, "places", 0))
})
afterAll(async () => {
  await proxy?.close()
  await svc?.close()
  if (root !== undefined) fs.rmSync(root, { recursive: true, force: true })
})

/** A data file with a final name must be whole: DuckDB or apache-arrow reads all of it. */
const expectComplete = async (file: string) => {
  if (file.endsWith(".parquet")) {
    const rows = await withDuckDB((c) => query(c, `SELECT count(*) AS n FROM read_parquet(${literal(file)})`))
    expect(Number(rows[0]!.n)).toBeGreaterThanOrEqual(0)
  } else {
    expect(() => tableFromIPC(fs.readFileSync(file))).not.toThrow()
  }
}

/** Data handles in the files the checkpoints of `_parts/` name: the parts a resumed run must not fetch again. */
const checkpointedHandles = async (dir: string): Promise<Set<string>> => {
  const partsDir = path.join(dir, "_parts")
  const handles = new Set<string>()
  if (!fs.existsSync(partsDir)) return handles
  for (const name of fs.readdirSync(partsDir).filter((n) => /^part-\d+\.json$/.test(n))) {
    for (const f of readJson(path.join(partsDir, name)).files as Array<{ path: string; format: string }>) {
      if (f.format !== "parquet") continue
      const rows = await withDuckDB((c) =>
        query(c, `SELECT data_handle FROM read_parquet(${literal(path.join(dir, f.path))})`)
      )
      for (const r of rows) handles.add(r.data_handle as string)
    }
  }
  return handles
}

const points: ReadonlyArray<{ readonly at: string; readonly stage: string }> = [
  { at: "listed:400", stage: "during listing" },
  { at: "fetched:300", stage: "during fetching" },
  { at: "written:2", stage: "while writing .partial files" },
  { at: "renamed:1", stage: "between renaming one part's files" },
  { at: "checkpoint:2", stage: "after two of three parts are committed to checkpoints" },
  { at: "merged:1", stage: "between the two merged files (Parquet, Arrow) and the shard manifest" },
  { at: "manifest:1", stage: "between the last rename and the manifest" },
  { at: "committed:1", stage: "after the manifest, before the cursor" }
]

describe("an export stopped with SIGTERM (a scheduler's timeout, a shutdown)", () => {
  it("exits non-zero with a sentence saying it is unfinished, leaves no manifest, and the re-run completes", async () => {
    const out = path.join(root, "sigterm")
    const dir = versionDir(out)
    let child: ChildProcess | undefined
    let blobs = 0
    proxy.decide = (req) => {
      if (req.method === "GET" && /\/data\/[^/]+$/.test(req.url ?? "") && ++blobs === 300) child?.kill("SIGTERM")
      return { kind: "forward" }
    }
    try {
      const stopped = await cli(exportArgs(out), { onSpawn: (c) => (child = c) })
      expect(stopped.code, stopped.stderr).toBe(1)
      expect(stopped.stderr.trim().split("\n")).toEqual([
        expect.stringMatching(/^catalog-export: interrupted .*run the same command again/)
      ])
    } finally {
      proxy.decide = () => ({ kind: "forward" })
    }
    expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(false)
    expect(fs.existsSync(path.join(out, "demo", "places", "_state.json"))).toBe(false)
    const rerun = await cli(exportArgs(out))
    expect(rerun.code, rerun.stderr).toBe(0)
    expect(await readParquet(dir)).toEqual(reference.rows)
  })
})

describe("an export killed with SIGKILL", () => {
  it.each(points)("$stage ($at): nothing looks finished, and the re-run equals an undisturbed run", async ({ at }) => {
    const out = path.join(root, at.replace(":", "-"))
    const dir = versionDir(out)
    const killed = await cli(exportArgs(out), { env: { CATALOG_EXPORT_CRASH_AT: at } })
    expect(killed.signal, `${at} was never reached: ${killed.stdout}${killed.stderr}`).toBe("SIGKILL")

    const manifestWritten = fs.existsSync(path.join(dir, "_manifest.json"))
    expect(manifestWritten).toBe(at === "committed:1")
    // The cursor never points at an export without a manifest (and is moved only after it).
    expect(fs.existsSync(path.join(out, "demo", "places", "_state.json"))).toBe(false)
    for (const file of filesBelow(out).filter((f) => /\.(parquet|arrow)$/.test(f))) {
      await expectComplete(path.join(out, file))
    }

    const skip = manifestWritten ? new Set(reference.rows.map((r) => r.data_handle)) : await checkpointedHandles(dir)
    proxy.log.length = 0
    const rerun = await cli(exportArgs(out))
    expect(rerun.code, rerun.stderr).toBe(0)

    // Blobs of committed parts were not fetched again; every other one exactly once.
    const fetched = proxy.log.filter(isBlobRequest).map(handleOf).sort()
    const wanted = reference.rows.map((r) => r.data_handle).filter((h) => !skip.has(h)).sort()
    expect(fetched).toEqual(wanted)
    if (at === "checkpoint:2") expect(skip.size).toBeGreaterThan(0)

    // Row for row what the undisturbed run wrote; the same manifest counts and cursor; nothing else left.
    expect(await readParquet(dir)).toEqual(reference.rows)
    const manifest = readJson(path.join(dir, "_manifest.json"))
    for (const key of ["catalogHrn", "layerId", "version", "mode", "partitions", "deleted", "bytes"]) {
      expect(manifest[key]).toEqual(reference.manifest[key])
    }
    expect(readJson(path.join(out, "demo", "places", "_state.json")).lastVersion).toBe(reference.state.lastVersion)
    const left = filesBelow(dir)
    expect(left.filter((f) => f !== "_manifest.json").sort()).toEqual(
      manifest.files.map((f: { path: string }) => f.path).sort()
    )
    expect(
      manifest.files.filter((f: { format: string }) => f.format === "arrow").reduce(
        (n: number, f: { rows: number }) => n + f.rows,
        0
      )
    ).toBe(PARTITIONS)
  })
})

describe("a JSON file's write killed mid-way", () => {
  it("leaves a temporary file that the next write of it on this host removes, once its writer is gone", async () => {
    const out = path.join(root, "orphaned-temps")
    const layerDir = path.join(out, "demo", "places")
    fs.mkdirSync(layerDir, { recursive: true })
    // A writer that is gone (a process that has exited) and one that still runs (this test).
    const gone = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ["-e", ""])
      child.on("exit", () => resolve(child.pid!))
    })
    const orphan = `_state.json.${os.hostname()}-${gone}.0badc0de.partial`
    const live = `_state.json.${os.hostname()}-${process.pid}.0badc0de.partial`
    const elsewhere = `_state.json.another-host-${gone}.0badc0de.partial`
    for (const name of [orphan, live, elsewhere]) fs.writeFileSync(path.join(layerDir, name), "{\"catalogHrn\":")
    const run = await cli(exportArgs(out))
    expect(run.code, run.stderr).toBe(0)
    expect(readJson(path.join(layerDir, "_state.json"))).toMatchObject({ lastVersion: 0 })
    expect(fs.readdirSync(layerDir).filter((n) => n.startsWith("_state.json")).sort()).toEqual(
      ["_state.json", elsewhere, live].sort()
    )
  })
})
