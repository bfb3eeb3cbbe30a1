/**
 * Security: secrets never leave the process in anything a run produces; Authorization never follows
 * a redirect to another origin; every route of the local service refuses bad tokens and what the
 * caller was not granted; request bodies are limited; path tricks in partition ids and data handles
 * reach neither outside the service's blob directory nor outside the export's output directory.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { BlobApi } from "../../src/client/BlobApi.ts"
import * as Sqlite from "../../src/server/db/Sqlite.ts"
import { noFaults } from "../../src/server/Faults.ts"
import { router } from "../../src/server/Server.ts"
import { cli } from "../support/cli.ts"
import { clientLayerFor, runWith } from "../support/client.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups, filesBelow, readJson, sha1 } from "../support/files.ts"
import { DEMO, RESTRICTED, startService, type TestService } from "../support/service.ts"
import {
  authorizedGetter,
  expectMatchesService,
  exportPlaces,
  handleOf,
  isBlobRequest,
  serviceState,
  sleep,
  startProxy
} from "./support.ts"

const { cleanup, tempDir } = cleanups()

const secretOf = (credentialsText: string) => /here\.access\.key\.secret\s*=\s*(\S+)/.exec(credentialsText)![1]!

/** Raw HTTP: no URL normalisation (`..` stays as sent), no body decoding. */
const raw = (
  url: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer | string }
) =>
  new Promise<{ status: number; body: Buffer; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const target = new URL(url)
    const req = http.request({
      host: target.hostname,
      port: target.port,
      method: options.method ?? "GET",
      path: options.path,
      headers: options.headers ?? {},
      agent: false
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(options.body)
  })

// --- secrets -------------------------------------------------------------------------------------

describe("secrets", () => {
  it(
    "tokens and the key secret appear in no log line (text or JSON), error, manifest, plan, state or data file",
    async () => {
      const svc = await startService({
        seed: { partitions: 120, versions: 2, blobBytes: 64 },
        faults: { ...noFaults, throttle: 0.2, reset: 0.05, retryAfterSeconds: 0, seed: 3 }
      })
      cleanup.push(() => svc.close())
      const proxy = await startProxy(svc.url)
      cleanup.push(() => proxy.close())
      const dir = tempDir("reliability-secrets-")
      const out = path.join(dir, "out")
      const text = await svc.credentialsText()
      const credentials = path.join(dir, "app.properties")
      fs.writeFileSync(credentials, text, { mode: 0o600 })
      const wrongSecret = "wrong-secret-" + "7".repeat(40)
      const wrong = path.join(dir, "wrong.properties")
      fs.writeFileSync(wrong, text.replace(secretOf(text), wrongSecret), { mode: 0o600 })
      const job = path.join(dir, "nightly.json")
      fs.writeFileSync(
        job,
        JSON.stringify({
          job: "nightly-export",
          out,
          lookupUrl: proxy.lookupUrl,
          credentials,
          compression: "none",
          format: "both",
          layers: [{ catalog: DEMO, layer: "places" }, { catalog: DEMO, layer: "traffic" }]
        })
      )

      const common = ["--lookup-url", proxy.lookupUrl, "--credentials", credentials]
      const runs = [
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--version",
          "0",
          "--out",
          out,
          "--format",
          "both",
          "--compression",
          "none",
          "--log-format",
          "json",
          ...common
        ]),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--version",
          "0",
          "--out",
          out,
          "--format",
          "both",
          "--compression",
          "none",
          "--log-format",
          "text",
          "--force",
          ...common
        ]),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "tiles",
          "--out",
          out,
          "--compression",
          "none",
          "--dry-run",
          "--log-format",
          "json",
          ...common
        ]),
        await cli(["run", job, "--log-format", "json"]),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "tiles",
          "--out",
          out,
          "--compression",
          "none",
          "--log-format",
          "json",
          ...common
        ], { env: { CATALOG_EXPORT_CRASH_AT: "fetched:40" } }),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "no-such-layer",
          "--out",
          out,
          "--log-format",
          "json",
          ...common
        ]),
        await cli([
          "export",
          "--catalog",
          RESTRICTED,
          "--layer",
          "private",
          "--out",
          out,
          "--log-format",
          "text",
          ...common
        ]),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--out",
          out,
          "--log-format",
          "json",
          "--lookup-url",
          proxy.lookupUrl,
          "--credentials",
          wrong
        ]),
        await cli([
          "export",
          "--catalog",
          DEMO,
          "--layer",
          "places",
          "--out",
          out,
          "--log-format",
          "json",
          "--lookup-url",
          "http://127.0.0.1:1/lookup/v1",
          "--credentials",
          credentials,
          "--retry-budget",
          "1s"
        ]),
        await cli(["catalogs", "list", "--json", ...common])
      ]
      expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0, null, 4, 4, 3, 2, 0])
      expect(runs[4]!.signal).toBe("SIGKILL")

      const tokens = new Set(
        proxy.log.map((e) => e.authorization).filter((a): a is string => a !== undefined).map((a) =>
          a.replace(/^Bearer\s+/i, "")
        )
      )
      expect(tokens.size).toBeGreaterThan(0)
      const secrets = [secretOf(text), wrongSecret, ...tokens]
      const places: Array<[string, Buffer]> = runs.flatMap((r, i) =>
        [[`run ${i} stdout`, Buffer.from(r.stdout)], [`run ${i} stderr`, Buffer.from(r.stderr)]] as Array<
          [string, Buffer]
        >
      )
      const written = filesBelow(out)
      // The runs wrote what they should: data, manifests, a cursor, and the killed run's plan and .partial files.
      expect(written.some((f) => f.endsWith("_manifest.json"))).toBe(true)
      expect(written.some((f) => f.endsWith("_state.json"))).toBe(true)
      expect(written.some((f) => f.endsWith("plan.json"))).toBe(true)
      expect(written.some((f) => f.endsWith(".parquet"))).toBe(true)
      for (const f of written) places.push([f, fs.readFileSync(path.join(out, f))])
      // The data itself is there uncompressed (so a secret in it would be found by this search).
      const sample = await serviceState(svc, "places", 0)
      const blobBytes = await (await authorizedGetter(svc)(
        `/blobstore/v1/catalogs/${DEMO}/layers/places/data/${[...sample.values()][0]!.dataHandle}`
      )).arrayBuffer()
      expect(places.some(([, bytes]) => bytes.includes(Buffer.from(blobBytes)))).toBe(true)
      const leaks = places.flatMap(([where, bytes]) =>
        secrets.filter((s) => bytes.includes(s)).map((s) => `${where} holds ${s.slice(0, 8)}…`)
      )
      expect(leaks).toEqual([])
    },
    180_000
  ) // ten runs of the CLI one after another, one against a closed port until its retry budget ends
})

// --- redirects -----------------------------------------------------------------------------------

describe("redirects", () => {
  let svc: TestService
  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 60, versions: 1, blobBytes: 64 } })
    cleanup.push(() => svc.close())
  })

  /** A second origin: serves blob bytes it fetched itself, records the headers it was sent, and can send a client back. */
  const storage = async (back: () => string) => {
    const get = authorizedGetter(svc)
    const seen: Array<{ path: string; authorization: string | undefined }> = []
    const server = http.createServer(async (req, res) => {
      seen.push({ path: req.url ?? "", authorization: req.headers.authorization })
      const [, kind, handle] = /^\/(store|bounce)\/(.+)$/.exec(req.url ?? "") ?? []
      if (kind === "bounce") {
        res.writeHead(302, { location: `${back()}/back/${handle}` })
        return res.end()
      }
      const blob = await get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/${handle}`)
      res.writeHead(blob.status, { "content-type": "application/json" })
      res.end(Buffer.from(await blob.arrayBuffer()))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    cleanup.push(() =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
    )
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
  }

  it("an export whose blobs redirect to another origin sends Authorization only to the service's origin", async () => {
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    const store = await storage(() => proxy.url)
    const statuses = [301, 302, 303, 307, 308]
    const modes = new Map<string, number>()
    const backSeen: Array<string | undefined> = []
    proxy.decide = (req) => {
      const url = req.url ?? ""
      if (url.startsWith("/back/")) {
        backSeen.push(req.headers.authorization)
        // Served here, after a detour through the other origin: the bytes come from the storage origin.
        return {
          kind: "respond",
          status: 307,
          headers: { location: `${store.url}/store/${url.slice("/back/".length)}` }
        }
      }
      if (req.method !== "GET" || !/\/data\/[^/?]+$/.test(url)) return { kind: "forward" }
      const handle = url.slice(url.lastIndexOf("/") + 1)
      if (!modes.has(handle)) modes.set(handle, modes.size)
      const n = modes.get(handle)!
      const status = statuses[n % statuses.length]!
      // A third: to the other origin; a third: there and back; a third: same origin (moved, forwarded with ?same).
      return n % 3 === 0
        ? { kind: "respond", status, headers: { location: `${store.url}/store/${handle}` } }
        : n % 3 === 1
        ? { kind: "respond", status, headers: { location: `${store.url}/bounce/${handle}` } }
        : { kind: "forward" }
    }
    const out = tempDir("reliability-redirect-")
    const run = await exportPlaces(svc, proxy, out)
    expect(run.code, run.stderr).toBe(0)
    expectMatchesService(
      await readParquet(path.join(out, "demo", "places", "version=0")),
      await serviceState(svc, "places", 0)
    )
    // Every blob request reached the proxy (the service's origin) with the token...
    const first = proxy.log.filter(isBlobRequest)
    expect(first.length).toBe(60)
    expect(first.every((e) => e.authorization?.startsWith("Bearer "))).toBe(true)
    // ...and never the other origin, nor the service's origin again after a detour through it.
    // 20 sent there, 20 sent there and back (twice each).
    expect(store.seen.length).toBe(60)
    expect(store.seen.filter((s) => s.authorization !== undefined)).toEqual([])
    expect(backSeen.length).toBe(20)
    expect(backSeen.filter((a) => a !== undefined)).toEqual([])
  })

  it("a same-origin redirect keeps Authorization (so the test above can tell the difference)", async () => {
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    proxy.decide = (req) => {
      const url = req.url ?? ""
      if (req.method === "GET" && /\/data\/[^/?]+$/.test(url)) {
        return { kind: "respond", status: 307, headers: { location: `${url}?moved=1` } }
      }
      return { kind: "forward" }
    }
    const client = await clientLayerFor({ ...svc, lookupUrl: proxy.lookupUrl })
    const listing = [...(await serviceState(svc, "places", 0)).values()]
    const bytes = await runWith(client, Effect.flatMap(BlobApi, (b) => b.get(DEMO, "places", listing[0]!.dataHandle)))
    expect(sha1(bytes)).toBe(listing[0]!.dataSha1)
    const moved = proxy.log.filter((e) => e.url.endsWith("?moved=1"))
    expect(moved.length).toBe(1)
    expect(moved[0]!.authorization).toMatch(/^Bearer /)
    expect(moved[0]!.status).toBe(200)
  })
})

// --- the local service ---------------------------------------------------------------------------

describe("the local service", () => {
  let svc: TestService
  let foreign: TestService
  let dataDir: string
  let handle: string
  const routes = Chunk.toReadonlyArray(router.routes).filter((r) => r.path !== "/oauth2/token")

  beforeAll(async () => {
    dataDir = tempDir("reliability-service-data-")
    svc = await startService({
      dataDir: path.join(dataDir, "data"),
      seed: { partitions: 30, versions: 2, blobBytes: 64 }
    })
    cleanup.push(() => svc.close())
    // Another service: its tokens are well formed and were really issued, just not by `svc`.
    foreign = await startService({ seed: { partitions: 1, versions: 1 } })
    cleanup.push(() => foreign.close())
    handle = [...(await serviceState(svc, "places", 0)).values()][0]!.dataHandle
  })

  const concrete = (routePath: string, catalog: string, layer: string) =>
    routePath
      .replace(/:catalog\b/g, catalog)
      .replace(/:hrn\b/g, catalog)
      .replace(/:layer\b/g, layer)
      .replace(/:handle\b/g, handle)
      .replace(/:api\b/g, "metadata")
      .replace(/:version\b/g, "v1")
      .replace(/:publication\b/g, "v2-00000000-0000-0000-0000-000000000000")
      .replace(/:[A-Za-z]+/g, "x")
      .replace(/\*/g, "x")

  const call = (method: string, target: string, authorization: string | undefined) =>
    raw(svc.url, {
      method,
      path: target,
      headers: {
        ...(authorization === undefined ? {} : { authorization }),
        ...(method === "POST" || method === "PUT"
          ? { "content-type": "application/json", "x-idempotency-key": "reliability-0001" }
          : {})
      },
      ...(method === "POST" || method === "PUT" ? { body: "{}" } : {})
    })

  it(`every route (${routes.length} with region prefixes) refuses missing, malformed, expired and foreign tokens with 401`, async () => {
    expect(routes.length).toBeGreaterThan(40)
    const expiring = await svc.token("demo-app", 1)
    const issued = Date.now()
    const foreignToken = await foreign.token()
    await sleep(Math.max(0, issued + 1_200 - Date.now()))
    const refusals: ReadonlyArray<readonly [string, string | undefined]> = [
      ["missing", undefined],
      ["malformed (Basic)", "Basic ZGVtbzpkZW1v"],
      ["malformed (no token)", "Bearer"],
      ["malformed (two tokens)", `Bearer ${foreignToken} ${foreignToken}`],
      ["expired", `Bearer ${expiring}`],
      ["foreign", `Bearer ${foreignToken}`]
    ]
    const wrong: Array<string> = []
    for (const route of routes) {
      const target = concrete(route.path, DEMO, "places")
      for (const [what, authorization] of refusals) {
        const res = await call(route.method === "*" ? "GET" : route.method, target, authorization)
        if (res.status !== 401) wrong.push(`${what} token: ${route.method} ${target} answered ${res.status}`)
      }
    }
    expect(wrong).toEqual([])
  })

  it("an application can read, list, subscribe to or delete nothing it was not granted, on any route", async () => {
    const token = { demo: await svc.token("demo-app"), other: await svc.token("other-app") }
    const before = {
      demoLatest: (await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()) as {
        version: number
      },
      restricted: await (await svc.get(`/config/v1/catalogs/${RESTRICTED}`, { appId: "other-app" })).text()
    }
    // The owner can subscribe to its stream layer: what the other application is refused below is the grant, not the request.
    const own = await call(
      "POST",
      `/stream/v2/catalogs/${DEMO}/layers/events/subscribe?mode=serial`,
      `Bearer ${token.demo}`
    )
    expect(own.status).toBe(201)

    const wrong: Array<string> = []
    for (const route of routes.filter((r) => r.path.includes(":catalog") || r.path.includes(":hrn"))) {
      for (
        const [app, catalog, layer] of [["other", DEMO, "places"], ["other", DEMO, "events"], [
          "demo",
          RESTRICTED,
          "private"
        ]] as const
      ) {
        const target = concrete(route.path, catalog, layer)
        const res = await call(route.method === "*" ? "GET" : route.method, target, `Bearer ${token[app]}`)
        if (res.status < 400) wrong.push(`${app}-app: ${route.method} ${target} answered ${res.status}`)
      }
    }
    expect(wrong).toEqual([])
    // Listing shows only one's own catalogs.
    const list = async (
      app: "demo" | "other"
    ) => ((JSON.parse(
      (await call("GET", "/config/v1/catalogs?verbose=true", `Bearer ${token[app]}`)).body.toString()
    ) as { results: { items: Array<{ hrn: string }> } }).results.items.map((i) => i.hrn))
    expect(await list("other")).not.toContain(DEMO)
    expect(await list("demo")).not.toContain(RESTRICTED)
    // Explicit deletes of the other's data: the catalog, a volatile blob, a publication.
    for (
      const [method, target, app] of [
        ["DELETE", `/config/v1/catalogs/${RESTRICTED}`, "demo"],
        ["DELETE", `/config/v1/catalogs/${DEMO}/layers/traffic`, "other"],
        ["DELETE", `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-1-0`, "other"],
        ["POST", `/stream/v2/catalogs/${DEMO}/layers/events/subscribe?mode=serial`, "other"]
      ] as const
    ) {
      expect((await call(method, target, `Bearer ${token[app]}`)).status, `${app}-app ${method} ${target}`)
        .toBeGreaterThanOrEqual(400)
    }
    // Nothing changed.
    expect(await (await svc.get(`/config/v1/catalogs/${RESTRICTED}`, { appId: "other-app" })).text()).toBe(
      before.restricted
    )
    expect(await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()).toEqual(
      before.demoLatest
    )
    expect((await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-1-0`, { method: "HEAD" })).status)
      .toBe(200)
  })

  it("a read-only grant lets an application read, and still not write or delete", async () => {
    const db = Sqlite.open(path.join(dataDir, "data", "catalog.db"))
    try {
      db.prepare("INSERT OR REPLACE INTO grants (catalog_hrn, app_id, can_read, can_write) VALUES (?, ?, 1, 0)").run(
        DEMO,
        "other-app"
      )
    } finally {
      db.close()
    }
    const other = `Bearer ${await svc.token("other-app")}`
    expect((await call("GET", `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=1`, other)).status).toBe(
      200
    )
    expect((await call("GET", `/blobstore/v1/catalogs/${DEMO}/layers/places/data/${handle}`, other)).status).toBe(200)
    const writes = [
      ["PUT", `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-1-0`],
      ["DELETE", `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-1-0`],
      ["POST", `/publish/v2/catalogs/${DEMO}/publications`],
      ["POST", `/metadata/v1/catalogs/${DEMO}/versions/minimum`],
      ["PUT", `/config/v1/catalogs/${DEMO}`],
      ["DELETE", `/config/v1/catalogs/${DEMO}`],
      ["DELETE", `/config/v1/catalogs/${DEMO}/layers/traffic`]
    ] as const
    for (const [method, target] of writes) {
      const res = await call(method, target, other)
      expect(res.status, `${method} ${target}`).toBe(403)
    }
    expect((await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/traffic-1-0`, { method: "HEAD" })).status)
      .toBe(200)
  })

  it("limits request bodies, announced or streamed", async () => {
    const small = await startService({ seed: { partitions: 1, versions: 1 }, maxBodyBytes: 4096 })
    cleanup.push(() => small.close())
    const token = await small.token()
    const big = JSON.stringify({ speed: "x".repeat(10_000) })
    const announced = await raw(small.url, {
      method: "PUT",
      path: `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/too-big-1`,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "content-length": String(Buffer.byteLength(big))
      },
      body: big
    })
    expect(announced.status).toBe(413)
    // Chunked: no Content-Length to refuse up front. The service stops reading at the limit and drops
    // the connection (the platform's body reader destroys the request): a refusal without an answer.
    const streamed = await new Promise<number | "dropped">((resolve) => {
      const target = new URL(small.url)
      const req = http.request({
        host: target.hostname,
        port: target.port,
        method: "PUT",
        path: `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/too-big-2`,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "transfer-encoding": "chunked"
        },
        agent: false
      }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on("error", () => resolve("dropped"))
      for (let i = 0; i < 10; i++) req.write("x".repeat(1_000))
      req.end()
    })
    expect(streamed === "dropped" || streamed >= 400, `streamed body answered ${streamed}`).toBe(true)
    const partitions = await raw(small.url, {
      method: "POST",
      path: `/publish/v2/catalogs/${DEMO}/publications`,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ layerIds: ["places"], pad: "y".repeat(8_000) })
    })
    expect(partitions.status).toBe(413)
    for (const h of ["too-big-1", "too-big-2"]) {
      expect(
        (await raw(small.url, {
          method: "HEAD",
          path: `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/${h}`,
          headers: { authorization: `Bearer ${token}` }
        })).status
      ).toBe(404)
    }
    // Within the limit the same request works.
    const ok = await raw(small.url, {
      method: "PUT",
      path: `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/small-1`,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}"
    })
    expect(ok.status).toBe(200)
  })

  it("data handles with path tricks neither read nor write outside the blob store", async () => {
    const token = await svc.token()
    const authorization = `Bearer ${token}`
    const sandbox = filesBelow(dataDir)
    const secretBytes = [
      fs.readFileSync(path.join(dataDir, "data", "catalog.db")).subarray(0, 16),
      Buffer.from("root:x:0:0")
    ]
    const tricks = [
      "..%2F..%2Fcatalog.db",
      "..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
      "%2e%2e%2f%2e%2e%2fcatalog.db",
      "..%5c..%5ccatalog.db",
      "%2e%2e",
      "..",
      ".",
      "a%00b",
      "%00",
      "packs%2Fpack-000000.dat",
      "....%2F%2Fcatalog.db"
    ]
    for (const trick of tricks) {
      for (
        const base of [
          `/blobstore/v1/catalogs/${DEMO}/layers/places/data/`,
          `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/`,
          `/blob/v1/catalogs/${DEMO}/layers/places/data/`
        ]
      ) {
        const read = await raw(svc.url, { path: base + trick, headers: { authorization } })
        expect(read.status, `GET ${base}${trick}`).toBeGreaterThanOrEqual(400)
        for (const bytes of secretBytes) expect(read.body.includes(bytes)).toBe(false)
      }
      const write = await raw(svc.url, {
        method: "PUT",
        path: `/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/${trick}`,
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify({ planted: trick })
      })
      expect(write.status, `PUT ${trick}`).toBeGreaterThanOrEqual(400)
    }
    // Literal dot segments, sent as they are (no client normalises them here).
    for (
      const target of [
        `/blobstore/v1/catalogs/${DEMO}/layers/places/data/../../../../../../etc/passwd`,
        `/blobstore/v1/catalogs/${DEMO}/layers/places/data/../../../../catalog.db`,
        `/blobstore/v1/catalogs/${DEMO}/layers/places/data/./../data/${handle}/../../../packs/pack-000000.dat`
      ]
    ) {
      const read = await raw(svc.url, { path: target, headers: { authorization } })
      expect(read.status, target).toBeGreaterThanOrEqual(400)
      for (const bytes of secretBytes) expect(read.body.includes(bytes)).toBe(false)
    }
    // No file appeared anywhere around or inside the service's directory.
    expect(filesBelow(dataDir)).toEqual(sandbox)
  })
})

// --- the output directory ------------------------------------------------------------------------

describe("the export's output directory", () => {
  it("partition ids with dots, a hostile catalog id and data handles stay data: nothing is written outside --out", async () => {
    const sandbox = tempDir("reliability-outdir-")
    const svc = await startService({ seed: { partitions: 20, versions: 1, blobBytes: 64 } })
    cleanup.push(() => svc.close())
    const get = authorizedGetter(svc)
    const token = await svc.token()
    const json = (body: unknown) => ({
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    // Partition ids made of dots are valid ids; ids with '/', '%' or NUL are refused.
    const init =
      (await (await fetch(`${svc.url}/publish/v2/catalogs/${DEMO}/publications`, json({ layerIds: ["places"] })))
        .json()) as { id: string }
    const tricky = ["..", "...", "..:..", "a..b", "._."]
    const staged = await fetch(
      `${svc.url}/publish/v2/catalogs/${DEMO}/layers/places/publications/${init.id}/partitions`,
      json({
        partitions: tricky.map((p) => ({
          partition: p,
          data: Buffer.from(JSON.stringify({ id: p })).toString("base64")
        }))
      })
    )
    expect(staged.status).toBe(204)
    for (const bad of ["../../escape", "a/b", "%2e%2e", "x\u0000y"]) {
      const refused = await fetch(
        `${svc.url}/publish/v2/catalogs/${DEMO}/layers/places/publications/${init.id}/partitions`,
        json({
          partitions: [{ partition: bad, data: Buffer.from("{}").toString("base64") }]
        })
      )
      expect(refused.status, JSON.stringify(bad)).toBe(400)
    }
    // Data handles that are dot segments cannot be fetched by any URL: the service refuses them.
    for (const handle of [".", ".."]) {
      const refused = await fetch(
        `${svc.url}/publish/v2/catalogs/${DEMO}/layers/places/publications/${init.id}/partitions`,
        json({
          partitions: [{ partition: `dots-${handle.length}`, dataHandle: handle }]
        })
      )
      expect(refused.status, `data handle ${handle}`).toBe(400)
    }
    expect(
      (await fetch(`${svc.url}/publish/v2/catalogs/${DEMO}/publications/${init.id}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${token}` }
      })).status
    ).toBe(204)
    const latest = ((await (await get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()) as {
      version: number
    }).version

    // A proxy that makes the catalog config hostile: an id and a layer id that would climb out of --out.
    const proxy = await startProxy(svc.url)
    cleanup.push(() => proxy.close())
    // Deep enough that climbing out of --out would still land inside the sandbox, where it is seen.
    const out = path.join(sandbox, "a", "b", "c", "out")
    const run = (layer: string) =>
      cli([
        "export",
        "--catalog",
        DEMO,
        "--layer",
        layer,
        "--out",
        out,
        "--format",
        "both",
        "--lookup-url",
        proxy.lookupUrl,
        "--credentials",
        path.join(sandbox, "app.properties"),
        "--quiet"
      ])
    fs.writeFileSync(path.join(sandbox, "app.properties"), await svc.credentialsText(), { mode: 0o600 })
    const real = (await (await get(`/config/v1/catalogs/${DEMO}`)).json()) as {
      id: string
      layers: Array<Record<string, unknown>>
    }
    const places = real.layers.find((l) => l.id === "places")!
    const hostile = JSON.stringify({
      ...real,
      id: "../../../escaped",
      layers: [...real.layers, { ...places, id: "../../up", hrn: `${DEMO}:../../up` }]
    })
    proxy.decide = (req) =>
      req.method === "GET" && (req.url ?? "").split("?")[0] === `/config/v1/catalogs/${DEMO}`
        ? { kind: "respond", status: 200, body: hostile }
        : { kind: "forward" }
    const refused = await run("../../up")
    expect(refused.code, refused.stderr).toBe(2)
    const exported = await run("places")
    expect(exported.code, exported.stderr).toBe(0)

    // Everything the runs wrote is below --out, in the directory the HRN names (not the service's id).
    expect(proxy.log.some((e) => e.action === "respond")).toBe(true)
    expect(filesBelow(sandbox).filter((f) => !f.startsWith("a/b/c/out/") && f !== "app.properties")).toEqual([])
    const dir = path.join(out, "demo", "places", `version=${latest}`)
    expect(readJson(path.join(dir, "_manifest.json")).partitions).toBe(25)
    const rows = await readParquet(dir)
    expectMatchesService(rows, await serviceState(svc, "places", latest))
    expect(tricky.every((p) => rows.some((r) => r.partition === p))).toBe(true)
    expect(proxy.log.filter(isBlobRequest).map(handleOf).every((h) => !/^\.+$/.test(h))).toBe(true)
  })
})
