/**
 * How many blob requests an export keeps in flight: the adaptive limit (client/Concurrency.ts) on
 * its own, then through the real CLI against a plain node:http catalog server (test/bench/fast-server.ts)
 * that answers 429 + `Retry-After: 1` to a blob read arriving while `--limit` reads are in flight, as a
 * platform limits an app. Every export is read back by DuckDB and compared with the server's checksums.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { ConcurrencyLimit } from "../../src/client/Concurrency.ts"
import { waitForLine } from "../bench/support.ts"
import { cli, ROOT } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups } from "../support/files.ts"

const { cleanup, tempDir } = cleanups()

/** One round trip of `ms` for every request in flight, `rounds` times, each round filling the window. */
const roundTrips = (limit: ConcurrencyLimit, rounds: number, ms: (round: number) => number, start = 0) => {
  let now = start
  for (let round = 0; round < rounds; round++) {
    const window = limit.current
    const sentAt = now
    for (let i = 0; i < window; i++) limit.sent()
    now += ms(round)
    for (let i = 0; i < window; i++) limit.answered(sentAt, now)
  }
  return now
}

describe("the adaptive limit", () => {
  it("doubles each full round while latency stays flat, up to its cap", () => {
    const limit = ConcurrencyLimit.adaptive(256)
    expect(limit.current).toBe(32)
    roundTrips(limit, 1, () => 50)
    expect(limit.current).toBe(64)
    roundTrips(limit, 1, () => 50, 100)
    expect(limit.current).toBe(128)
    roundTrips(limit, 10, () => 50, 1000)
    expect(limit.current).toBe(256)
    expect(limit.highest).toBe(256)
  })

  it("cuts to four fifths of what the service answered, once per round of throttled answers, then grows additively", () => {
    const limit = ConcurrencyLimit.adaptive(1024)
    const now = roundTrips(limit, 1, () => 50)
    expect(limit.current).toBe(64)
    // 40 of 64 answered in this round, then ten throttled answers to requests of the same round: one cut, to 0.8 x 40.
    for (let i = 0; i < 64; i++) limit.sent()
    for (let i = 0; i < 40; i++) limit.answered(now, now + 50)
    for (let i = 0; i < 10; i++) limit.throttle(now, now + 50)
    // The first of those answers ended the last round: 39 answered in this one, 0.8 x 39.
    expect(limit.current).toBe(31)
    expect(limit.throttled).toBe(10)
    for (let i = 0; i < 14; i++) limit.answered(now, now + 50)
    expect(limit.inFlight).toBe(0)
    const before = limit.current
    roundTrips(limit, 3, () => 50, now + 100)
    // Additive now: one per round.
    expect(limit.current).toBe(before + 3)
  })

  it("shrinks while answers take twice as long, never below where it started", () => {
    const limit = ConcurrencyLimit.adaptive(1024)
    let now = roundTrips(limit, 2, () => 20)
    expect(limit.current).toBe(128)
    // The first slow round's fastest answer is still one of the fast round's.
    now = roundTrips(limit, 1, () => 100, now)
    const before = limit.current
    now = roundTrips(limit, 5, () => 100, now)
    expect(limit.current).toBeLessThan(before * 0.6)
    roundTrips(limit, 40, () => 100, now)
    expect(limit.current).toBe(32)
  })

  it("pinned: the same number whatever happens, throttled answers counted", () => {
    const limit = ConcurrencyLimit.fixed(8)
    for (let i = 0; i < 8; i++) limit.sent()
    limit.throttle(0, 10)
    roundTrips(limit, 5, (round) => 10 * (round + 1), 10)
    expect(limit.current).toBe(8)
    expect(limit.throttled).toBe(1)
    expect(limit.adaptive).toBe(false)
  })
})

const TSX = path.join(ROOT, "node_modules", "tsx", "dist", "cli.mjs")

interface Limited {
  readonly child: ChildProcess
  readonly url: string
  readonly lookupUrl: string
  readonly catalog: string
  readonly credentials: string
  readonly stats: () => Promise<{ blobs: number; throttled: number; peakInFlight: number }>
}

/** test/bench/fast-server.ts: `partitions` blobs of ~1 KiB, each answered after `latencyMs`, `limit` reads at once. */
const startLimited = async (dir: string, partitions: number, latencyMs: number, limit: number): Promise<Limited> => {
  const credentials = path.join(dir, "credentials.properties")
  const child = spawn(process.execPath, [
    TSX,
    path.join(ROOT, "test", "bench", "fast-server.ts"),
    ...["--partitions", String(partitions), "--min-bytes", "512", "--max-bytes", "1536"],
    ...["--latency-ms", String(latencyMs), "--limit", String(limit), "--credentials-out", credentials]
  ], { stdio: ["ignore", "pipe", "inherit"] })
  cleanup.push(() => void child.kill("SIGTERM"))
  const line = await waitForLine(child, "fast-server")
  return {
    child,
    url: line.url!,
    lookupUrl: line.lookupUrl!,
    catalog: line.catalog!,
    credentials,
    stats: async () => (await (await fetch(`${line.url}/bench/stats`)).json()) as never
  }
}

/** DuckDB's rows of an export directory: every blob's sha1 must be the checksum the server listed. */
const expectExact = async (dir: string, partitions: number) => {
  const rows = await readParquet(dir)
  expect(rows).toHaveLength(partitions)
  // DuckDB's own sha1 of each blob against the checksum the server listed.
  for (const row of rows) expect(row.data_sha1).toBe(row.checksum)
  expect(new Set(rows.map((r) => r.partition)).size).toBe(partitions)
}

const exportArgs = (server: Limited, out: string, extra: ReadonlyArray<string> = []) => [
  "export",
  ...["--catalog", server.catalog, "--layer", "blobs", "--out", out],
  ...["--lookup-url", server.lookupUrl, "--credentials", server.credentials, "--json"],
  ...extra
]

describe("against a service that throttles past 48 reads in flight (429, Retry-After: 1)", () => {
  it("the default finds the limit: every blob exact, at most a few percent throttled", async () => {
    const dir = tempDir("concurrency-")
    const partitions = 4000
    const server = await startLimited(dir, partitions, 20, 48)
    const out = path.join(dir, "out")
    const r = await cli(exportArgs(server, out), { timeoutMs: 120_000 })
    expect(r.stderr).not.toContain("catalog-export:")
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as {
      status: string
      dir: string
      partitions: number
      concurrency: { adaptive: boolean; limit: number; highest: number; throttled: number }
    }
    expect(report).toMatchObject({ status: "exported", partitions })
    const stats = await server.stats()
    expect(report.concurrency.adaptive).toBe(true)
    expect(report.concurrency.throttled).toBe(stats.throttled)
    // It went past its start (32) to the limit, and settled under it.
    expect(report.concurrency.highest).toBeGreaterThan(32)
    expect(report.concurrency.limit).toBeLessThanOrEqual(64)
    expect(stats.peakInFlight).toBeGreaterThan(32)
    expect(stats.throttled / partitions).toBeLessThanOrEqual(0.05)
    await expectExact(report.dir, partitions)
  }, 180_000)

  it("--concurrency pins the number: it stays under the limit, nothing throttled, in flight shown", async () => {
    const dir = tempDir("concurrency-")
    const partitions = 600
    const server = await startLimited(dir, partitions, 20, 48)
    const r = await cli(
      exportArgs(server, path.join(dir, "out"), ["--concurrency", "16", "--progress-interval", "100ms"]),
      { timeoutMs: 120_000 }
    )
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as { dir: string; concurrency: unknown }
    expect(report.concurrency).toEqual({ adaptive: false, limit: 16, highest: 16, throttled: 0 })
    const stats = await server.stats()
    expect(stats.peakInFlight).toBeLessThanOrEqual(16)
    expect(stats.throttled).toBe(0)
    // JSON progress lines (not a terminal) carry the limit and what is in flight.
    const progress = r.stderr.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    expect(progress.length).toBeGreaterThan(0)
    for (const line of progress) {
      expect(line.limit === null || line.limit === 16).toBe(true)
      expect(line.inFlight).toBeLessThanOrEqual(16)
      expect(line.throttled).toBe(0)
    }
    await expectExact(report.dir, partitions)
  }, 180_000)

  it("four exports at once each adapt on their own and none starves", async () => {
    const dir = tempDir("concurrency-")
    const partitions = 2000
    const server = await startLimited(dir, partitions, 20, 48)
    const started = performance.now()
    const runs = await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        const r = await cli(exportArgs(server, path.join(dir, `out-${i}`)), { timeoutMs: 170_000 })
        return { r, seconds: (performance.now() - started) / 1000 }
      })
    )
    for (const { r } of runs) {
      expect(r.stderr).not.toContain("catalog-export:")
      expect(r.code).toBe(0)
    }
    const stats = await server.stats()
    // Four start at 32 each against 48: throttled at first, then each settles to its share. A limit
    // that did not back off (or a pinned 256) would see most reads throttled.
    expect(stats.throttled / (4 * partitions)).toBeLessThanOrEqual(0.3)
    const seconds = runs.map((x) => x.seconds)
    // Each finished within twice the time of the first to finish: they shared the limit.
    expect(Math.max(...seconds)).toBeLessThanOrEqual(2 * Math.min(...seconds) + 2)
    for (const { r } of runs) await expectExact((JSON.parse(r.stdout) as { dir: string }).dir, partitions)
  }, 200_000)
})
