import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { isListing, type Proxy, startProxy } from "../reliability/support.ts"
import { cli } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, latestVersion, listing, manifestOf, publish, readExport } from "../versions/support.ts"

/**
 * Backfill through the real CLI: volatile layers refused, versions in which the layer did not change
 * skipped (with `layerVersions`, or said why not), and versions exported in parallel. The service has
 * versions 0..3 (each changes places); 4 and 5 change only tiles, 6 changes places again.
 */

const { cleanup, tempDir } = cleanups()
let svc: TestService
let proxy: Proxy
let flags: Array<string>

const committed = (root: string, layer = "places") => {
  const dir = path.join(root, "demo", layer)
  return fs.existsSync(dir)
    ? fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, "_manifest.json"))).map((d) =>
      Number(d.replace("version=", ""))
    ).sort((a, b) => a - b)
    : []
}
const backfill = (layer: string, from: number, to: number, out: string, ...extra: Array<string>) =>
  cli([
    "backfill",
    "--catalog",
    DEMO,
    "--layer",
    layer,
    "--from",
    String(from),
    "--to",
    String(to),
    "--out",
    out,
    ...flags,
    ...extra
  ])

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 40, versions: 4 } })
  proxy = await startProxy(svc.url)
  cleanup.push(() => proxy.close(), () => svc.close())
  flags = ["--lookup-url", proxy.lookupUrl, "--credentials", await svc.credentialsFile(), "--log-format", "json"]
  expect(await latestVersion(svc)).toBe(3)
  expect(await publish(svc, [{ partition: "t-1", data: "{}" }], "tiles", "application/geo+json")).toBe(4)
  expect(await publish(svc, [{ partition: "t-2", data: "{}" }], "tiles", "application/geo+json")).toBe(5)
  expect(await publish(svc, [{ partition: "place-new", data: JSON.stringify({ v: 6 }) }])).toBe(6)
})

describe("backfill", () => {
  it("refuses a volatile layer with exit 2 and one sentence, and writes nothing", async () => {
    const out = path.join(tempDir("jobs-backfill-"), "out")
    const result = await backfill("traffic", 0, 3, out)
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split("\n")).toEqual([
      `catalog-export: Layer 'traffic' of ${DEMO} is volatile: it keeps no versions to backfill, only its current data; ` +
      `export that with catalog-export export --catalog ${DEMO} --layer traffic --out DIR.`
    ])
    expect(fs.existsSync(out)).toBe(false)
  })

  it("skips the versions in which the layer did not change, whose state an exported version holds", async () => {
    // Independently of layerVersions: the listings of 4 and 5 are those of 3.
    const at3 = await listing(svc, "places", 3)
    expect(await listing(svc, "places", 4)).toEqual(at3)
    expect(await listing(svc, "places", 5)).toEqual(at3)
    expect(await listing(svc, "places", 6)).not.toEqual(at3)

    const out = path.join(tempDir("jobs-backfill-"), "out")
    const result = await backfill("places", 0, 6, out)
    expect(result.code, result.stderr).toBe(0)
    const lines = result.stdout.trim().split("\n")
    const counts = await Promise.all([0, 1, 2, 3, 6].map(async (v) => (await listing(svc, "places", v)).length))
    expect(lines.slice(0, 4).map((l) => l.replace(/ partitions.*/, ""))).toEqual(
      [0, 1, 2, 3].map((v) => `version ${v}: exported ${counts[v]}`)
    )
    expect(lines[4]).toBe(
      "versions 4..5: the layer did not change since version 3, whose export holds this state; skipped"
    )
    expect(lines[5]).toMatch(new RegExp(`^version 6: exported ${counts[4]} partitions`))
    expect(lines[6]).toBe(
      `Backfill of ${DEMO} places 0..6: 5 exported, 0 already exported, 2 unchanged, 0 without data, 0 deleted, 0 not published yet.`
    )
    expect(committed(out)).toEqual([0, 1, 2, 3, 6])
    for (const v of [3, 6]) {
      expect(await readExport(path.join(out, "demo", "places", `version=${v}`))).toEqual(
        expectedRows(await listing(svc, "places", v))
      )
    }

    // The retention guard agrees: nothing of versions 0..5 is missing from this output.
    const guard = await cli([
      "retention",
      "--catalog",
      DEMO,
      "--minimum",
      "6",
      "--require-exported",
      out,
      "--layer",
      "places",
      "--dry-run",
      ...flags
    ])
    expect(guard.code, guard.stderr).toBe(0)
    expect(guard.stdout).toContain("Dry run: nothing was changed.")

    // A second run starting inside the unchanged range skips it too: version 3 is exported.
    const again = await backfill("places", 4, 5, out, "--json")
    expect(again.code, again.stderr).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({
      job: "backfill",
      versions: [{ version: 4, through: 5, status: "unchanged", since: 3 }],
      totals: { exported: 0, unchanged: 2 }
    })

    // --every-version exports them anyway, with the rows of version 3.
    const every = await backfill("places", 4, 5, out, "--every-version")
    expect(every.code, every.stderr).toBe(0)
    expect(committed(out)).toEqual([0, 1, 2, 3, 4, 5, 6])
    expect(await readExport(path.join(out, "demo", "places", "version=4"))).toEqual(
      await readExport(path.join(out, "demo", "places", "version=3"))
    )
  })

  it("skips the versions before a layer's first data as having none", async () => {
    const config = (await (await svc.get(`/config/v1/catalogs/${DEMO}`)).json()) as Record<string, any>
    const put = await svc.get(`/config/v1/catalogs/${DEMO}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...config,
        layers: [...config.layers, {
          id: "fresh",
          name: "Fresh",
          layerType: "versioned",
          contentType: "application/json"
        }]
      })
    })
    expect(put.status).toBe(202)
    expect(await publish(svc, [{ partition: "f-1", data: "{}" }], "fresh")).toBe(7)
    const out = path.join(tempDir("jobs-backfill-"), "out")
    const result = await backfill("fresh", 0, 7, out)
    expect(result.code, result.stderr).toBe(0)
    const lines = result.stdout.trim().split("\n")
    expect(lines[0]).toBe("versions 0..6: the layer has no data yet, skipped")
    expect(lines[1]).toMatch(/^version 7: exported 1 partition,/)
    expect(committed(out, "fresh")).toEqual([7])
  })

  it("says why it exports every version when the service cannot tell in which versions the layer changed", async () => {
    proxy.decide = (
      req
    ) => (req.url?.includes("/layerVersions") ? { kind: "respond", status: 404 } : { kind: "forward" })
    try {
      const out = path.join(tempDir("jobs-backfill-"), "out")
      const result = await backfill("places", 3, 5, out)
      expect(result.code, result.stderr).toBe(0)
      expect(result.stdout).toContain(
        "Note: the service does not tell in which versions the layer changed (layerVersions answered 404), so every version is exported."
      )
      expect(committed(out)).toEqual([3, 4, 5])
    } finally {
      proxy.decide = () => ({ kind: "forward" })
    }
  })

  it("--version-concurrency exports versions at once, each exactly as alone, reported in version order", async () => {
    const out = path.join(tempDir("jobs-backfill-"), "out")
    const from = proxy.log.length
    const result = await backfill(
      "places",
      0,
      6,
      out,
      "--version-concurrency",
      "3",
      "--every-version",
      "--concurrency",
      "6"
    )
    expect(result.code, result.stderr).toBe(0)
    const exported = result.stdout.trim().split("\n").filter((l) => /^version \d+: exported/.test(l)).map((l) =>
      Number(/^version (\d+)/.exec(l)![1])
    )
    expect(exported).toEqual([0, 1, 2, 3, 4, 5, 6])
    for (let v = 0; v <= 6; v++) {
      const dir = path.join(out, "demo", "places", `version=${v}`)
      expect(await readExport(dir), `version ${v}`).toEqual(expectedRows(await listing(svc, "places", v)))
      expect(manifestOf(dir)).toMatchObject({ version: v, mode: "full" })
    }
    // Versions were exported at the same time: their manifests' spans overlap.
    const spans = [0, 1, 2, 3, 4, 5, 6].map((v) => manifestOf(path.join(out, "demo", "places", `version=${v}`))).map((
      m
    ) => [Date.parse(m.startedAt), Date.parse(m.finishedAt)] as const)
    expect(spans.some(([s1, e1], i) => spans.some(([s2, e2], j) => i !== j && s1 < e2 && s2 < e1))).toBe(true)
    expect(proxy.log.slice(from).filter(isListing).length).toBeGreaterThanOrEqual(7)
    // The cursor is the newest version, whatever order the exports finished in.
    expect(JSON.parse(fs.readFileSync(path.join(out, "demo", "places", "_state.json"), "utf8")).lastVersion).toBe(6)
  })
})
