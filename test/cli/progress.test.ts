/**
 * Progress and the run report through the real CLI against the local service: on a terminal (a
 * pseudo-terminal from util-linux `script`) a bar per running export, redrawn in place, with the
 * total the versions answer gives, and the report table; otherwise JSON progress lines with the
 * same fields; the report as `--json` and as `_run.json` in the output directory.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { noFaults } from "../../src/server/Faults.ts"
import { cli, ROOT } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups, readJson } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const { cleanup, tempDir } = cleanups()
let svc: TestService
let credentials: string

beforeAll(async () => {
  // Slow enough (latency per request, few downloads at once) for a run to last a few seconds.
  svc = await startService({ seed: { partitions: 300, versions: 3 }, faults: { ...noFaults, latencyMs: [15, 25] } })
  credentials = await svc.credentialsFile()
  cleanup.push(() => svc.close())
})

/** The service's own count of a layer's partitions at its latest version (versions answer, then the listing). */
const expectedCount = async (layer: string) => {
  const latest = ((await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()) as {
    version: number
  }).version
  const listing =
    (await (await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?version=${latest}`)).json()) as {
      partitions: Array<unknown>
    }
  return { latest, count: listing.partitions.length }
}

const nightly = (fields: Record<string, unknown>) => {
  const dir = tempDir("progress-")
  const out = path.join(dir, "out")
  const file = path.join(dir, "nightly.json")
  fs.writeFileSync(
    file,
    JSON.stringify({
      job: "nightly-export",
      out,
      lookupUrl: svc.lookupUrl,
      credentials,
      format: "parquet",
      parts: 2,
      ...fields
    })
  )
  return { file, out }
}

/** Runs the CLI with a terminal as stdout and stderr, as a person would; what the terminal received. */
const onTerminal = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; screen: string }>((resolve, reject) => {
    const command = [process.execPath, path.join(ROOT, "src/cli/bin.mjs"), ...args].map((a) => `'${a}'`).join(" ")
    const child = spawn("script", ["-qec", command, "/dev/null"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] })
    let screen = ""
    child.stdout.on("data", (c: Buffer) => (screen += c.toString("utf8")))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, screen }))
  })

const ESC = "\x1b"

describe("progress on a terminal", () => {
  it("draws a bar per running export, in place, with done/total from the versions answer, and ends with the report table", async () => {
    const job = nightly({
      layerConcurrency: 2,
      concurrency: 4,
      layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "tiles" }]
    })
    const places = await expectedCount("places")
    const tiles = await expectedCount("tiles")
    const { code, screen } = await onTerminal(["run", job.file])
    expect(code, screen).toBe(0)

    // Frames: what is drawn after each erasure of the board (carriage return, cursor up, erase down).
    const frames = screen.split(`${ESC}[J`).filter((f) => f.includes(`${ESC}[2K`))
    const bar = (layer: string, total: number) =>
      new RegExp(`${DEMO} ${layer}\\s+[█░]{20}\\s+(\\d+)% ([\\d,]+)/${total.toLocaleString("en-US")} `)
    const both = frames.filter((f) => bar("places", places.count).test(f) && bar("tiles", tiles.count).test(f))
    expect(both.length, "two exports ran at once, each with its own bar").toBeGreaterThan(0)
    // Two lines redrawn in place: the next frame moves the cursor up one line first.
    expect(screen).toContain(`${ESC}[1A${ESC}[J`)
    const done = frames.flatMap((f) => {
      const m = bar("places", places.count).exec(f)
      return m === null ? [] : [Number(m[2]!.replace(/,/g, ""))]
    })
    expect(done.length).toBeGreaterThan(2)
    expect([...done].sort((a, b) => a - b)).toEqual(done)
    expect(done.at(-1)!).toBeLessThanOrEqual(places.count)
    expect(screen).toMatch(
      /% [\d,]+\/[\d,]+ {2}\d+\.\d MB {2}[\d,]+\/s {2}\d+\.\d MB\/s {2}eta (\d+s|\d+m\d\ds|\?) {2}\d+ retr/
    )

    // The report: a row per layer, and what the exit code means (one file: the small layer's two parts merged).
    const plain = screen.replace(/\r/g, "")
    expect(plain).toMatch(/LAYER\s+OUTCOME\s+PARTITIONS\s+BYTES\s+FILES\s+DURATION\s+RETRIES/)
    expect(plain).toMatch(
      new RegExp(
        `${DEMO} places\\s+exported v${places.latest}\\s+${
          places.count.toLocaleString("en-US")
        }\\s+\\d+\\.\\d MB\\s+1\\s+\\d+\\.\\ds\\s+0`
      )
    )
    expect(plain).toMatch(new RegExp(`${DEMO} tiles\\s+exported v${tiles.latest}\\s+${tiles.count}`))
    expect(plain).toMatch(/^Exit 0: done, or nothing to do\.$/m)
  })

  it("writes a log line above the bars, never into them", async () => {
    // A changes run without a cursor logs why it exports everything while its bar is drawn.
    const job = nightly({ incremental: true, concurrency: 2, layers: [{ catalog: DEMO, layer: "places" }] })
    const { code, screen } = await onTerminal(["run", job.file])
    expect(code, screen).toBe(0)
    const logLine = screen.split("\n").find((l) => l.includes("no cursor (_state.json) yet"))
    expect(logLine).toBeDefined()
    // The line starts clean (the board was erased before it) and holds no bar.
    expect(logLine!.replace(/^\r?(\x1b\[\d*A)?(\x1b\[J)?/, "")).toMatch(/^timestamp=/)
    expect(logLine).not.toMatch(/[█░]/)
  })
})

describe("progress lines when not on a terminal", () => {
  it("carry done/total (from the versions answer, or once listed), percent, rate, ETA, retries and bytes", async () => {
    const job = nightly({
      layerConcurrency: 2,
      concurrency: 2,
      parts: 1,
      layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "traffic" }]
    })
    const places = await expectedCount("places")
    const run = await cli(["run", job.file, "--progress-interval", "200ms"])
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stderr.split("\n").filter((l) => l.includes("\"event\":\"progress\"")).map((l) =>
      JSON.parse(l) as Record<string, any>
    )
    const of = (layer: string) => lines.filter((l) => l.layer === layer)
    expect(of("places").length).toBeGreaterThan(2)
    for (const line of lines) {
      expect(Object.keys(line).sort()).toEqual(
        [
          "event",
          "export",
          "catalog",
          "layer",
          "partitions",
          "total",
          "totalFrom",
          "percent",
          "deleted",
          "bytes",
          "retries",
          "inFlight",
          "limit",
          "throttled",
          "elapsedMs",
          "rate",
          "bytesRate",
          "etaSeconds"
        ].sort()
      )
      expect(line.catalog).toBe(DEMO)
      // Found as it goes (no --concurrency): null before the first blob request, at least 1 after.
      expect(line.limit === null || line.limit >= 1).toBe(true)
      expect(line.throttled).toBe(0)
    }
    // The export does not wait for the versions answer: a line before it has no total yet.
    const counted = of("places").findIndex((l) => l.total !== null)
    expect(counted).toBeGreaterThanOrEqual(0)
    for (const line of of("places").slice(0, counted)) {
      expect(line).toMatchObject({ total: null, totalFrom: null, percent: null })
    }
    for (const line of of("places").slice(counted)) {
      expect(line).toMatchObject({ total: places.count, totalFrom: "versions" })
      expect(line.percent).toBeCloseTo(Math.floor((line.partitions * 1000) / places.count) / 10, 5)
    }
    const done = of("places").map((l) => l.partitions)
    expect([...done].sort((a, b) => a - b)).toEqual(done)
    expect(of("places").some((l) => l.rate > 0 && l.etaSeconds !== null && l.bytes > 0)).toBe(true)
    // A volatile layer has no counted version: unknown until its listing ended, then the listing's count.
    for (const line of of("traffic")) {
      if (line.total === null) expect(line).toMatchObject({ totalFrom: null, percent: null, etaSeconds: null })
      else expect(line).toMatchObject({ total: 100, totalFrom: "listing" })
    }
    expect(of("traffic").some((l) => l.total === 100)).toBe(true)
  })
})

describe("the run report", () => {
  it("is one JSON document with --json and in _run.json: per layer outcome, counts, bytes, files, duration, retries by reason, and the exit code's meaning", async () => {
    const faulty = await startService({
      seed: { partitions: 120, versions: 2 },
      faults: { ...noFaults, throttle: 0.15, retryAfterSeconds: 0, seed: 5 }
    })
    cleanup.push(() => faulty.close())
    const dir = tempDir("report-")
    const out = path.join(dir, "out")
    const file = path.join(dir, "nightly.json")
    const layers = [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "no-such-layer" }]
    fs.writeFileSync(
      file,
      JSON.stringify({
        job: "nightly-export",
        out,
        lookupUrl: faulty.lookupUrl,
        credentials: await faulty.credentialsFile(),
        layers
      })
    )
    const run = await cli(["run", file, "--json"])
    expect(run.code, run.stderr).toBe(4)
    const report = JSON.parse(run.stdout)
    expect(readJson(path.join(out, "_run.json"))).toEqual(report)
    expect(fs.readdirSync(path.join(out, "_runs"))).toEqual([
      `${report.startedAt.replace(/[-:]/g, "")}-nightly-export.json`
    ])
    expect(report).toMatchObject({
      job: "nightly-export",
      exitCode: 4,
      exitMeaning: "not found: check the catalog, layer and version names",
      tool: { name: "catalog-export" }
    })
    expect(Date.parse(report.finishedAt) - Date.parse(report.startedAt)).toBe(report.elapsedMs)
    const [places, missing] = report.layers
    const manifest = readJson(path.join(places.dir, "_manifest.json"))
    expect(places).toMatchObject({
      status: "exported",
      exitCode: 0,
      partitions: manifest.partitions,
      bytes: manifest.bytes,
      files: manifest.files.length
    })
    expect(places.elapsedMs).toBeGreaterThan(0)
    // Retries counted per layer, by what they answered.
    expect(places.retries).toBeGreaterThan(0)
    expect(places.retriesByReason).toEqual({ "429": places.retries })
    expect(missing).toMatchObject({
      status: "failed",
      exitCode: 4,
      exitMeaning: "not found: check the catalog, layer and version names",
      retries: 0
    })
    expect((await readParquet(places.dir)).length).toBe(manifest.partitions)
  })

  it("of a single export: --json, _runs/ and _run.json; a run refused before writing leaves no report", async () => {
    const out = path.join(tempDir("report-single-"), "out")
    const flags = ["--lookup-url", svc.lookupUrl, "--credentials", credentials]
    const run = await cli(["export", "--catalog", DEMO, "--layer", "tiles", "--out", out, "--json", ...flags])
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report).toMatchObject({
      catalog: DEMO,
      layer: "tiles",
      status: "exported",
      exitCode: 0,
      exitMeaning: "done, or nothing to do",
      retries: 0
    })
    expect(readJson(path.join(out, "_run.json"))).toEqual({ job: "export", ...report })

    // A second job into the same output keeps the first one's report: one file per run, the newest also as _run.json.
    const places = await cli(["export", "--catalog", DEMO, "--layer", "places", "--out", out, "--json", ...flags])
    expect(places.code, places.stderr).toBe(0)
    const second = JSON.parse(places.stdout)
    const runs = fs.readdirSync(path.join(out, "_runs")).sort()
    expect(runs).toHaveLength(2)
    expect(runs.map((f) => readJson(path.join(out, "_runs", f)))).toEqual([
      { job: "export", ...report },
      { job: "export", ...second }
    ])
    expect(readJson(path.join(out, "_run.json"))).toEqual({ job: "export", ...second })

    const refused = path.join(tempDir("report-refused-"), "out")
    const failed = await cli(["export", "--catalog", DEMO, "--layer", "nope", "--out", refused, "--json", ...flags])
    expect(failed.code).toBe(4)
    expect(JSON.parse(failed.stdout)).toMatchObject({ status: "failed", exitCode: 4 })
    expect(fs.existsSync(refused)).toBe(false)
  })
})
