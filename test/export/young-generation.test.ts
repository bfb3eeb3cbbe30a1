/**
 * An export's memory stays flat over a long run (docs/exporting.md, "Memory"): the command keeps V8's
 * young generation at the size it starts with (src/cli/main.ts), where V8 would grow it, run by run,
 * to 64 MiB of collected garbage. Measured in the real CLI by a module Node preloads (NODE_OPTIONS
 * --import) that samples the young generation's size through node:v8 and writes the largest at exit:
 * a line per thread (the encoder thread loads it too).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectMatchesService, serviceState } from "../reliability/support.ts"
import { cli } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const PARTITIONS = 20_000

const PROBE = `
import { appendFileSync } from "node:fs"
import { getHeapSpaceStatistics } from "node:v8"
let largest = 0
const sample = () => {
  largest = Math.max(largest, getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size)
}
setInterval(sample, 10).unref()
process.on("exit", () => {
  sample()
  appendFileSync(process.env.YOUNG_GENERATION_OUT, largest + "\\n")
})
`

let svc: TestService
let probe: string
beforeAll(async () => {
  svc = await startService({ seed: { partitions: PARTITIONS, versions: 1, blobBytes: 1024 } })
  probe = path.join(svc.dir, "young-generation-probe.mjs")
  fs.writeFileSync(probe, PROBE)
}, 120_000)
afterAll(() => svc?.close())

/** `catalog-export ARGS` with the probe: the largest size of a young generation of its threads, in bytes. */
const youngGeneration = async (name: string, args: ReadonlyArray<string>) => {
  const out = path.join(svc.dir, `${name}.size`)
  const r = await cli(args, {
    env: { NODE_OPTIONS: `--import=${pathToFileURL(probe).href}`, YOUNG_GENERATION_OUT: out }
  })
  expect(r.code, r.stderr).toBe(0)
  const sizes = fs.readFileSync(out, "utf8").trim().split("\n").map(Number)
  expect(sizes.every((n) => n > 0), sizes.join(", ")).toBe(true)
  return { run: r, bytes: Math.max(...sizes) }
}

describe("the young generation", () => {
  it(`stays at its starting size through an export of ${PARTITIONS} partitions`, async () => {
    const start = await youngGeneration("version", ["--version"])

    const dir = path.join(svc.dir, "out")
    const exported = await youngGeneration("export", [
      ...["export", "--catalog", DEMO, "--layer", "places", "--out", dir, "--json"],
      ...["--lookup-url", svc.lookupUrl, "--credentials", await svc.credentialsFile()]
    ])
    const report = JSON.parse(exported.run.stdout) as { dir: string; partitions: number }
    expect(report.partitions).toBe(PARTITIONS)
    expectMatchesService(await readParquet(report.dir), await serviceState(svc, "places", 0))
    // Growing, V8 doubles it (to 64 MiB on Node 24 here, from 8); kept, it stays where it started.
    expect(exported.bytes).toBeLessThan(2 * start.bytes)
  }, 120_000)
})
