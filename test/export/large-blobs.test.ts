/**
 * Blobs larger than the export's byte budget (`--buffer-bytes`), through the real CLI against the
 * local service: each goes alone, so the peak RSS follows one blob, not the number in flight; DuckDB
 * reads every byte back and its sha1 matches what the service holds.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectMatchesService, serviceState } from "../reliability/support.ts"
import { BIN, cli, ROOT } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const MiB = 1024 * 1024
const BLOB_BYTES = 40 * MiB
const BLOBS = 4
const MEASURED = path.join(ROOT, "test", "bench", "measured.mjs")

let svc: TestService
beforeAll(async () => {
  svc = await startService({ seed: { partitions: BLOBS, versions: 1, blobBytes: BLOB_BYTES } })
}, 120_000)
afterAll(() => svc.close())

/** `export --buffer-bytes BUDGET` under measured.mjs: its report and peak RSS. */
const exportWith = async (budget: number, name: string) => {
  const out = path.join(svc.dir, name)
  const usage = path.join(svc.dir, `${name}.jsonl`)
  const r = await cli([
    BIN,
    "export",
    ...["--catalog", DEMO, "--layer", "places", "--out", out, "--buffer-bytes", String(budget)],
    ...["--concurrency", "8", "--lookup-url", svc.lookupUrl, "--credentials", await svc.credentialsFile(), "--json"]
  ], { entry: MEASURED, cwd: ROOT, env: { BENCH_USAGE_FILE: usage }, timeoutMs: 170_000 })
  expect(r.stderr).not.toContain("catalog-export:")
  expect(r.code).toBe(0)
  const report = JSON.parse(r.stdout) as { dir: string; partitions: number; bytes: number }
  expect(report.partitions).toBe(BLOBS)
  expect(report.bytes).toBeGreaterThanOrEqual(BLOBS * BLOB_BYTES * 0.9)
  const { maxRssKb } = JSON.parse(fs.readFileSync(usage, "utf8").trim().split("\n").at(-1)!) as { maxRssKb: number }
  const latest = ((await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()) as {
    version: number
  }).version
  expectMatchesService(await readParquet(report.dir), await serviceState(svc, "places", latest))
  return maxRssKb * 1024
}

describe("blobs larger than the byte budget", () => {
  it("export one at a time, every byte exact: the peak RSS follows one blob, not the downloads in flight", async () => {
    const alone = await exportWith(16 * MiB, "alone")
    // A budget with room for all four: they are in flight at once.
    const together = await exportWith(1024 * MiB, "together")
    expect(alone).toBeLessThan(together - BLOB_BYTES)
  }, 360_000)
})
