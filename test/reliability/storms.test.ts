/**
 * Throttling storms from the local service's fault injection (`stormMs`: every request answers 429
 * with Retry-After). The storm is switched on once the export is under way (after a number of blobs
 * went through), so it hits the middle of a run on any machine: the test changes the window of the
 * running service's fault options, which the fault middleware reads on every request.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FaultOptions, noFaults } from "../../src/server/Faults.ts"
import { cli, failureLines } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { filesBelow } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import {
  type Exchange,
  type Expected,
  expectMatchesService,
  isBlobRequest,
  type Proxy,
  serviceState,
  startProxy
} from "./support.ts"

type Storm = { -readonly [K in keyof FaultOptions]: FaultOptions[K] }

let svc: TestService
let proxy: Proxy
let credentials: string
let expected: Map<string, Expected>
// Installs the fault middleware with a storm window that never comes; the tests move it.
const faults: Storm = { ...noFaults, retryAfterSeconds: 1, stormMs: [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] }
const stormOn = () => {
  faults.stormMs = [0, Number.MAX_SAFE_INTEGER]
}
const stormOff = () => {
  faults.stormMs = [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]
}
const dirs: Array<string> = []
const tempDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "reliability-storm-"))
  dirs.push(dir)
  return dir
}

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 300, versions: 1, blobBytes: 64 }, faults })
  proxy = await startProxy(svc.url)
  credentials = await svc.credentialsFile()
  expected = await serviceState(svc, "places", 0)
})
afterAll(async () => {
  await proxy?.close()
  await svc?.close()
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

/** Starts the storm once `afterBlobs` blob requests went through; ends it `lastingMs` later (never when undefined). */
const stormAfter = (afterBlobs: number, lastingMs: number | undefined) => {
  let blobs = 0
  proxy.log.length = 0
  proxy.decide = (req) => {
    if (req.method === "GET" && /\/data\/[^/]+$/.test(req.url ?? "") && ++blobs === afterBlobs) {
      stormOn()
      if (lastingMs !== undefined) setTimeout(stormOff, lastingMs)
    }
    return { kind: "forward" }
  }
}

const exportArgs = (out: string, extra: ReadonlyArray<string> = []) => [
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
  "1",
  "--concurrency",
  "8",
  "--lookup-url",
  proxy.lookupUrl,
  "--credentials",
  credentials,
  "--log-format",
  "json",
  ...extra
]

/** Every retry after a 429 came no sooner than its Retry-After asked. */
const expectRetryAfterHonoured = (log: ReadonlyArray<Exchange>) => {
  let checked = 0
  for (const [i, e] of log.entries()) {
    if (e.status !== 429) continue
    const next = log.slice(i + 1).find((later) => later.url === e.url && later.method === e.method)
    if (next === undefined) continue
    checked++
    // Retry-After: 1 (a few ms of timer slack allowed).
    expect(next.at - e.at, `${e.url} retried too early`).toBeGreaterThanOrEqual(990)
  }
  return checked
}

describe("a throttling storm", () => {
  it("is waited out as Retry-After tells, and the run finishes with the service's data", async () => {
    stormOff()
    stormAfter(40, 3_000)
    const out = tempDir()
    const run = await cli(exportArgs(out))
    expect(run.code, run.stderr).toBe(0)
    const throttled = proxy.log.filter((e) => e.status === 429)
    // Eight requests in flight, each answered 429 about three times in three seconds.
    expect(throttled.length).toBeGreaterThanOrEqual(8)
    expect(expectRetryAfterHonoured(proxy.log)).toBeGreaterThanOrEqual(8)
    // Waiting as told is ~1 retry per second per request (3 s, some timer slack), not a retry storm of its own.
    expect(throttled.length).toBeLessThan(8 * 10)
    const summary = run.stdout.split("\n").find((l) => l.startsWith("Exported "))
    expect(Number(/(\d+) retries/.exec(summary ?? "")?.[1])).toBeGreaterThanOrEqual(throttled.length)
    // The wait is not silent: the first retry after a 429 says so on stderr, once, with what and until when.
    const notices = run.stderr.split("\n").flatMap((l) => {
      const message = l.startsWith("{") ? (JSON.parse(l) as { message?: unknown; logLevel?: string }) : {}
      return typeof message.message === "string" && message.message.startsWith("retrying ") ? [message] : []
    })
    expect(notices.map((n) => n.logLevel)).toEqual(["INFO"])
    expect(notices[0]!.message).toMatch(
      /^retrying GET http:\/\/\S+ \(429\): transient failures are retried for up to 10m or \d+ retries per request \(this one until \d\d:\d\d:\d\d UTC at the latest\)/
    )
    expectMatchesService(await readParquet(path.join(out, "demo", "places", "version=0")), expected)
  })

  it("that outlasts the retry budget stops the run with exit code 5, a safe-to-rerun sentence and only .partial files; the next run completes", async () => {
    stormOff()
    // After 270 of 300 blobs: a first batch of 256 rows is in the open .partial files.
    stormAfter(270, undefined)
    const out = tempDir()
    const dir = path.join(out, "demo", "places", "version=0")
    const failed = await cli(exportArgs(out, ["--retry-budget", "3s"]))
    stormOff()
    expect(failed.code, failed.stderr).toBe(5)
    const sentences = failureLines(failed)
    expect(sentences).toHaveLength(1)
    expect(sentences[0]).toMatch(/429/)
    expect(sentences[0]).toMatch(/safe to run the same command again/)
    expect(proxy.log.filter((e) => e.status === 429).length).toBeGreaterThan(0)
    expectRetryAfterHonoured(proxy.log)
    // Nothing that looks finished: no manifest, no cursor, data only in .partial files.
    const left = filesBelow(out)
    expect(left.filter((f) => f.endsWith("_manifest.json") || f.endsWith("_state.json"))).toEqual([])
    const data = left.filter((f) => /\.(parquet|arrow)(\.partial)?$/.test(f))
    expect(data.length).toBeGreaterThan(0)
    expect(data.filter((f) => !f.endsWith(".partial"))).toEqual([])
    const reports = left.filter((f) => f.startsWith("_runs/"))
    expect(reports).toHaveLength(1)
    expect(reports[0]).toMatch(/^_runs\/\d{8}T\d{6}\.\d{3}Z-export\.json$/)
    expect(left.filter((f) => !data.includes(f) && !reports.includes(f)).sort()).toEqual([
      "_run.json",
      "demo/places/version=0/_plan.json"
    ])
    // The run report says what happened and that a retry is worth it.
    expect(JSON.parse(fs.readFileSync(path.join(out, "_run.json"), "utf8"))).toMatchObject({
      job: "export",
      status: "failed",
      exitCode: 5,
      retry: true
    })

    proxy.log.length = 0
    const rerun = await cli(exportArgs(out))
    expect(rerun.code, rerun.stderr).toBe(0)
    expect(filesBelow(out).filter((f) => f.endsWith(".partial") || f.includes("_parts"))).toEqual([])
    expect(fs.existsSync(path.join(dir, "_manifest.json"))).toBe(true)
    expectMatchesService(await readParquet(dir), expected)
    expect(proxy.log.filter(isBlobRequest).length).toBe(300)
  })
})
