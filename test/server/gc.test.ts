/**
 * The local service under the garbage collector: the real `serve`, with a full collection every 50 ms
 * (test/support/gc-often.mjs), is worked over HTTP (a publication, reads of what it wrote, and more
 * distinct SQL statements than the 200 its SqlClient keeps prepared, so that statements are dropped
 * and collected), then stopped with SIGTERM: it must exit 0. better-sqlite3 12 took the process down
 * here on Node 24.19 and later: `Assertion failed: (env) != nullptr` when the collector finalised a
 * statement.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, expect, it } from "vitest"
import { BIN, ROOT } from "../support/cli.ts"
import { parseCredentials, requestToken } from "../support/service.ts"
import { DEMO, sha1 } from "./helpers.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-gc-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** Partitions published in batches of 1 to BATCHES. */
const BATCHES = 20
/** Versions listed by lists of 1 to LISTS numbers (`versions?version=0,1,...`): each length is a statement of its own. */
const LISTS = 250

it("serve prepares and drops statements while the GC collects, keeps the data, and exits 0 on SIGTERM", async () => {
  const credentials = path.join(dir, "credentials.properties")
  const child = spawn(process.execPath, [
    "--expose-gc",
    "--import",
    pathToFileURL(path.join(ROOT, "test", "support", "gc-often.mjs")).href,
    BIN,
    "serve",
    "--port",
    "0",
    "--seed-partitions",
    "40",
    "--credentials-out",
    credentials
  ], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", () => {
        if (stdout.includes("\n")) resolve((JSON.parse(stdout.slice(0, stdout.indexOf("\n"))) as { url: string }).url)
      })
      void exited.then(({ code, signal }) => reject(new Error(`serve exited (${code ?? signal}): ${stderr}`)))
    })
    const token = ((await (await requestToken(parseCredentials(fs.readFileSync(credentials, "utf8")))).json()) as {
      accessToken: string
    }).accessToken
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${url}${p}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      const text = await res.text()
      expect(res.ok, `${method} ${p}: ${res.status} ${text}`).toBe(true)
      return text
    }
    const publish = (p: string) => `/publish/v2/catalogs/${DEMO}${p}`

    const id = (JSON.parse(await call("POST", publish("/publications"), { layerIds: ["places"] })) as { id: string }).id
    const published = new Map<string, string>()
    for (let size = 1; size <= BATCHES; size++) {
      const batch = Array.from({ length: size }, (_, i) => [`gc-${size}-${i}`, `bytes of batch ${size} item ${i}`])
      for (const [partition, text] of batch) published.set(partition!, text!)
      await call("POST", publish(`/layers/places/publications/${id}/partitions`), {
        partitions: batch.map(([partition, text]) => ({ partition, data: Buffer.from(text!).toString("base64") }))
      })
    }
    await call("PUT", publish(`/publications/${id}`))

    // Read back through the service: the new version lists every partition, and blobs hold their bytes.
    const latest = (JSON.parse(await call("GET", `/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)) as {
      version: number
    }).version
    const listed = (JSON.parse(
      await call("GET", `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=${latest}`)
    ) as { partitions: Array<{ partition: string; dataHandle: string }> }).partitions.filter((p) =>
      p.partition.startsWith("gc-")
    )
    expect(listed.length).toBe(BATCHES * (BATCHES + 1) / 2)
    for (const p of listed.filter((_, i) => i % 7 === 0)) {
      const bytes = await call("GET", `/blobstore/v1/catalogs/${DEMO}/layers/places/data/${p.dataHandle}`)
      expect(sha1(bytes)).toBe(sha1(published.get(p.partition)!))
    }
    const versions = async (query: string) =>
      (JSON.parse(await call("GET", `/metadata/v1/catalogs/${DEMO}/versions?${query}`)) as {
        versions: Array<{ version: number }>
      }).versions.map((v) => v.version)
    const all = await versions(`startVersion=-1&endVersion=${latest}`)
    expect(all).toContain(latest)
    for (let length = 1; length <= LISTS; length++) {
      const asked = Array.from({ length }, (_, i) => i)
      expect(await versions(`version=${asked.join(",")}`)).toEqual(all.filter((v) => v < length))
    }
  } finally {
    child.kill("SIGTERM")
  }
  const { code, signal } = await exited
  expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
  // The collector really ran while the service worked.
  expect(Number(/^gc-often: (\d+) collections$/m.exec(stderr)?.[1])).toBeGreaterThan(10)
})
