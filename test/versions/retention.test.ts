import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { applyRetention, planRetention, RetentionJob } from "../../pipelines/retention.ts"
import { runExport } from "../../src/export/Export.ts"
import { load } from "../../src/export/JobConfig.ts"
import { makePlan } from "../../src/export/Plan.ts"
import { localLocation } from "../../src/retention/ExportLocation.ts"
import { guard } from "../../src/retention/Guard.ts"
import type { Policy } from "../../src/retention/Policy.ts"
import { cli, ROOT, serviceFlags } from "../support/cli.ts"
import { type ClientLayer, clientLayerFor, runWith } from "../support/client.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { latestVersion, listing, manifestOf, minimumVersion, publish } from "./support.ts"

/**
 * Retention housekeeping through the real CLI: every refusal, the export guard, dry runs, policies,
 * `export --raise-minimum`, the nightly job's `raiseMinimum`, and automatic version deletion.
 * Tests run in order on one service whose versions they delete for good: versions 0..7 are seeded
 * (every one changes the versioned layers); later ones are published here to `places` only. The
 * protobuf layer `roads` is exported up front, so that the guard's refusals are about places and tiles.
 */

let svc: TestService
let client: ClientLayer
let flags: Array<string>
let out: string
/** When the seeded versions (0..7) had all been created. */
let seeded: number

const retention = (...args: Array<string>) => cli(["retention", "--catalog", DEMO, ...args, ...flags])

const exportVersion = (layer: string, version: number, target = out, changesFrom?: number) =>
  runWith(
    client,
    Effect.flatMap(
      makePlan({
        catalog: DEMO,
        layer,
        version,
        parts: 1,
        ...(changesFrom === undefined ? {} : { mode: "changes" as const, baseVersion: changesFrom })
      }),
      (plan) => runExport(plan, { out: target, format: "parquet", concurrency: 16, listConcurrency: 1, force: false })
    )
  )

interface VersionInfo {
  readonly version: number
  readonly timestamp: number
}

const versionInfos = async (): Promise<Array<VersionInfo>> => {
  const res = await svc.get(
    `/metadata/v1/catalogs/${DEMO}/versions?startVersion=-1&endVersion=${await latestVersion(svc)}`
  )
  return ((await res.json()) as { versions: Array<VersionInfo> }).versions
}
const readableVersions = async () => (await versionInfos()).map((v) => v.version)

/**
 * Independently of the guard's own reasoning (layerVersions): the oldest version in [from, below)
 * whose state of some layer no committed export holds. A full export of w holds the states of w and
 * of the versions before it back to the layer's last change, which the listings show.
 */
const oldestUnexported = async (target: string, layers: ReadonlyArray<string>, from: number, below: number) => {
  const gaps: Array<{ version: number; layer: string }> = []
  for (const layer of layers) {
    const dir = path.join(target, "demo", layer)
    const exported = fs.existsSync(dir)
      ? fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, "_manifest.json"))).map((d) =>
        Number(d.slice("version=".length))
      )
      : []
    const states = new Map<number, string>()
    const stateAt = async (v: number) => {
      if (!states.has(v)) states.set(v, JSON.stringify(await listing(svc, layer, v)))
      return states.get(v)!
    }
    for (let v = from; v < below; v++) {
      let held = false
      for (const w of exported.filter((w) => w >= v)) {
        if ((await stateAt(w)) === (await stateAt(v))) held = true
      }
      if (!held) {
        gaps.push({ version: v, layer })
        break
      }
    }
  }
  const oldest = Math.min(...gaps.map((g) => g.version))
  return { version: oldest, layers: gaps.filter((g) => g.version === oldest).map((g) => g.layer) }
}

/** planRetention in-process: the plan, or why it was refused (without a location: no export check). */
const plan = (policy: Policy, requireExported?: string, layers?: Array<string>) =>
  runWith(
    client,
    planRetention({
      catalog: DEMO,
      policy,
      exportCheck: requireExported === undefined
        ? { _tag: "Skip" }
        : { _tag: "RequireExported", location: localLocation(requireExported), layers }
    }).pipe(
      Effect.flatMap((p) => (p.refusal === undefined ? Effect.succeed(p) : Effect.fail(p.refusal))),
      Effect.either
    )
  )

const refusalOf = (stderr: string) => /version (\d+) of layer '([^']+)' has no committed export/.exec(stderr)

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 30, versions: 8 } })
  seeded = Date.now()
  client = await clientLayerFor(svc)
  flags = await serviceFlags(svc)
  out = path.join(svc.dir, "out")
  fs.mkdirSync(out)
  for (let v = 0; v <= 7; v++) await exportVersion("roads", v)
})
afterAll(() => svc.close())

describe("retention", () => {
  it("without --require-exported or --skip-export-check refuses with one sentence, after printing its plan, and changes nothing", async () => {
    const before = await versionInfos()
    for (const dryRun of [["--dry-run"], []]) {
      const refused = await retention("--keep-last", "5", ...dryRun)
      expect(refused.code).toBe(2)
      expect(refused.stdout).toContain("Raising the minimum version to 3 deletes versions 0..2")
      // A refused dry run ends as an accepted one does; a refused real run does not claim to be a dry run.
      if (dryRun.length > 0) expect(refused.stdout.trim().split("\n").at(-1)).toBe("Dry run: nothing was changed.")
      else expect(refused.stdout).not.toContain("Dry run")
      expect(refused.stderr.trim().split("\n")).toEqual([
        `catalog-export: Refusing to delete versions of ${DEMO} without the export guard: give --require-exported LOCATION (where the exports of this catalog are), ` +
        `or --skip-export-check to delete versions whether or not they were exported.`
      ])
    }
    const both = await retention("--keep-last", "5", "--require-exported", out, "--skip-export-check")
    expect(both.code).toBe(2)
    expect(both.stderr).toContain("Give either --require-exported LOCATION or --skip-export-check, not both.")
    expect(await minimumVersion(svc)).toBe(0)
    expect(await versionInfos()).toEqual(before)
  })

  it("--dry-run prints what would be deleted and the irreversibility warning, and changes nothing", async () => {
    const before = await versionInfos()
    const result = await retention("--keep-last", "5", "--dry-run", "--skip-export-check")
    expect(result.code, result.stderr).toBe(0)
    const iso = (v: number) => new Date(before.find((i) => i.version === v)!.timestamp).toISOString()
    expect(result.stdout).toContain(`Catalog ${DEMO}: minimum version 0, latest 7. Policy: keep the last 5 versions.`)
    expect(result.stdout).toContain(
      `Raising the minimum version to 3 deletes versions 0..2 (3 versions, created ${iso(0)} to ${iso(2)}).`
    )
    expect(result.stdout).toContain(
      "This cannot be undone: deleted versions, their partition metadata and their data are removed permanently."
    )
    expect(result.stdout).toContain("Dry run: nothing was changed.")
    expect(await minimumVersion(svc)).toBe(0)
    expect(await versionInfos()).toEqual(before)
  })

  it("refuses a minimum past the latest version (the last version is never deleted) with exit 2", async () => {
    const past = await retention("--minimum", "8")
    expect(past.code).toBe(2)
    expect(past.stderr).toContain(
      `Refusing to set the minimum version of ${DEMO} to 8: the latest version is 7, and the last version of a catalog can never be deleted.`
    )
    expect(await minimumVersion(svc)).toBe(0)
  })

  it("with --require-exported refuses to pass the oldest version some layer has not committed, naming version and layer", async () => {
    const empty = await plan({ _tag: "KeepLast", count: 5 }, out)
    const first = refusalOf(Either.isLeft(empty) ? (empty.left as Error).message : "")
    expect(first).not.toBeNull()
    const expectedFirst = await oldestUnexported(out, ["places", "tiles"], 0, 3)
    expect(Number(first![1])).toBe(expectedFirst.version)
    expect(expectedFirst.layers).toContain(first![2])

    for (const v of [0, 1, 2]) await exportVersion("places", v)
    await exportVersion("tiles", 0)
    const partly = await retention("--keep-last", "5", "--require-exported", out)
    expect(partly.code).toBe(2)
    expect(await oldestUnexported(out, ["places", "tiles"], 0, 3)).toEqual({ version: 1, layers: ["tiles"] })
    expect(partly.stderr).toContain(
      `Refusing to raise the minimum version of ${DEMO} to 3: version 1 of layer 'tiles' has no committed export in ${out}. ` +
        `Export it first (catalog-export backfill --catalog ${DEMO} --layer tiles --from 1 --to 2 --out ${out}), or set a lower minimum.`
    )
    expect(await minimumVersion(svc)).toBe(0)

    // --layer limits the proof to the layers named (here: the tiles may go unexported).
    const done = await retention("--keep-last", "5", "--require-exported", out, "--layer", "places")
    expect(done.code, done.stderr).toBe(0)
    expect(done.stdout).toContain("This cannot be undone")
    expect(done.stdout).toContain(`Done: the minimum version of ${DEMO} is now 3.`)
    expect(await minimumVersion(svc)).toBe(3)
    expect(await readableVersions()).toEqual([3, 4, 5, 6, 7])
  })

  it("never moves the minimum down", async () => {
    const down = await retention("--minimum", "1", "--skip-export-check")
    expect(down.code).toBe(2)
    expect(down.stderr).toContain(
      `Refusing to set the minimum version of ${DEMO} to 1: it is already 3, and the minimum version never moves down`
    )
    // A relative policy that asks for less than is deleted already has nothing to do.
    expect(await plan({ _tag: "KeepLast", count: 20 })).toMatchObject({
      _tag: "Right",
      right: { minimum: 3, target: 3, deleted: [] }
    })
    expect(await minimumVersion(svc)).toBe(3)
  })

  it("counts a changes export only when its chain reaches a full export", async () => {
    const chain = path.join(svc.dir, "chain")
    // A delta (2, 3] whose base, version 2, is not exported: the state of 3 cannot be rebuilt from it.
    await exportVersion("places", 3, chain, 2)
    expect(manifestOf(path.join(chain, "demo", "places", "version=3"))).toMatchObject({
      mode: "changes",
      baseVersion: 2
    })
    const broken = await plan({ _tag: "Minimum", version: 4 }, chain, ["places"])
    expect(Either.isLeft(broken) && broken.left).toMatchObject({ _tag: "RetentionRefused" })
    expect(Either.isLeft(broken) && (broken.left as Error).message).toContain(
      "version 3 of layer 'places' has no committed export"
    )
    // With the full export of 2 (made before version 2 was deleted) the chain is whole.
    fs.cpSync(path.join(out, "demo", "places", "version=2"), path.join(chain, "demo", "places", "version=2"), {
      recursive: true
    })
    const whole = await plan({ _tag: "Minimum", version: 4 }, chain, ["places"])
    expect(Either.isRight(whole) && whole.right).toMatchObject({ minimum: 3, target: 4, deleted: [{ version: 3 }] })
    expect(await minimumVersion(svc)).toBe(3)
  })

  it("--older-than picks the minimum from the versions' timestamps", async () => {
    // Versions 3..7 were created when the service started; make them older than the cut-off (with a
    // margin, so that a slow start of the CLI cannot make version 8 older than it too).
    const age = 8000
    await new Promise((r) => setTimeout(r, Math.max(0, seeded + age + 1000 - Date.now())))
    expect(await publish(svc, [{ partition: "new-8", data: JSON.stringify({ v: 8 }) }])).toBe(8)
    const infos = await versionInfos()
    const started = Date.now()
    const dry = await retention("--older-than", "8s", "--dry-run", "--skip-export-check")
    const finished = Date.now()
    expect(dry.code, dry.stderr).toBe(0)
    const target = Number(/Raising the minimum version to (\d+)/.exec(dry.stdout)![1])
    // The first version created within the last 8 s of the run, computed from the service's timestamps.
    for (const info of infos) {
      if (info.version < target) expect(info.timestamp).toBeLessThan(finished - age)
      if (info.version === target) expect(info.timestamp).toBeGreaterThanOrEqual(started - age)
    }
    expect(target).toBe(8)
    const iso = (v: number) => new Date(infos.find((i) => i.version === v)!.timestamp).toISOString()
    expect(dry.stdout).toContain(`deletes versions 3..7 (5 versions, created ${iso(3)} to ${iso(7)})`)
    expect(await minimumVersion(svc)).toBe(3)

    const real = await plan({ _tag: "OlderThan", age: Duration.seconds(8) })
    expect(Either.isRight(real) && real.right.target).toBe(8)
    await runWith(client, applyRetention(Either.getOrThrow(real)))
    expect(await readableVersions()).toEqual([8])
  })

  it("export --raise-minimum raises the minimum after a committed export, under the same guard", async () => {
    expect(await publish(svc, [{ partition: "new-9", data: JSON.stringify({ v: 9 }) }])).toBe(9)
    const exportPlaces = () =>
      cli([
        "export",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--version",
        "9",
        "--out",
        out,
        "--raise-minimum",
        ...flags
      ])
    const refused = await exportPlaces()
    expect(refused.code).toBe(2)
    // The export itself is committed; only the raise is refused.
    expect(manifestOf(path.join(out, "demo", "places", "version=9"))).toMatchObject({ version: 9, mode: "full" })
    const gap = refusalOf(refused.stderr)
    const expected = await oldestUnexported(out, ["places", "tiles"], 8, 9)
    expect(Number(gap![1])).toBe(8)
    expect(expected.version).toBe(8)
    expect(expected.layers).toContain(gap![2])
    expect(await minimumVersion(svc)).toBe(8)

    await exportVersion("places", 8)
    // roads last changed at 7 too: its export at 9 holds its state at 8.
    await exportVersion("roads", 9)
    const stillTiles = await runWith(client, guard(DEMO, 9, 8, localLocation(out)).pipe(Effect.either))
    expect(Either.isLeft(stillTiles) && (stillTiles.left as Error).message).toContain(
      "version 8 of layer 'tiles' has no committed export"
    )
    // tiles last changed at 7: its export at 9 holds its state at 8 too.
    const tiles = await cli([
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "tiles",
      "--out",
      out,
      "--raise-minimum",
      ...flags
    ])
    expect(tiles.code, tiles.stderr).toBe(0)
    expect(tiles.stdout).toContain(`Raised the minimum version of ${DEMO} from 8 to 9: versions 8..8 are deleted.`)
    expect(await readableVersions()).toEqual([9])
  })

  it("the nightly job's raiseMinimum raises only past versions committed to its output", async () => {
    expect(await publish(svc, [{ partition: "new-10", data: "{}" }])).toBe(10)
    expect(await publish(svc, [{ partition: "new-11", data: "{}" }])).toBe(11)
    const config = path.join(svc.dir, "nightly.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        job: "nightly-export",
        out,
        format: "parquet",
        raiseMinimum: true,
        layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "tiles" }, {
          catalog: DEMO,
          layer: "roads"
        }]
      })
    )
    const refused = await cli(["run", config, ...flags])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(
      `Refusing to raise the minimum version of ${DEMO} to 11: version 10 of layer 'places' has no committed export`
    )
    expect(await oldestUnexported(out, ["places", "tiles"], 9, 11)).toEqual({ version: 10, layers: ["places"] })
    for (const layer of ["places", "tiles"]) {
      expect(manifestOf(path.join(out, "demo", layer, "version=11")).version).toBe(11)
    }
    expect(await minimumVersion(svc)).toBe(9)

    await exportVersion("places", 10)
    const raised = await cli(["run", config, ...flags])
    expect(raised.code, raised.stderr).toBe(0)
    expect(raised.stdout).toContain(`Raised the minimum version of ${DEMO} from 9 to 11`)
    expect(await readableVersions()).toEqual([11])
  })

  it("config/retention.example.json is a valid job config that `catalog-export run` runs", async () => {
    const file = path.join(ROOT, "config", "retention.example.json")
    const job = await Effect.runPromise(load(RetentionJob, file))
    expect(job.job).toBe("retention")
    for (let v = 12; v <= 11 + job.keepLast!; v++) {
      expect(await publish(svc, [{ partition: `new-${v}`, data: "{}" }])).toBe(v)
    }
    const latest = await latestVersion(svc)
    const cwd = path.join(svc.dir, "example")
    const exportsOfExample = path.resolve(cwd, job.requireExported!)
    // What the example requires: the layers it names exported to its (relative) output directory.
    for (const layer of job.layers!) await exportVersion(layer, 11, exportsOfExample)
    const result = await cli(["run", file, ...flags], { cwd })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(`Done: the minimum version of ${DEMO} is now ${latest - job.keepLast! + 1}.`)
    expect(await readableVersions()).toHaveLength(job.keepLast!)
  })

  it("retention auto --keep 3 keeps 3 versions over six commits, without losing configuration; --disable turns it off", async () => {
    // A field this client does not know must survive the read-modify-write of the catalog configuration.
    const config = (await (await svc.get(`/config/v1/catalogs/${DEMO}`)).json()) as Record<string, any>
    const put = await svc.get(`/config/v1/catalogs/${DEMO}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...config,
        marketplaceReady: false,
        layers: config.layers.map((l: any) => ({ ...l, retentionNote: `kept-${l.id}` }))
      })
    })
    expect(put.status).toBe(202)

    const tooMany = await cli(["retention", "auto", "--catalog", DEMO, "--keep", "50001", ...flags])
    expect(tooMany.code).toBe(2)
    expect(tooMany.stderr).toContain("--keep must be within 1..50000")

    const on = await cli(["retention", "auto", "--catalog", DEMO, "--keep", "3", ...flags])
    expect(on.code, on.stderr).toBe(0)
    expect(on.stdout).toContain(`Automatic version deletion is on for ${DEMO}: each new version keeps the last 3`)
    const after = (await (await svc.get(`/config/v1/catalogs/${DEMO}`)).json()) as Record<string, any>
    expect(after.automaticVersionDeletion).toEqual({ numberOfVersionsToKeep: 3 })
    expect(after.marketplaceReady).toBe(false)
    for (const layer of after.layers) expect(layer.retentionNote).toBe(`kept-${layer.id}`)

    const first = await latestVersion(svc) + 1
    for (let i = 0; i < 6; i++) await publish(svc, [{ partition: "auto", data: JSON.stringify({ i }) }])
    expect(await readableVersions()).toEqual([first + 3, first + 4, first + 5])

    const off = await cli(["retention", "auto", "--catalog", DEMO, "--disable", ...flags])
    expect(off.code, off.stderr).toBe(0)
    expect(off.stdout).toContain(`Automatic version deletion is off for ${DEMO}.`)
    const disabled = (await (await svc.get(`/config/v1/catalogs/${DEMO}`)).json()) as Record<string, any>
    expect(disabled.automaticVersionDeletion).toBeUndefined()
    expect(disabled.marketplaceReady).toBe(false)
    await publish(svc, [{ partition: "auto", data: "{}" }])
    expect(await readableVersions()).toEqual([first + 3, first + 4, first + 5, first + 6])
  })
})
