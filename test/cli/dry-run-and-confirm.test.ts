/**
 * Retention asks before it deletes when a person is at a terminal (a pseudo-terminal from util-linux
 * `script`), never elsewhere, and not with --yes; `run CONFIG --dry-run` changes nothing for every
 * job, and a refused dry run still ends with "Dry run: nothing was changed".
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { serviceState } from "../reliability/support.ts"
import { BIN, cli } from "../support/cli.ts"
import { cleanups, filesBelow } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { minimumVersion } from "../versions/support.ts"

const { cleanup, tempDir } = cleanups()
let svc: TestService
let credentials: string
let connection: Array<string>

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 20, versions: 8 } })
  credentials = await svc.credentialsFile()
  cleanup.push(() => svc.close())
  connection = ["--lookup-url", svc.lookupUrl, "--credentials", credentials]
})

/** Runs the CLI on a pseudo-terminal, typing `answer` once the question is on the screen. */
const onTerminal = (args: ReadonlyArray<string>, answer: string | undefined) =>
  new Promise<{ code: number; screen: string }>((resolve, reject) => {
    const command = [process.execPath, BIN, ...args].map((a) => `'${a}'`).join(" ")
    const child = execFile("script", ["-qec", command, "/dev/null"], { timeout: 60_000 }, (error, stdout) => {
      if (error !== null && typeof error.code !== "number") return reject(error)
      resolve({ code: error === null ? 0 : (error.code as number), screen: stdout.replace(/\r/g, "") })
    })
    let typed = false
    child.stdout!.on("data", (chunk: Buffer) => {
      if (!typed && answer !== undefined && chunk.toString("utf8").includes("[y/N]")) {
        typed = true
        child.stdin!.write(`${answer}\n`)
      }
    })
    if (answer === undefined) child.stdin!.end()
  })

const retention = (minimum: number, ...extra: Array<string>) => [
  "retention",
  "--catalog",
  DEMO,
  "--minimum",
  String(minimum),
  "--skip-export-check",
  ...connection,
  ...extra
]

describe("retention on a terminal", () => {
  it("shows the plan and asks; anything but yes changes nothing (exit 1), yes deletes", async () => {
    const no = await onTerminal(retention(2), "n")
    expect(no.screen).toContain("Raising the minimum version to 2 deletes versions 0..1")
    expect(no.screen).toContain(`Delete versions 0..1 of ${DEMO} permanently? [y/N]`)
    expect(no.screen).toContain("catalog-export: Not confirmed: nothing was changed")
    expect(no.code).toBe(1)
    expect(await minimumVersion(svc)).toBe(0)

    const yes = await onTerminal(retention(2), "y")
    expect(yes.screen, yes.screen).toContain(`Done: the minimum version of ${DEMO} is now 2.`)
    expect(yes.code).toBe(0)
    expect(await minimumVersion(svc)).toBe(2)
  })

  it("does not ask with --yes, nor when not on a terminal (cron)", async () => {
    const given = await onTerminal(retention(3, "--yes"), undefined)
    expect(given.screen).not.toContain("[y/N]")
    expect(given.code, given.screen).toBe(0)
    expect(await minimumVersion(svc)).toBe(3)

    const cron = await cli(retention(4))
    expect(cron.code, cron.stderr).toBe(0)
    expect(cron.stderr + cron.stdout).not.toContain("[y/N]")
    expect(await minimumVersion(svc)).toBe(4)
  })
})

describe("run CONFIG --dry-run", () => {
  const config = (fields: Record<string, unknown>) => {
    const file = path.join(tempDir("dry-run-"), "job.json")
    fs.writeFileSync(file, JSON.stringify({ lookupUrl: svc.lookupUrl, credentials, ...fields }))
    return file
  }

  it("a retention job prints its plan and changes nothing; refused, it still says so (exit 2)", async () => {
    const before = await minimumVersion(svc)
    const out = tempDir("dry-run-out-")
    const refused = await cli([
      "run",
      config({ job: "retention", catalog: DEMO, keepLast: 2, requireExported: out }),
      "--dry-run"
    ])
    expect(refused.code, refused.stderr).toBe(2)
    expect(refused.stdout.trim().split("\n").at(-1)).toBe("Dry run: nothing was changed.")
    expect(refused.stderr).toMatch(/^catalog-export: Refusing to raise the minimum version/m)

    const accepted = await cli([
      "run",
      config({ job: "retention", catalog: DEMO, keepLast: 2, skipExportCheck: true }),
      "--dry-run"
    ])
    expect(accepted.code, accepted.stderr).toBe(0)
    expect(accepted.stdout).toContain("Raising the minimum version to 6")
    expect(accepted.stdout.trim().split("\n").at(-1)).toBe("Dry run: nothing was changed.")
    expect(await minimumVersion(svc)).toBe(before)
  })

  it("a nightly job says what each layer would do and writes nothing", async () => {
    const out = path.join(tempDir("dry-run-nightly-"), "out")
    const job = config({
      job: "nightly-export",
      out,
      parts: 2,
      layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "no-such-layer" }]
    })
    const text = await cli(["run", job, "--dry-run"])
    expect(text.code, text.stderr).toBe(4)
    const partitions = (await serviceState(svc, "places", 7)).size
    expect(text.stdout.trim().split("\n")).toEqual([
      `Would export ${DEMO} places version 7 (full, ${partitions} partitions in 2 metadata parts).`,
      expect.stringMatching(new RegExp(`^${DEMO} no-such-layer would fail \\(exit 4\\): .*no layer 'no-such-layer'`)),
      "Dry run: nothing was changed."
    ])
    const json = await cli(["run", job, "--dry-run", "--json"])
    expect(json.code).toBe(4)
    const document = JSON.parse(json.stdout) as { dryRun: boolean; layers: Array<Record<string, unknown>> }
    expect(document.dryRun).toBe(true)
    expect(document.layers[0]).toEqual({
      catalog: DEMO,
      layer: "places",
      action: "export",
      version: 7,
      mode: "full",
      parts: 2,
      partitions
    })
    expect(document.layers[1]).toMatchObject({ layer: "no-such-layer", action: "fail", exitCode: 4 })
    expect(fs.existsSync(out), `${out} was created`).toBe(false)
  })

  it("a backfill job lists the versions it would export and writes nothing", async () => {
    const out = path.join(tempDir("dry-run-backfill-"), "out")
    const job = config({ job: "backfill", catalog: DEMO, layer: "places", from: 6, to: 7, out, everyVersion: true })
    const run = await cli(["run", job, "--dry-run"])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain("version 6: would be exported\nversion 7: would be exported\n")
    expect(run.stdout).toContain(`Backfill of ${DEMO} places 6..7: 2 to export, 0 already exported`)
    expect(run.stdout.trim().split("\n").at(-1)).toBe("Dry run: nothing was changed.")
    expect(filesBelow(out)).toEqual([])
  })
})
