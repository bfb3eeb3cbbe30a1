/**
 * A bare node:http catalog service for the export benchmark: no Effect, no SQLite, every answer from
 * memory. It speaks just enough of the interface for an export (token, lookup, config, versions,
 * parts, one listing per part, blobs), so the benchmark measures the exporter, not the service.
 *
 *   tsx test/bench/fast-server.ts --partitions N --min-bytes A --max-bytes B [--latency-ms L] [--limit M]
 *     --credentials-out FILE
 *
 * `--limit M` is the app's limit of a platform: a blob read arriving while M reads are in flight is
 * answered 429 with `Retry-After: 1`. Prints one JSON line once listening: {"url", "lookupUrl",
 * "catalog", "layer"}. GET /bench/stats says how many blobs were asked for (and of them throttled),
 * the most in flight at once, when the first request came and when the last answer went (ms), and
 * how many blobs were answered, and when the answers ending the first and the ninth tenth of them
 * went (`answered`, `tenth`, `ninthTenth`);
 * GET /bench/stats?reset=1 says so and starts counting afresh (for the next client).
 * Tokens are not checked: any signed token request gets one, any bearer token is accepted.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createServer, type ServerResponse } from "node:http"
import { makePayload, random } from "./payload.ts"

export const CATALOG = "hrn:local:data:::bench"
export const LAYER = "blobs"
const VERSION = 1

const arg = (name: string, fallback?: string) => {
  const i = process.argv.indexOf(`--${name}`)
  const value = i >= 0 ? process.argv[i + 1] : fallback
  if (value === undefined) throw new Error(`--${name} is required`)
  return value
}

const count = Number(arg("partitions"))
const minBytes = Number(arg("min-bytes", "1024"))
const maxBytes = Number(arg("max-bytes", String(minBytes)))
const latencyMs = Number(arg("latency-ms", "0"))
const limit = Number(arg("limit", "0"))
const credentialsOut = arg("credentials-out")

// A pool of distinct payloads, each blob a copy with its index stamped in (distinct checksums).
const next = random(42)
const POOL = 256
const pool = Array.from({ length: POOL }, (_, i) => makePayload(maxBytes, i + 1))
const blobs = new Map<string, Buffer>()
const listed: Array<string> = []
for (let i = 0; i < count; i++) {
  const size = minBytes + (maxBytes > minBytes ? next() % (maxBytes - minBytes + 1) : 0)
  const data = Buffer.from(pool[i % POOL]!.subarray(0, size))
  data.writeUInt32BE(i, 0)
  const handle = `${(i * 2654435761 >>> 0).toString(16).padStart(8, "0")}-bench-${i}`
  blobs.set(handle, data)
  const checksum = createHash("sha1").update(data).digest("hex")
  listed.push(
    JSON.stringify({
      version: VERSION,
      partition: `p${String(i).padStart(9, "0")}`,
      layer: LAYER,
      dataHandle: handle,
      dataSize: size,
      checksum
    })
  )
}

/** A listing document of partitions [from, to). */
const listing = (from: number, to: number) => Buffer.from(`{"partitions":[${listed.slice(from, to).join(",")}]}`)

/** When the blob requests came: the export's fetch phase as the server saw it (GET /bench/stats). */
const stats = { blobs: 0, throttled: 0, peakInFlight: 0, first: 0, last: 0 }
/** When each blob answer went, in order. */
let answeredAt: Array<number> = []
let inFlight = 0

/** `stats`, and when the answers that end the first and the ninth tenth went (ms): the steady middle of the fetch. */
const report = () => {
  const n = answeredAt.length
  return {
    ...stats,
    answered: n,
    tenth: answeredAt[Math.floor(n / 10)] ?? 0,
    ninthTenth: answeredAt[Math.ceil((n * 9) / 10) - 1] ?? 0
  }
}

const server = createServer((req, res) => {
  if (req.url === "/bench/stats") return send(res, 200, report())
  if (req.url === "/bench/stats?reset=1") {
    send(res, 200, report())
    answeredAt = []
    return void Object.assign(stats, { blobs: 0, throttled: 0, peakInFlight: 0, first: 0, last: 0 })
  }
  const url = new URL(req.url ?? "/", "http://x")
  const path = decodeURIComponent(url.pathname)
  const origin = `http://${req.headers.host}`
  if (req.method === "POST" && path === "/oauth2/token") {
    req.resume()
    return send(res, 200, { accessToken: "bench-token", tokenType: "bearer", expiresIn: 86400 })
  }
  if (path === "/lookup/v1/platform/apis") return send(res, 200, [entry("config", "v1", `${origin}/config/v1`)])
  if (path === `/lookup/v1/resources/${CATALOG}/apis`) {
    return send(res, 200, [
      entry("config", "v1", `${origin}/config/v1`),
      entry("metadata", "v1", `${origin}/metadata/v1/catalogs/${CATALOG}`),
      entry("blob", "v1", `${origin}/blobstore/v1/catalogs/${CATALOG}`),
      entry("volatile-blob", "v1", `${origin}/blobstore/v1/catalogs/${CATALOG}`)
    ])
  }
  if (path === `/config/v1/catalogs/${CATALOG}`) return send(res, 200, catalogConfig)
  const metadata = `/metadata/v1/catalogs/${CATALOG}`
  if (path === `${metadata}/versions/latest`) return send(res, 200, { version: VERSION })
  if (path === `${metadata}/versions/minimum`) return send(res, 200, { version: 0 })
  if (path === `${metadata}/layers/${LAYER}/partitions/parts`) {
    const parts = Math.max(1, Math.min(Number(url.searchParams.get("numRequestedParts") ?? 1), count))
    return send(res, 200, { parts: Array.from({ length: parts }, (_, i) => `${i}/${parts}`) })
  }
  if (path === `${metadata}/layers/${LAYER}/partitions`) {
    const part = url.searchParams.get("part")
    const [index, of] = part === null ? [0, 1] : part.split("/").map(Number) as [number, number]
    const body = listing(Math.floor((count * index) / of), Math.floor((count * (index + 1)) / of))
    res.writeHead(200, { "content-type": "application/json", "content-length": body.byteLength })
    return res.end(body)
  }
  const blobPrefix = `/blobstore/v1/catalogs/${CATALOG}/layers/${LAYER}/data/`
  if (path.startsWith(blobPrefix)) {
    const data = blobs.get(path.slice(blobPrefix.length))
    if (data === undefined) return send(res, 404, { title: "Not Found", status: 404 })
    if (stats.blobs++ === 0) stats.first = performance.now()
    if (limit > 0 && inFlight >= limit) {
      stats.throttled++
      res.writeHead(429, { "content-type": "application/json", "retry-after": "1" })
      return res.end(JSON.stringify({ title: "Too Many Requests", status: 429 }))
    }
    if (++inFlight > stats.peakInFlight) stats.peakInFlight = inFlight
    const reply = () => {
      inFlight--
      stats.last = performance.now()
      answeredAt.push(stats.last)
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": data.byteLength })
      res.end(data)
    }
    return latencyMs > 0 ? void setTimeout(reply, latencyMs) : reply()
  }
  send(res, 404, { title: "Not Found", status: 404, detail: [{ name: "path", error: path }] })
})

const entry = (api: string, version: string, baseURL: string) => ({ api, version, baseURL, parameters: {} })

const send = (res: ServerResponse, status: number, body: unknown) => {
  const text = Buffer.from(JSON.stringify(body))
  res.writeHead(status, { "content-type": "application/json", "content-length": text.byteLength })
  res.end(text)
}

const catalogConfig = {
  id: "bench",
  hrn: CATALOG,
  name: "Benchmark catalog",
  summary: "Blobs served from memory",
  description: "",
  tags: [],
  billingTags: [],
  notifications: { enabled: false },
  replication: {},
  created: "2026-01-01T00:00:00.000Z",
  owner: { creator: { id: "bench" }, organisation: { id: "bench" } },
  version: VERSION,
  layers: [{
    id: LAYER,
    hrn: `${CATALOG}:${LAYER}`,
    name: "Blobs",
    summary: "",
    description: "",
    tags: [],
    billingTags: [],
    contentType: "application/octet-stream",
    digest: "SHA-1",
    partitioning: { scheme: "generic" },
    partitioningScheme: "generic",
    volume: { volumeType: "durable" },
    layerType: "versioned",
    created: "2026-01-01T00:00:00.000Z",
    owner: { creator: { id: "bench" }, organisation: { id: "bench" } }
  }]
}

server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no address")
  const url = `http://127.0.0.1:${address.port}`
  fs.writeFileSync(
    credentialsOut,
    [
      "here.user.id = bench",
      "here.client.id = bench",
      "here.access.key.id = bench-key",
      "here.access.key.secret = bench-secret",
      `here.token.endpoint.url = ${url}/oauth2/token`,
      ""
    ].join("\n"),
    { mode: 0o600 }
  )
  console.log(JSON.stringify({ url, lookupUrl: `${url}/lookup/v1`, catalog: CATALOG, layer: LAYER }))
})
process.on("SIGTERM", () => server.close(() => process.exit(0)))
