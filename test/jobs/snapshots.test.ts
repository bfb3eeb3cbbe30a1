import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { cli, serviceFlags } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, listing, readExport } from "../versions/support.ts"

/** Keep-last-N for the snapshot directories of a volatile layer, through `export` and the nightly job. */

const { cleanup, tempDir } = cleanups()
let svc: TestService
let flags: Array<string>

const snapshots = (out: string) =>
  fs.readdirSync(path.join(out, "demo", "traffic")).filter((n) => n.startsWith("snapshot=")).sort()
const committed = (out: string) =>
  snapshots(out).filter((n) => fs.existsSync(path.join(out, "demo", "traffic", n, "_manifest.json")))
/** Snapshot names have a resolution of one second: the next run must start in another second. */
const nextSecond = () => new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20))

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 10, versions: 2 } })
  cleanup.push(() => svc.close())
  flags = await serviceFlags(svc)
})

describe("--keep-snapshots", () => {
  it("keeps the newest N snapshots and removes older ones, and leftovers of killed runs older than them", async () => {
    const out = tempDir("jobs-snapshots-")
    const exportTraffic = () =>
      cli(["export", "--catalog", DEMO, "--layer", "traffic", "--out", out, "--keep-snapshots", "2", ...flags])
    for (let i = 0; i < 2; i++) {
      expect((await exportTraffic()).code).toBe(0)
      await nextSecond()
    }
    const [first, second] = committed(out)
    // A killed run long ago left an unfinished snapshot (no manifest); a run in progress would be newer.
    const killed = path.join(out, "demo", "traffic", "snapshot=20000101T000000Z")
    fs.mkdirSync(path.join(killed, "_parts"), { recursive: true })
    const future = path.join(out, "demo", "traffic", "snapshot=29991231T235959Z")
    fs.mkdirSync(path.join(future, "_parts"), { recursive: true })

    const third = await exportTraffic()
    expect(third.code, third.stderr).toBe(0)
    const kept = committed(out)
    expect(kept).toHaveLength(2)
    expect(kept[0]).toBe(second)
    expect(third.stdout).toMatch(/removed 2 older snapshots \(keeping the newest\): /)
    expect(fs.existsSync(path.join(out, "demo", "traffic", first!))).toBe(false)
    expect(fs.existsSync(killed)).toBe(false)
    expect(fs.existsSync(future)).toBe(true)
    expect(snapshots(out)).toEqual([...kept, "snapshot=29991231T235959Z"])
    // What stays is whole: the newest snapshot holds the layer's data.
    expect(await readExport(path.join(out, "demo", "traffic", kept[1]!))).toEqual(
      expectedRows(await listing(svc, "traffic"))
    )
  })

  it("keepSnapshots in a nightly job", async () => {
    const dir = tempDir("jobs-snapshots-")
    const out = path.join(dir, "out")
    const config = path.join(dir, "nightly.json")
    fs.writeFileSync(
      config,
      JSON.stringify({ job: "nightly-export", out, keepSnapshots: 1, layers: [{ catalog: DEMO, layer: "traffic" }] })
    )
    for (let i = 0; i < 3; i++) {
      const run = await cli(["run", config, ...flags, "--json"])
      expect(run.code, run.stderr).toBe(0)
      const layer = (JSON.parse(run.stdout) as {
        layers: Array<{ status: string; snapshot: string; removedSnapshots?: Array<string> }>
      }).layers[0]!
      expect(layer.status).toBe("exported")
      expect(committed(out)).toEqual([`snapshot=${layer.snapshot}`])
      expect(layer.removedSnapshots ?? []).toHaveLength(i === 0 ? 0 : 1)
      await nextSecond()
    }
  })
})
