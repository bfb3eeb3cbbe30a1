/**
 * `catalog-export serve` as a real process: the one JSON line on stdout, the credentials file,
 * clean exits on SIGTERM and SIGINT, and a `--data` directory that survives a restart with the same
 * versions, partitions, blob bytes and credentials.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { type Credentials, parseCredentials, requestToken } from "../support/service.ts"
import { bearer, sha1 } from "./helpers.ts"

const root = fileURLToPath(new URL("../..", import.meta.url))
const bin = path.join(root, "src", "cli", "bin.mjs")
const DEMO = "hrn:local:data:::demo"

interface Listening {
  readonly event: string
  readonly url: string
  readonly lookupUrl: string
  readonly tokenUrl: string
}

interface Served {
  readonly child: ChildProcess
  readonly listening: Promise<Listening>
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stdout: () => string
  readonly stderr: () => string
}

const children: Array<ChildProcess> = []

const serve = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Served => {
  const child = spawn(process.execPath, [
    bin,
    "serve",
    "--port",
    "0",
    "--seed-partitions",
    "40",
    "--seed-versions",
    "3",
    ...args
  ], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let stdout = ""
  let stderr = ""
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d))
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  const listening = new Promise<Listening>((resolve, reject) => {
    const check = () => {
      const nl = stdout.indexOf("\n")
      if (nl >= 0) {
        child.stdout!.off("data", check)
        try {
          resolve(JSON.parse(stdout.slice(0, nl)) as Listening)
        } catch (e) {
          reject(new Error(`serve printed a line that is not JSON: ${stdout.slice(0, nl)}`, { cause: e }))
        }
      }
    }
    child.stdout!.on("data", check)
    void exited.then(({ code, signal }) =>
      reject(new Error(`serve exited (${code ?? signal}) before listening: ${stderr}`))
    )
  })
  return { child, listening, exited, stdout: () => stdout, stderr: () => stderr }
}

const token = async (c: Credentials) => {
  const res = await requestToken(c, { grantType: "client_credentials" })
  if (res.status !== 200) throw new Error(`token: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { accessToken: string }).accessToken
}

const bytes = async (url: string, t: string) => {
  const res = await fetch(url, { headers: bearer(t) })
  expect(res.status, url).toBe(200)
  return Buffer.from(await res.arrayBuffer())
}

/** What must survive a restart, read over HTTP. */
const snapshot = async (base: string, t: string, overwritten: string) => {
  const meta = `${base}/metadata/v1/catalogs/${DEMO}`
  const versions = JSON.parse((await bytes(`${meta}/versions`, t)).toString()) as {
    versions: Array<{ version: number }>
  }
  const latest = versions.versions.at(-1)!.version
  const places = await bytes(`${meta}/layers/places/partitions?version=${latest}&additionalFields=dataSize,checksum`, t)
  const tiles = await bytes(`${meta}/layers/tiles/partitions?version=${latest}&additionalFields=dataSize,checksum`, t)
  const traffic = await bytes(`${meta}/layers/traffic/partitions?additionalFields=checksum`, t)
  const entries = [
    ...(JSON.parse(places.toString()).partitions as Array<{ dataHandle: string; checksum: string; partition: string }>)
      .map((p) => ({ layer: "places", ...p })),
    ...(JSON.parse(tiles.toString()).partitions as Array<{ dataHandle: string; checksum: string; partition: string }>)
      .filter((_, i) => i % 8 === 0).map((p) => ({ layer: "tiles", ...p })),
    ...(JSON.parse(traffic.toString()).partitions as Array<{ dataHandle: string; checksum: string; partition: string }>)
      .filter((_, i) => i % 10 === 0).map((p) => ({ layer: "traffic", ...p }))
  ]
  const blobs: Record<string, string> = {}
  for (const e of entries) {
    const data = await bytes(`${base}/blobstore/v1/catalogs/${DEMO}/layers/${e.layer}/data/${e.dataHandle}`, t)
    blobs[`${e.layer}/${e.dataHandle}`] = sha1(data)
    // A volatile blob overwritten in place no longer matches the checksum published with it.
    if (e.dataHandle !== overwritten) expect(sha1(data), `${e.layer} ${e.partition}`).toBe(e.checksum)
  }
  const catalog = JSON.parse((await bytes(`${base}/config/v1/catalogs/${DEMO}`, t)).toString())
  return {
    versions,
    latest,
    places: places.toString("base64"),
    tiles: tiles.toString("base64"),
    traffic: traffic.toString("base64"),
    blobs,
    catalog
  }
}

const mode = (file: string) => fs.statSync(file).mode & 0o777

describe("serve as a process", () => {
  let dir: string

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-serve-test-"))
  })
  afterAll(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("prints one listening line, writes credentials (0600), keeps --data across a restart, and exits 0 on SIGTERM and SIGINT", async () => {
    const data = path.join(dir, "data")
    const credsA = path.join(dir, "a.properties")

    // --- first run -------------------------------------------------------------------------------
    const a = serve(["--credentials-out", credsA, "--data", data])
    const lineA = await a.listening
    expect(Object.keys(lineA)).toEqual(["event", "url", "lookupUrl", "tokenUrl"])
    expect(lineA.event).toBe("listening")
    expect(lineA.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(lineA.lookupUrl).toBe(`${lineA.url}/lookup/v1`)
    expect(lineA.tokenUrl).toBe(`${lineA.url}/oauth2/token`)

    expect(mode(credsA)).toBe(0o600)
    const credentialsA = parseCredentials(fs.readFileSync(credsA, "utf8"))
    expect(credentialsA.appId).toBe("demo-app")
    expect(credentialsA.tokenUrl).toBe(lineA.tokenUrl)
    expect(credentialsA.keyId).toMatch(/\S/)
    expect(credentialsA.secret).toMatch(/\S/)
    const tokenA = await token(credentialsA)

    // The credentials can read and write the demo catalog: publish a version and overwrite a volatile blob.
    const lookup =
      (await (await fetch(`${lineA.lookupUrl}/resources/${DEMO}/apis`, { headers: bearer(tokenA) })).json()) as Array<
        { api: string; baseURL: string }
      >
    const publishUrl = lookup.find((e) => e.api === "publish")!.baseURL
    const blobUrl = lookup.find((e) => e.api === "blob")!.baseURL
    const payload = Buffer.from(JSON.stringify({ id: "after-restart", note: "published by the serve test" }))
    expect(
      (await fetch(`${blobUrl}/layers/places/data/serve-test-1`, {
        method: "PUT",
        headers: { ...bearer(tokenA), "content-type": "application/json" },
        body: payload
      })).status
    ).toBe(200)
    const init = (await (await fetch(`${publishUrl}/publications`, {
      method: "POST",
      headers: { ...bearer(tokenA), "content-type": "application/json" },
      body: JSON.stringify({ layerIds: ["places"] })
    })).json()) as { id: string }
    const staged = await fetch(`${publishUrl}/layers/places/publications/${init.id}/partitions`, {
      method: "POST",
      headers: { ...bearer(tokenA), "content-type": "application/json" },
      body: JSON.stringify({
        partitions: [{
          partition: "serve-test",
          dataHandle: "serve-test-1",
          checksum: sha1(payload),
          dataSize: payload.byteLength
        }]
      })
    })
    expect(staged.status).toBe(204)
    expect((await fetch(`${publishUrl}/publications/${init.id}`, { method: "PUT", headers: bearer(tokenA) })).status)
      .toBe(204)
    const volatile = Buffer.from(`{"segment":"segment-0","speedKmh":12}`)
    const trafficHandle = (JSON.parse(
      (await bytes(`${lineA.url}/metadata/v1/catalogs/${DEMO}/layers/traffic/partitions`, tokenA)).toString()
    ).partitions[0] as { dataHandle: string })
      .dataHandle
    expect(
      (await fetch(`${blobUrl}/layers/traffic/data/${trafficHandle}`, {
        method: "PUT",
        headers: { ...bearer(tokenA), "content-type": "application/json" },
        body: volatile
      })).status
    ).toBe(204)

    const before = await snapshot(lineA.url, tokenA, trafficHandle)
    expect(before.latest).toBe(3) // three seeded versions (0..2) and the one published above
    expect(Buffer.from(before.places, "base64").toString()).toContain(`"partition":"serve-test"`)
    expect(sha1(await bytes(`${blobUrl}/layers/traffic/data/${trafficHandle}`, tokenA))).toBe(sha1(volatile))

    a.child.kill("SIGTERM")
    expect(await a.exited).toEqual({ code: 0, signal: null })
    expect(a.stdout()).toBe(`${JSON.stringify(lineA)}\n`)

    // --- restart on the same data, credentials written over a stale, world-readable file ------------
    const credsB = path.join(dir, "b.properties")
    fs.writeFileSync(credsB, "stale\n", { mode: 0o644 })
    fs.chmodSync(credsB, 0o644)
    const b = serve(["--credentials-out", credsB, "--data", data])
    const lineB = await b.listening
    expect(lineB.event).toBe("listening")
    expect(mode(credsB)).toBe(0o600)
    const credentialsB = parseCredentials(fs.readFileSync(credsB, "utf8"))
    expect({ ...credentialsB, tokenUrl: "" }).toEqual({ ...credentialsA, tokenUrl: "" })
    expect(credentialsB.tokenUrl).toBe(lineB.tokenUrl)

    // The first run's credentials (at the new address) and its bearer token still work.
    const tokenB = await token({ ...credentialsA, tokenUrl: lineB.tokenUrl })
    const catalogs = await fetch(`${lineB.url}/config/v1/catalogs`, { headers: bearer(tokenA) })
    expect(catalogs.status).toBe(200)
    await catalogs.arrayBuffer()

    const after = await snapshot(lineB.url, tokenB, trafficHandle)
    expect(after.latest).toBe(before.latest)
    expect(after.versions).toEqual(before.versions)
    expect(after.places).toBe(before.places)
    expect(after.tiles).toBe(before.tiles)
    expect(after.traffic).toBe(before.traffic)
    expect(after.blobs).toEqual(before.blobs)
    expect({ ...after.catalog }).toEqual({ ...before.catalog })
    expect(sha1(await bytes(`${lineB.url}/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/${trafficHandle}`, tokenB)))
      .toBe(sha1(volatile))

    b.child.kill("SIGINT")
    expect(await b.exited).toEqual({ code: 0, signal: null })
    expect(b.stdout()).toBe(`${JSON.stringify(lineB)}\n`)
  })

  it("removes its temporary data directory on SIGTERM when run without --data", async () => {
    const tmp = fs.mkdtempSync(path.join(dir, "tmp-"))
    // What the service keeps in the temporary directory (Node 22 and later also keep their compile cache there).
    const serviceDirs = () => fs.readdirSync(tmp).filter((name) => name !== "node-compile-cache")
    const c = serve([], { TMPDIR: tmp })
    const line = await c.listening
    expect(serviceDirs()).toEqual([expect.stringMatching(/^catalog-service-/)])
    const res = await fetch(`${line.lookupUrl}/platform/apis`)
    expect(res.status).toBe(401)
    await res.arrayBuffer()
    c.child.kill("SIGTERM")
    expect(await c.exited).toEqual({ code: 0, signal: null })
    expect(c.stdout().split("\n").filter((l) => l !== "")).toHaveLength(1)
    expect(serviceDirs()).toEqual([])
  })

  it("takes --latency as a duration or a range (a bare number is milliseconds) and refuses what is neither", async () => {
    // Every request but token and lookup waits the latency: a catalog's configuration answers no sooner.
    const slow = serve(["--latency", "400ms"])
    const line = await slow.listening
    const started = performance.now()
    const res = await fetch(`${line.url}/config/v1/catalogs/${DEMO}`)
    await res.arrayBuffer()
    expect(performance.now() - started).toBeGreaterThanOrEqual(390)
    slow.child.kill("SIGTERM")
    expect(await slow.exited).toEqual({ code: 0, signal: null })

    const bare = serve(["--latency", "1-2"])
    await bare.listening
    bare.child.kill("SIGTERM")
    expect(await bare.exited).toEqual({ code: 0, signal: null })

    for (const [value, says] of [["20x", "got '20x'"], ["50ms-20ms", "maximum below its minimum"]] as const) {
      const refused = serve(["--latency", value])
      await expect(refused.listening).rejects.toThrow(/exited \(2\)/)
      expect(refused.stderr()).toContain(says)
      expect(refused.stdout()).toBe("")
    }
  })

  it("prints on stderr the export command that works against it, as README's quick start uses it", async () => {
    const credentials = path.join(dir, "quick-start.properties")
    const served = serve(["--credentials-out", credentials])
    const listening = await served.listening
    const deadline = Date.now() + 10_000
    while (!served.stderr().includes("\n") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    const line = served.stderr().split("\n").find((l) => l.startsWith("Export from it: "))
    expect(line).toBe(
      `Export from it: catalog-export export --catalog ${DEMO} --layer places --out out --lookup-url ${listening.lookupUrl} --credentials ${credentials}`
    )
    // The printed command, word for word, with the output redirected into the test's directory.
    const words = line!.replace("Export from it: catalog-export ", "").split(" ")
    const out = path.join(dir, "quick-start-out")
    words[words.indexOf("--out") + 1] = out
    const exported = await cli(words)
    expect(exported.code, exported.stderr).toBe(0)
    const t = await token(parseCredentials(fs.readFileSync(credentials, "utf8")))
    const meta = `${listening.url}/metadata/v1/catalogs/${DEMO}`
    const latest = (JSON.parse((await bytes(`${meta}/versions/latest`, t)).toString()) as { version: number }).version
    const listed = JSON.parse((await bytes(`${meta}/layers/places/partitions?version=${latest}`, t)).toString()) as {
      partitions: Array<{ partition: string }>
    }
    const rows = await readParquet(path.join(out, "demo", "places", `version=${latest}`))
    expect(rows.map((r) => r.partition)).toEqual(listed.partitions.map((p) => p.partition).sort())
    served.child.kill("SIGTERM")
    await served.exited
  })
})
