import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { NightlyJob, runNightly } from "../../pipelines/nightly-export.ts"
import * as DataClient from "../../src/client/DataClient.ts"
import { CredentialsError } from "../../src/client/Errors.ts"
import { Encoder } from "../../src/encoder/Encoder.ts"
import { noFaults } from "../../src/server/Faults.ts"
import { type Exchange, isBlobRequest, type Proxy, startProxy } from "../reliability/support.ts"
import { cli, ROOT } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { manifestOf, readExport } from "../versions/support.ts"

/**
 * The nightly job as cron runs it, through the real CLI: what reaches stdout and stderr, the exit
 * code when several layers fail, layers run at once under one download budget, each catalog's own
 * lookup service, and config/crontab.example run as cron would; and, in process, how runNightly
 * shares one client per lookup service between layers.
 */

const { cleanup, tempDir } = cleanups()
let svc: TestService
let proxy: Proxy
let credentials: string

/** A nightly job config in a fresh directory; returns its path and output directory. */
const nightly = (fields: Record<string, unknown>) => {
  const dir = tempDir("jobs-nightly-")
  const out = path.join(dir, "out")
  const file = path.join(dir, "nightly.json")
  fs.writeFileSync(file, JSON.stringify({ job: "nightly-export", out, format: "parquet", parts: 2, ...fields }))
  return { file, out, dir }
}

const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "")

/** What the summary on stdout may hold: one line per layer outcome, its note and hint lines, raised minimums. */
const SUMMARY_LINE =
  /^(Exported |Already exported |Up to date: |Failed |Raised the minimum |hrn:\S+ \S+: | {2}query it: | {2}removed )/

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 30, versions: 4 }, faults: { ...noFaults, latencyMs: [3, 6] } })
  proxy = await startProxy(svc.url)
  credentials = await svc.credentialsFile()
  cleanup.push(() => proxy.close(), () => svc.close())
})

describe("the nightly job under cron", () => {
  it("prints only the summary on stdout and each log line once on stderr, in the chosen format; --json is one parseable object", async () => {
    const job = nightly({
      incremental: true,
      layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "traffic" }]
    })
    const flags = ["--lookup-url", svc.lookupUrl, "--credentials", credentials]

    const json = await cli(["run", job.file, ...flags, "--log-format", "json"])
    expect(json.code, json.stderr).toBe(0)
    expect(lines(json.stdout).filter((l) => !SUMMARY_LINE.test(l)), json.stdout).toEqual([])
    expect(json.stdout).toMatch(/^Exported hrn:local:data:::demo places version 3: /m)
    expect(json.stdout).toMatch(/^Exported hrn:local:data:::demo traffic snapshot \d{8}T\d{6}Z: /m)
    const logged = lines(json.stderr).map((l) =>
      JSON.parse(l) as { message?: unknown; logLevel?: string; event?: string }
    )
    const messages = logged.filter((l) => l.logLevel !== undefined).map((l) => String(l.message))
    expect(messages.filter((m) => m.includes("no cursor (_state.json) yet"))).toHaveLength(1)
    expect(messages.filter((m) => m.includes("volatile layers have no versions to diff"))).toHaveLength(1)

    const text = await cli(["run", job.file, ...flags, "--log-format", "text"])
    expect(text.code, text.stderr).toBe(0)
    expect(lines(text.stdout).filter((l) => !SUMMARY_LINE.test(l)), text.stdout).toEqual([])
    expect(text.stdout).toMatch(/^Up to date: hrn:local:data:::demo places was exported through version 3/m)
    const textLogs = lines(text.stderr)
    expect(textLogs.length).toBeGreaterThan(0)
    for (const line of textLogs) expect(line).toMatch(/^timestamp=\S+ level=(INFO|WARN|ERROR) fiber=\S+ message=/)
    expect(textLogs.filter((l) => l.includes("volatile layers have no versions to diff"))).toHaveLength(1)

    // A snapshot is named by the second it was taken in: the next one must be taken in another.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20))
    const summary = await cli(["run", job.file, ...flags, "--json"])
    expect(summary.code, summary.stderr).toBe(0)
    expect(lines(summary.stdout)).toHaveLength(1)
    const parsed = JSON.parse(summary.stdout) as {
      job: string
      exitCode: number
      layers: Array<Record<string, unknown>>
    }
    expect(parsed).toMatchObject({ job: "nightly-export", exitCode: 0, retry: false })
    expect(parsed.layers.map((l) => [l.layer, l.status, l.exitCode])).toEqual([["places", "up-to-date", 0], [
      "traffic",
      "exported",
      0
    ]])
    expect(parsed.layers[1]).toMatchObject({
      note: "volatile layers have no versions to diff: exporting a snapshot",
      mode: "full"
    })
    expect(manifestOf(String(parsed.layers[1]!.dir)).partitions).toBe(parsed.layers[1]!.partitions)

    const single = await cli(["export", "--catalog", DEMO, "--layer", "places", "--out", job.out, ...flags, "--json"])
    expect(single.code, single.stderr).toBe(0)
    expect(JSON.parse(single.stdout)).toMatchObject({
      catalog: DEMO,
      layer: "places",
      status: "already-exported",
      version: 3,
      exitCode: 0
    })
  })

  it("tries every layer, reports each outcome, and exits 5 when any failure is transient; else by precedence (4 before 2)", async () => {
    // The tiles layer is unavailable (503) for as long as the retry budget lasts.
    proxy.decide = (
      req
    ) => (req.url?.includes("/layers/tiles/") ? { kind: "respond", status: 503 } : { kind: "forward" })
    const job = nightly({
      layerConcurrency: 2,
      layers: [
        { catalog: DEMO, layer: "places" },
        { catalog: DEMO, layer: "tiles" },
        { catalog: DEMO, layer: "no-such-layer" },
        { catalog: DEMO, layer: "events" }
      ]
    })
    const flags = [
      "--lookup-url",
      proxy.lookupUrl,
      "--credentials",
      credentials,
      "--retry-budget",
      "2s",
      "--max-retries",
      "2"
    ]
    const first = await cli(["run", job.file, ...flags])
    expect(first.code, first.stderr).toBe(5)
    const out = lines(first.stdout)
    expect(out.filter((l) => !SUMMARY_LINE.test(l))).toEqual([])
    expect(out.find((l) => l.startsWith(`Exported ${DEMO} places version 3:`))).toBeDefined()
    expect(out.find((l) => l.startsWith(`Failed ${DEMO} tiles (exit 5): `))).toBeDefined()
    expect(out.find((l) => l.startsWith(`Failed ${DEMO} no-such-layer (exit 4): `))).toMatch(/no layer 'no-such-layer'/)
    expect(out.find((l) => l.startsWith(`Failed ${DEMO} events (exit 2): `))).toMatch(/stream layer/)
    const sentence = lines(first.stderr).filter((l) => l.startsWith("catalog-export: "))
    expect(sentence).toHaveLength(1)
    expect(sentence[0]).toMatch(
      new RegExp(
        `^catalog-export: ${DEMO} tiles: .*safe to run the same command again.* 3 of 4 layers failed; every layer's outcome is in the summary\\.$`
      )
    )

    const asJson = await cli(["run", job.file, ...flags, "--json"])
    expect(asJson.code).toBe(5)
    const summary = JSON.parse(asJson.stdout) as {
      exitCode: number
      retry: boolean
      layers: Array<{ layer: string; status: string; exitCode: number; retry?: boolean }>
    }
    expect(summary).toMatchObject({ exitCode: 5, retry: true })
    expect(summary.layers.map((l) => [l.layer, l.status, l.exitCode])).toEqual([
      ["places", "already-exported", 0],
      ["tiles", "failed", 5],
      ["no-such-layer", "failed", 4],
      ["events", "failed", 2]
    ])

    // The service is back: the retry exports what was transient; what needs a person decides now.
    proxy.decide = () => ({ kind: "forward" })
    const retried = await cli(["run", job.file, ...flags])
    expect(retried.code).toBe(4)
    expect(retried.stdout).toMatch(new RegExp(`^Already exported ${DEMO} places version 3 `, "m"))
    expect(retried.stdout).toMatch(new RegExp(`^Exported ${DEMO} tiles version 3: `, "m"))
    expect(lines(retried.stderr).filter((l) => l.startsWith("catalog-export: "))).toEqual([
      expect.stringMatching(
        new RegExp(
          `^catalog-export: ${DEMO} no-such-layer: Catalog ${DEMO} has no layer 'no-such-layer'.* 2 of 4 layers failed;`
        )
      )
    ])
    expect((await readExport(path.join(job.out, "demo", "tiles", "version=3"))).length).toBe(
      manifestOf(path.join(job.out, "demo", "tiles", "version=3")).partitions
    )
  })

  it("runs layers at once within one download budget", async () => {
    proxy.decide = () => ({ kind: "forward" })
    const from = proxy.log.length
    const job = nightly({
      layerConcurrency: 2,
      concurrency: 4,
      layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "tiles" }]
    })
    const result = await cli(["run", job.file, "--lookup-url", proxy.lookupUrl, "--credentials", credentials])
    expect(result.code, result.stderr).toBe(0)
    const blobs = proxy.log.slice(from).filter(isBlobRequest)
    const layerOf = (e: Exchange) => /\/layers\/([^/]+)\/data\//.exec(e.path)![1]
    expect(new Set(blobs.map(layerOf))).toEqual(new Set(["places", "tiles"]))
    // At most 4 blob requests in flight at any moment, across both layers.
    const events = blobs.flatMap((e) => [[e.at, 1], [e.endedAt!, -1]] as const).sort((a, b) =>
      a[0] - b[0] || a[1] - b[1]
    )
    let inFlight = 0
    let most = 0
    for (const [, delta] of events) most = Math.max(most, inFlight += delta)
    expect(most).toBeLessThanOrEqual(4)
    // And the two layers were fetched at the same time, not one after the other.
    const span = (layer: string) => {
      const of = blobs.filter((e) => layerOf(e) === layer)
      return [Math.min(...of.map((e) => e.at)), Math.max(...of.map((e) => e.endedAt!))] as const
    }
    const [places, tiles] = [span("places"), span("tiles")]
    expect(places[0] < tiles[1] && tiles[0] < places[1]).toBe(true)
    for (const layer of ["places", "tiles"]) {
      const dir = path.join(job.out, "demo", layer, "version=3")
      expect((await readExport(dir)).length).toBe(manifestOf(dir).partitions)
    }
  })

  it("looks up each layer's APIs from its own catalog's HRN when no lookup URL is configured", async () => {
    // hrn:local catalogs are looked up at localhost:31005, the local service's default port.
    const local = await startService({ seed: { partitions: 10, versions: 2 }, port: 31005 })
    cleanup.push(() => local.close())
    const job = nightly({
      credentials: await local.credentialsFile(),
      // Another HRN partition first: its lookup service (the HERE platform's) must not be used for the local catalog.
      layers: [{ catalog: "hrn:here-dev:data:::nowhere", layer: "x" }, { catalog: DEMO, layer: "places" }]
    })
    const result = await cli(["run", job.file, "--retry-budget", "2s"], { env: { CATALOG_LOOKUP_URL: "" } })
    expect(result.code).not.toBe(0)
    expect(result.stdout).toMatch(new RegExp(`^Failed hrn:here-dev:data:::nowhere x \\(exit \\d\\): `, "m"))
    expect(result.stdout).toMatch(new RegExp(`^Exported ${DEMO} places version 1: `, "m"))
    expect(manifestOf(path.join(job.out, "demo", "places", "version=1"))).toMatchObject({
      catalogHrn: DEMO,
      version: 1
    })
  })
})

describe("runNightly's clients", () => {
  it("builds one client per lookup service, shared by the layers that need it; one that cannot be built fails each of its layers", async () => {
    const out = path.join(tempDir("jobs-clients-"), "out")
    const BROKEN = "hrn:local:data:::broken"
    const job = Schema.decodeUnknownSync(NightlyJob)({
      job: "nightly-export",
      out,
      parts: 1,
      layerConcurrency: 2,
      layers: [
        { catalog: DEMO, layer: "places" },
        { catalog: BROKEN, layer: "a" },
        { catalog: DEMO, layer: "tiles" },
        { catalog: BROKEN, layer: "b" }
      ]
    })
    const built: Array<string> = []
    const unbuildable = new CredentialsError({ path: "/nowhere", reason: "the file does not exist" })
    const { outcomes } = await Effect.runPromise(
      runNightly(job, {
        lookupUrlOf: (catalog) => (catalog === DEMO ? svc.lookupUrl : "http://broken.invalid/lookup/v1"),
        client: (lookupUrl) => {
          built.push(lookupUrl)
          return lookupUrl === svc.lookupUrl
            ? DataClient.layer({ lookupUrl, credentialsPath: credentials, concurrency: 4 })
            : Layer.fail(unbuildable)
        }
      }).pipe(Effect.provide(Encoder.auto))
    )
    expect(built).toEqual([svc.lookupUrl, "http://broken.invalid/lookup/v1"])
    expect(outcomes.map((o) => [o.layer, Either.isRight(o.result) ? o.result.right._tag : o.result.left])).toEqual([
      ["places", "Exported"],
      ["a", unbuildable],
      ["tiles", "Exported"],
      ["b", unbuildable]
    ])
    expect(manifestOf(path.join(out, "demo", "tiles", "version=3"))).toMatchObject({ layerId: "tiles", version: 3 })
  })
})

describe("config/crontab.example", () => {
  const crontab = fs.readFileSync(path.join(ROOT, "config", "crontab.example"), "utf8")
  const entries = crontab.split("\n").filter((l) => /^[\d*]/.test(l))

  /** A crontab entry's command, pointed at this checkout, this service and a scratch directory. */
  const command = (entry: string, scratch: string) =>
    entry
      .replace(/^(\S+\s+){5}/, "")
      .replaceAll("cd /opt/catalog-export", `cd ${ROOT}`)
      .replaceAll("npx catalog-export", `${process.execPath} src/cli/bin.mjs`)
      .replaceAll("config/nightly.json", path.join(scratch, "nightly.json"))
      .replaceAll("/var/log/catalog-export", scratch)
      .replaceAll("/var/lock", scratch)
  const sh = (line: string, env: Record<string, string>) =>
    new Promise<number | null>((resolve) =>
      spawn("/bin/sh", ["-c", line], { env: { ...process.env, CATALOG_LOOKUP_URL: "", ...env }, stdio: "ignore" }).on(
        "close",
        resolve
      )
    )

  it("guards every job against overlapping runs with flock", () => {
    expect(entries.length).toBeGreaterThanOrEqual(3)
    for (const entry of entries) expect(entry, entry).toMatch(/flock (-n|-w \d+) -E 75 /)
  })

  it("runs the nightly entry as cron would: skipped while a run holds the lock, retried at 04:15 only after exit 5", async () => {
    const scratch = tempDir("jobs-cron-")
    const out = path.join(scratch, "out")
    fs.writeFileSync(
      path.join(scratch, "nightly.json"),
      JSON.stringify({
        job: "nightly-export",
        lookupUrl: svc.lookupUrl,
        credentials,
        out,
        parts: 1,
        layers: [{ catalog: DEMO, layer: "places" }]
      })
    )
    const [nightlyEntry, retryEntry] = entries.filter((e) => e.includes("config/nightly.json")).map((e) =>
      command(e, scratch)
    )
    expect(nightlyEntry).toBeDefined()
    expect(retryEntry).toBeDefined()
    const lock = /flock -n(?: -E \d+)? (\S+)/.exec(nightlyEntry!)![1]!
    const exitFile = path.join(scratch, "nightly.exit")

    // Another run holds the lock: this one exports nothing.
    // Its own process group: the lock is held by flock's child too.
    const holder = spawn("flock", [lock, "sleep", "30"], { stdio: "ignore", detached: true })
    const release = () => {
      try {
        process.kill(-holder.pid!, "SIGKILL")
      } catch {
        // gone already
      }
    }
    cleanup.push(release)
    await new Promise((r) => setTimeout(r, 300))
    await sh(nightlyEntry!, {})
    expect(fs.existsSync(path.join(out, "demo"))).toBe(false)
    expect(fs.readFileSync(exitFile, "utf8").trim()).toBe("75")
    release()
    await new Promise((r) => holder.on("close", r))

    await sh(nightlyEntry!, {})
    expect(fs.readFileSync(exitFile, "utf8").trim()).toBe("0")
    expect(manifestOf(path.join(out, "demo", "places", "version=3")).version).toBe(3)
    expect(fs.readFileSync(path.join(scratch, "nightly.log"), "utf8")).toMatch(
      /^Exported hrn:local:data:::demo places version 3: /m
    )

    // The 04:15 entry runs only when the last exit code was 5.
    fs.rmSync(out, { recursive: true })
    await sh(retryEntry!, {})
    expect(fs.existsSync(out)).toBe(false)
    fs.writeFileSync(exitFile, "5\n")
    await sh(retryEntry!, {})
    expect(fs.readFileSync(exitFile, "utf8").trim()).toBe("0")
    expect(manifestOf(path.join(out, "demo", "places", "version=3")).version).toBe(3)
  })
})
