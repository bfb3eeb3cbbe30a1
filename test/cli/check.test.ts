/**
 * `catalog-export check` through the real CLI against the local service: one line per check, the
 * exit code of the first failure's class, job configs of the three kinds, the clock against the
 * token service's (a proxy that moves the token answer's Date), and --json.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { startProxy } from "../reliability/support.ts"
import { cli } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { startStore, type TestStore } from "../support/s3.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const { cleanup, tempDir } = cleanups()
let svc: TestService
let store: TestStore
let credentials: string

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 40, versions: 2 } })
  store = await startStore()
  credentials = await svc.credentialsFile()
  cleanup.push(() => svc.close(), () => store.close())
})

const linesOf = (stdout: string) => stdout.split("\n").filter((l) => l.trim() !== "")
const statusOf = (stdout: string) =>
  linesOf(stdout).slice(0, -1).map((l) => [l.slice(0, 4).trim(), l.slice(6, 21).trim()])

const config = (fields: Record<string, unknown>) => {
  const file = path.join(tempDir("check-"), "job.json")
  fs.writeFileSync(file, JSON.stringify({ lookupUrl: svc.lookupUrl, credentials, ...fields }))
  return { file }
}

describe("check", () => {
  it("passes a nightly job config, a line per check in the order a run needs them", async () => {
    const dir = tempDir("check-nightly-")
    const file = path.join(dir, "job.json")
    fs.writeFileSync(
      file,
      JSON.stringify({
        job: "nightly-export",
        lookupUrl: svc.lookupUrl,
        credentials,
        out: path.join(dir, "out"),
        layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "traffic" }]
      })
    )
    const run = await cli(["check", file])
    expect(run.code, run.stdout + run.stderr).toBe(0)
    expect(statusOf(run.stdout)).toEqual([
      ["ok", "credentials"],
      ["ok", "token"],
      ["ok", "lookup"],
      ["ok", "catalog"],
      ["ok", "layer"],
      ["ok", "layer"],
      // What the run would decide, layer by layer, changing nothing.
      ["ok", "decision"],
      ["ok", "decision"],
      ["ok", "output"]
    ])
    expect(run.stdout).toMatch(
      new RegExp(`^ok {4}decision {8}${DEMO} places: a run would export version 1 \\(full\\)$`, "m")
    )
    expect(run.stdout).toMatch(
      /^ok {4}token {11}obtained in \d+ ms; clock within a second or two of the token service's$/m
    )
    expect(run.stdout).toMatch(
      new RegExp(
        `^ok {4}layer {11}${DEMO} places: readable \\(versioned, version 1\\); partition '\\S+' listed and its blob found$`,
        "m"
      )
    )
    expect(run.stdout).toMatch(new RegExp(`^ok {4}layer {11}${DEMO} traffic: readable \\(volatile\\)`, "m"))
    expect(run.stdout).toMatch(
      /^ok {4}output {10}.*\/out: does not exist yet; .* is writable, so it can be created \(\d+\.\d GB free\)$/m
    )
    expect(linesOf(run.stdout).at(-1)).toBe("9 ok, 0 warnings, 0 failed. Exit 0: done, or nothing to do.")
    // Nothing was created, nothing was left behind by the write probe.
    expect(fs.readdirSync(dir)).toEqual(["job.json"])
  })

  it("exits with the first failure's class: missing credentials 3 (what needs them is skipped, the output is still checked)", async () => {
    const dir = tempDir("check-creds-")
    const run = await cli([
      "check",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--out",
      dir,
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      path.join(dir, "missing.properties")
    ])
    expect(run.code).toBe(3)
    expect(statusOf(run.stdout)).toEqual([["FAIL", "credentials"], ["skip", "token"], ["ok", "output"]])
    expect(run.stdout).toMatch(/^FAIL {2}credentials .*missing\.properties.*the file does not exist.* \[exit 3\]$/m)
    expect(linesOf(run.stdout).at(-1)).toMatch(
      /^1 ok, 0 warnings, 1 failed, 1 skipped\. Exit 3: authentication or permission/
    )
  })

  it("a wrong secret fails the token (3); an unreachable lookup service 2; an unknown layer 4 before an output that is a file (2)", async () => {
    const dir = tempDir("check-classes-")
    const wrong = path.join(dir, "wrong.properties")
    fs.writeFileSync(
      wrong,
      (await svc.credentialsText()).replace(/(here\.access\.key\.secret\s*=\s*)\S+/, "$1not-the-secret"),
      { mode: 0o600 }
    )
    const token = await cli(["check", "--catalog", DEMO, "--lookup-url", svc.lookupUrl, "--credentials", wrong])
    expect(token.code).toBe(3)
    expect(statusOf(token.stdout)).toEqual([["ok", "credentials"], ["FAIL", "token"], ["skip", "lookup"], [
      "skip",
      "catalogs"
    ]])
    expect(token.stdout).not.toContain("not-the-secret")

    const lookup = await cli([
      "check",
      "--catalog",
      DEMO,
      "--lookup-url",
      "http://127.0.0.1:1/lookup/v1",
      "--credentials",
      credentials,
      "--retry-budget",
      "1s"
    ])
    expect(lookup.code).toBe(2)
    expect(lookup.stdout).toMatch(/Nothing answers at the lookup URL http:\/\/127\.0\.0\.1:1\/lookup\/v1/)
    expect(statusOf(lookup.stdout)).toEqual([["ok", "credentials"], ["ok", "token"], ["FAIL", "lookup"], [
      "skip",
      "catalogs"
    ]])

    const file = path.join(dir, "a-file")
    fs.writeFileSync(file, "")
    const layer = await cli([
      "check",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--layer",
      "nope",
      "--out",
      file,
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ])
    expect(layer.code).toBe(4)
    expect(statusOf(layer.stdout).slice(3)).toEqual([["ok", "catalog"], ["ok", "layer"], ["FAIL", "layer"], [
      "FAIL",
      "output"
    ]])
    expect(layer.stdout).toMatch(/^FAIL {2}layer .*has no layer 'nope'.* \[exit 4\]$/m)
    expect(layer.stdout).toMatch(/^FAIL {2}output .*a-file is a file, not a directory.* \[exit 2\]$/m)
    expect(layer.stderr).toMatch(/^catalog-export: check failed: layer: /m)
  })

  it("warns about a credentials file other users can read, and about a clock far from the token service's", async () => {
    const dir = tempDir("check-warn-")
    // The token service's answers pass a proxy that moves their Date five minutes ahead.
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    proxy.decide = (req) =>
      req.url?.startsWith("/oauth2/token")
        ? {
          kind: "handle",
          handle: async (_, forward) => {
            const answer = await forward()
            return {
              status: answer.status,
              headers: { date: new Date(Date.now() + 300_000).toUTCString() },
              body: answer.body.toString("utf8")
            }
          }
        }
        : { kind: "forward" }
    const loose = path.join(dir, "loose.properties")
    fs.writeFileSync(
      loose,
      (await svc.credentialsText()).replace(/(here\.token\.endpoint\.url\s*=\s*)\S+/, `$1${proxy.url}/oauth2/token`),
      { mode: 0o644 }
    )
    fs.chmodSync(loose, 0o644)
    const run = await cli(["check", "--catalog", DEMO, "--lookup-url", svc.lookupUrl, "--credentials", loose, "--json"])
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as {
      checks: Array<{ check: string; status: string; detail: string }>
      exitCode: number
    }
    expect(report.exitCode).toBe(0)
    expect(report.checks.map((c) => [c.check, c.status])).toEqual([
      ["credentials", "ok"],
      ["credentials", "warn"],
      ["token", "warn"],
      ["lookup", "ok"],
      ["catalog", "ok"]
    ])
    expect(report.checks[1]!.detail).toBe(
      `credentials file ${loose} is accessible by other users (mode 0644): anyone who can read it can act as your app. Restrict it: chmod 600 ${loose}`
    )
    expect(report.checks[2]!.detail).toMatch(
      /clock skew (299|300|301) s \(the token service's clock minus this machine's\): requests are signed with the token service's clock; fix the clock \(NTP\)$/
    )
  })

  it("checks a retention config's export location, and a backfill config's catalog, layer and output", async () => {
    const retention = config({
      job: "retention",
      catalog: DEMO,
      keepLast: 1,
      requireExported: "/nonexistent/exports",
      layers: ["places"]
    })
    const refused = await cli(["check", retention.file])
    expect(refused.code).toBe(2)
    expect(statusOf(refused.stdout).at(-1)).toEqual(["FAIL", "export location"])
    expect(refused.stdout).toMatch(/Export location \/nonexistent\/exports is not a directory/)

    // A readable export location that holds no export: the guard a run applies refuses, so check does too.
    const exports = tempDir("check-exports-")
    const there = config({ job: "retention", catalog: DEMO, keepLast: 1, requireExported: exports })
    const guarded = await cli(["check", there.file])
    expect(guarded.code, guarded.stdout).toBe(2)
    expect(statusOf(guarded.stdout).slice(-2)).toEqual([["FAIL", "decision"], ["ok", "export location"]])
    expect(guarded.stdout).toMatch(
      /Refusing to raise the minimum version of \S+ to 1: version 0 of layer '\S+' has no committed export/
    )
    const run = await cli(["run", there.file, "--dry-run"])
    expect(run.code, "run decides as check did").toBe(2)

    const skipping = config({ job: "retention", catalog: DEMO, keepLast: 1, skipExportCheck: true })
    const passed = await cli(["check", skipping.file])
    expect(passed.code, passed.stdout).toBe(0)
    expect(passed.stdout).toMatch(
      new RegExp(
        `^ok {4}decision {8}a run would raise the minimum version of ${DEMO} to 1, deleting versions 0\\.\\.0$`,
        "m"
      )
    )
    expect(fs.readdirSync(exports)).toEqual([])

    const backfill = config({
      job: "backfill",
      catalog: DEMO,
      layer: "roads",
      from: 0,
      to: 1,
      out: tempDir("check-backfill-")
    })
    const checked = await cli(["check", backfill.file])
    expect(checked.code, checked.stdout).toBe(0)
    expect(statusOf(checked.stdout).map(([, c]) => c)).toEqual([
      "credentials",
      "token",
      "lookup",
      "catalog",
      "layer",
      "decision",
      "output"
    ])
    expect(checked.stdout).toMatch(
      new RegExp(`^ok {4}decision {8}${DEMO} roads 0\\.\\.1: a run would export versions 0, 1$`, "m")
    )
    expect(checked.stdout).toMatch(/^ok {4}output {10}\S+: writable \(/m)
  })

  it("probes an object-store output with a write it removes: writable, an unknown bucket (exit 2), no permission (exit 3)", async () => {
    const probe = (out: string) =>
      cli(["check", "--catalog", DEMO, "--lookup-url", svc.lookupUrl, "--credentials", credentials, "--out", out], {
        env: store.env
      })
    const ok = await probe(`s3://${store.bucket}/nightly`)
    expect(ok.code, ok.stdout + ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(
      new RegExp(
        `^ok {4}output {10}s3://${store.bucket}/nightly: writable \\(a probe object written and removed\\)$`,
        "m"
      )
    )
    expect(await store.keys()).toEqual([])

    const unknown = await probe("s3://no-such-bucket/nightly")
    expect(unknown.code).toBe(2)
    expect(statusOf(unknown.stdout).at(-1)).toEqual(["FAIL", "output"])
    expect(unknown.stdout).toMatch(/s3:\/\/no-such-bucket.*does not exist \(NoSuchBucket\)/)

    store.deny = (method) => method === "PUT"
    try {
      const denied = await probe(`s3://${store.bucket}/denied`)
      expect(denied.code).toBe(3)
      expect(denied.stdout).toMatch(/AccessDenied/)
    } finally {
      store.deny = () => false
    }
    expect(await store.keys()).toEqual([])
  })
})
