/**
 * The administration commands through the real CLI (`node src/cli/bin.mjs ...`) against the local
 * service: catalogs create/update/delete, layers delete --wait with its steps, subscriptions
 * create/list/get/delete, and stream read (once, resumed, from the beginning, and --follow).
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectJson } from "../server/helpers.ts"
import { startService, type TestService } from "../support/service.ts"
import { catalogBody, createCatalog, hrnOf, layer, OTHER, post, STEPS } from "./helpers.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const bin = path.join(root, "src", "cli", "bin.mjs")

let svc: TestService
let credentials: string
let otherCredentials: string

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 20, versions: 2 } })
  credentials = await svc.credentialsFile()
  otherCredentials = await svc.credentialsFile(OTHER)
})
afterAll(() => svc?.close())

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const start = (args: ReadonlyArray<string>, creds = credentials) =>
  spawn(
    process.execPath,
    [bin, ...args, "--lookup-url", svc.lookupUrl, "--credentials", creds, "--log-format", "json"],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    }
  )

const cli = (args: ReadonlyArray<string>, creds = credentials): Promise<Run> =>
  new Promise((resolve) => {
    const child = start(args, creds)
    let stdout = ""
    let stderr = ""
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

const ok = (run: Run) => {
  if (run.code !== 0) expect.fail(`exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`)
  return run.stdout
}

const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "")

const writeJson = (name: string, value: unknown) => {
  const file = path.join(svc.dir, name)
  fs.writeFileSync(file, JSON.stringify(value))
  return file
}

describe("catalogs and layers commands", () => {
  it.concurrent("creates a catalog from a file and waits for it, refuses a taken id (exit 2), updates it, and deletes it", async () => {
    const file = writeJson(
      "cli-catalog.json",
      catalogBody("cli-made", [layer("places", "versioned"), layer("events", "stream")], { region: "US West" })
    )
    expect(ok(await cli(["catalogs", "create", "--file", file, "--wait"])).trim()).toBe(
      `Created ${hrnOf("cli-made")} with 2 layers.`
    )
    const catalog = await expectJson<any>(await svc.get(`/config/v1/catalogs/${hrnOf("cli-made")}`), 200)
    expect(catalog.replication).toEqual({ regions: [{ id: "us-oregon", role: "primary" }] })

    const taken = await cli(["catalogs", "create", "--file", file])
    expect(taken.code).toBe(2)
    expect(taken.stderr).toMatch(/'cli-made' already exists/)

    const updated = writeJson(
      "cli-update.json",
      catalogBody("cli-made", [layer("places", "versioned"), layer("events", "stream"), layer("more", "volatile")], {
        summary: "updated"
      })
    )
    expect(ok(await cli(["catalogs", "update", "--catalog", hrnOf("cli-made"), "--file", updated, "--wait"])).trim())
      .toBe(`Updated ${hrnOf("cli-made")}.`)
    const after = await expectJson<any>(await svc.get(`/config/v1/catalogs/${hrnOf("cli-made")}`), 200)
    expect([after.summary, after.layers.map((l: any) => l.id)]).toEqual(["updated", ["places", "events", "more"]])

    // Only the creator may delete the catalog; for others it does not exist (exit 4).
    const foreign = await cli(["catalogs", "delete", "--catalog", hrnOf("cli-made")], otherCredentials)
    expect(foreign.code).toBe(4)
    expect(ok(await cli(["catalogs", "delete", "--catalog", hrnOf("cli-made"), "--wait"])).trim()).toBe(
      `Deleted ${hrnOf("cli-made")}.`
    )
    expect((await svc.get(`/config/v1/catalogs/${hrnOf("cli-made")}`)).status).toBe(403)
  })

  it.concurrent("deletes a layer with --wait, showing the seven steps as they advance, and warns about the 60-second rule", async () => {
    const hrn = await createCatalog(
      svc,
      catalogBody("cli-layers", [layer("gone", "versioned"), layer("stays", "stream")])
    )
    const run = await cli(["layers", "delete", "--catalog", hrn, "--layer", "gone", "--wait"])
    const out = lines(ok(run))
    expect(out[out.length - 1]).toBe(`Deleted layer 'gone' of ${hrn}: its data and metadata are gone.`)
    const transitions = out.slice(0, -1).map((l) => l.split(": "))
    // Each step is reported Completed once, in order; any "In progress" line comes before its "Completed".
    expect(transitions.filter(([, state]) => state === "Completed").map(([name]) => name)).toEqual(STEPS)
    for (const [name, state] of transitions) {
      expect(STEPS).toContain(name)
      if (state === "In progress") {
        expect(transitions.findIndex(([n, s]) => n === name && s === "Completed")).toBeGreaterThan(
          transitions.findIndex(([n, s]) => n === name && s === "In progress")
        )
      }
    }
    expect(transitions.some(([, state]) => state === "In progress")).toBe(true)
    expect(run.stderr).toMatch(/warning: layer 'gone' was created \d+ s ago; .*60 seconds/)
    const catalog = await expectJson<any>(await svc.get(`/config/v1/catalogs/${hrn}`), 200)
    expect(catalog.layers.map((l: any) => l.id)).toEqual(["stays"])
  })
})

describe("subscriptions and stream commands", () => {
  it.concurrent("creates (idempotently), lists, gets and deletes subscriptions, and reads the notifications with stream read", async () => {
    const hrn = await createCatalog(
      svc,
      catalogBody("cli-subs", [layer("map", "interactivemap"), layer("out", "stream")])
    )
    const create = [
      "subscriptions",
      "create",
      "--name",
      "cli-sub",
      "--source-catalog",
      hrn,
      "--source-layer",
      "map",
      "--destination-catalog",
      hrn,
      "--destination-layer",
      "out",
      "--type",
      "perTransaction",
      "--idempotency-key",
      "cli-key-000001",
      "--json"
    ]
    const first = JSON.parse(ok(await cli(create)))
    const again = JSON.parse(ok(await cli(create)))
    expect(again.subscriptionHrn).toBe(first.subscriptionHrn)
    expect(first).toMatchObject({
      subscriptionName: "cli-sub",
      interactiveMapSubscription: { type: "perTransaction" },
      status: { state: "active" }
    })
    const listed = lines(ok(await cli(["subscriptions", "list", "--json"]))).map((l) => JSON.parse(l))
    expect(listed.filter((s) => s.subscriptionName === "cli-sub").map((s) => s.subscriptionHrn)).toEqual([
      first.subscriptionHrn
    ])
    expect(ok(await cli(["subscriptions", "get", "--subscription", first.subscriptionHrn]))).toContain(
      `${hrn}:map -> ${hrn}:out`
    )
    expect((await cli(["subscriptions", "get", "--subscription", first.subscriptionHrn], otherCredentials)).code).toBe(
      4
    )
    const missingFlags = await cli(["subscriptions", "create", "--name", "x-y-z"])
    expect(missingFlags.code).toBe(2)
    expect(missingFlags.stderr).toMatch(/--source-catalog/)

    for (const id of ["a", "b"]) {
      await expectJson(
        await post(svc, `/features/v1/catalogs/${hrn}/layers/map/transactions`, {
          insert: [{ type: "Feature", id, geometry: null, properties: { id } }]
        }),
        200
      )
    }
    const read = lines(ok(await cli(["stream", "read", "--catalog", hrn, "--layer", "out"]))).map((l) => JSON.parse(l))
    expect(read.map((m) => [m.offset, m.data.type, m.data.version, m.data.inserted.features[0].id])).toEqual([[
      0,
      "Changeset",
      1,
      "a"
    ], [1, "Changeset", 2, "b"]])
    // The group committed what it read: a second run prints nothing, --from-beginning everything again.
    expect(ok(await cli(["stream", "read", "--catalog", hrn, "--layer", "out"]))).toBe("")

    // --follow prints new messages as they arrive, until interrupted.
    const follow = start([
      "stream",
      "read",
      "--catalog",
      hrn,
      "--layer",
      "out",
      "--follow",
      "--group",
      "follower",
      "--poll-interval",
      "50"
    ])
    let followed = ""
    follow.stdout!.setEncoding("utf8").on("data", (d: string) => (followed += d))
    const exited = new Promise<number | null>((resolve) => follow.on("close", (code) => resolve(code)))
    const waitFor = async (n: number) => {
      for (let i = 0; i < 300 && lines(followed).length < n; i++) await new Promise((r) => setTimeout(r, 50))
      return lines(followed)
    }
    expect(await waitFor(2)).toHaveLength(2)
    await expectJson(await post(svc, `/features/v1/catalogs/${hrn}/layers/map/transactions`, { delete: ["a"] }), 200)
    const three = await waitFor(3)
    expect(JSON.parse(three[2]!).data).toMatchObject({
      type: "Changeset",
      version: 3,
      deleted: { features: [{ id: "a" }] }
    })
    follow.kill("SIGINT")
    expect(await exited).not.toBeNull()

    expect(ok(await cli(["subscriptions", "delete", "--subscription", first.subscriptionHrn])).trim()).toBe(
      `Deleted ${first.subscriptionHrn}: notifications stop.`
    )
    await expectJson(await post(svc, `/features/v1/catalogs/${hrn}/layers/map/transactions`, { delete: ["b"] }), 200)
    // Only the three transactions made while the subscription lived were delivered.
    const all = lines(
      ok(await cli(["stream", "read", "--catalog", hrn, "--layer", "out", "--from-beginning", "--limit", "10"]))
    )
    expect(all.map((l) => JSON.parse(l).data.version)).toEqual([1, 2, 3])
    // Another application cannot read the stream layer: for it the catalog does not exist (exit 4).
    const foreign = await cli(["stream", "read", "--catalog", hrn, "--layer", "out"], otherCredentials)
    expect(foreign.code).toBe(4)
    expect(foreign.stderr).toMatch(/not found or is not accessible/)
  })
})
