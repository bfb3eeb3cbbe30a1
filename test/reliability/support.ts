/**
 * Helpers of the reliability tests: a recording (and misbehaving) HTTP proxy in front of the local
 * service, and what the service holds, computed independently of the exporter (its own listing and
 * every blob fetched directly, hashed here).
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { gunzipSync } from "node:zlib"
import { expect } from "vitest"
import { cli } from "../support/cli.ts"
import type { ReadRow } from "../support/duckdb.ts"
import { sha1 } from "../support/files.ts"
import { DEMO, type TestService } from "../support/service.ts"

/** `export` of the demo's places layer (version 0, Parquet) through `via`, e.g. a proxy in front of `svc`. */
export const exportPlaces = async (
  svc: TestService,
  via: { readonly lookupUrl: string },
  out: string,
  flags: ReadonlyArray<string> = ["--parts", "1"]
) =>
  cli([
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
    "parquet",
    ...flags,
    "--lookup-url",
    via.lookupUrl,
    "--credentials",
    await svc.credentialsFile(),
    "--quiet"
  ])

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// --- a recording proxy ---------------------------------------------------------------------------

export interface Exchange {
  readonly method: string
  /** Raw request target, as sent (path and query). */
  readonly url: string
  readonly path: string
  readonly authorization: string | undefined
  readonly range: string | undefined
  /** Status sent to the client; 0 when the connection was cut before a response head. */
  status: number
  readonly at: number
  /** When the answer was sent completely (or the connection closed); undefined while in flight. */
  endedAt: number | undefined
  /** What the proxy did: forwarded as is, answered itself, cut the body, replaced the upstream answer. */
  readonly action: Decision["kind"]
}

export type Decision =
  | { readonly kind: "forward" }
  | {
    readonly kind: "respond"
    readonly status: number
    readonly headers?: Record<string, string>
    readonly body?: string
  }
  /** Forward, but drop the connection after this many body bytes. */
  | { readonly kind: "cut"; readonly afterBytes: number }
  /** Forward, then answer `replace(upstreamStatus)` instead when it returns something. */
  | {
    readonly kind: "inspect"
    readonly replace: (
      status: number
    ) => { status: number; headers?: Record<string, string>; body?: string } | undefined
  }
  /**
   * Answer what `handle` returns; it gets the request body and may call the service itself
   * (`forward`) to build another answer from the real one.
   */
  | {
    readonly kind: "handle"
    readonly handle: (
      request: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer },
      forward: () => Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>
    ) => Promise<{ status: number; headers?: Record<string, string>; body?: string }>
  }

export interface Proxy {
  readonly url: string
  readonly lookupUrl: string
  readonly log: Array<Exchange>
  /** Decides per request; default forwards everything. */
  decide: (request: http.IncomingMessage, log: ReadonlyArray<Exchange>) => Decision
  readonly close: () => Promise<void>
}

/**
 * A proxy in front of `target` that keeps the client's Host header, so the service's lookup answers
 * point at the proxy and every later request passes it too.
 */
export const startProxy = async (target: string): Promise<Proxy> => {
  const upstream = new URL(target)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 })
  const log: Array<Exchange> = []
  const server = http.createServer((req, res) => {
    const decision = proxy.decide(req, log)
    const entry: Exchange = {
      method: req.method ?? "GET",
      url: req.url ?? "/",
      path: (req.url ?? "/").split("?")[0]!,
      authorization: req.headers.authorization,
      range: req.headers.range,
      status: 0,
      at: Date.now(),
      endedAt: undefined,
      action: decision.kind
    }
    log.push(entry)
    res.on("close", () => (entry.endedAt = Date.now()))
    if (decision.kind === "handle") {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks)
        const forward = () =>
          new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
            const upstreamRequest = http.request(
              {
                host: upstream.hostname,
                port: upstream.port,
                method: req.method,
                path: req.url,
                headers: req.headers,
                agent
              },
              (answer) => {
                const parts: Array<Buffer> = []
                answer.on("data", (c: Buffer) => parts.push(c))
                answer.on(
                  "end",
                  () => resolve({ status: answer.statusCode ?? 0, headers: answer.headers, body: Buffer.concat(parts) })
                )
              }
            )
            upstreamRequest.on("error", reject)
            upstreamRequest.end(body)
          })
        decision.handle({ method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers, body }, forward).then(
          (answer) => {
            entry.status = answer.status
            res.writeHead(answer.status, {
              ...(answer.body === undefined ? {} : { "content-type": "application/json" }),
              ...answer.headers
            })
            res.end(answer.body ?? "")
          },
          () => res.destroy()
        )
      })
      return
    }
    if (decision.kind === "respond") {
      req.resume()
      entry.status = decision.status
      res.writeHead(decision.status, { "content-type": "application/json", ...decision.headers })
      res.end(decision.body ?? JSON.stringify({ title: http.STATUS_CODES[decision.status], status: decision.status }))
      return
    }
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        if (decision.kind === "inspect") {
          const replaced = decision.replace(answer.statusCode ?? 0)
          if (replaced !== undefined) {
            answer.resume()
            entry.status = replaced.status
            res.writeHead(replaced.status, { "content-type": "application/json", ...replaced.headers })
            res.end(
              replaced.body ?? JSON.stringify({ title: http.STATUS_CODES[replaced.status], status: replaced.status })
            )
            return
          }
        }
        entry.status = answer.statusCode ?? 0
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        if (decision.kind !== "cut") {
          answer.pipe(res)
          return
        }
        let sent = 0
        answer.on("data", (chunk: Buffer) => {
          if (sent >= decision.afterBytes) return
          const part = chunk.subarray(0, decision.afterBytes - sent)
          sent += part.byteLength
          res.write(part)
          if (sent >= decision.afterBytes) {
            answer.destroy()
            // Let the bytes leave before the connection drops (a cut, not a reset).
            res.socket?.end(() => res.socket?.destroy())
            setTimeout(() => res.socket?.destroy(), 50)
          }
        })
        answer.on("end", () => res.end())
      }
    )
    forward.on("error", () => res.destroy())
    req.pipe(forward)
  })
  server.keepAliveTimeout = 30_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const proxy: Proxy = {
    url,
    lookupUrl: `${url}/lookup/v1`,
    log,
    decide: () => ({ kind: "forward" }),
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
  return proxy
}

export const isBlobRequest = (e: Exchange) =>
  e.method === "GET" && /\/blobstore\/v1\/catalogs\/[^/]+\/layers\/[^/]+\/data\//.test(e.path)
export const handleOf = (e: Exchange) => decodeURIComponent(e.path.slice(e.path.lastIndexOf("/") + 1))
export const isListing = (e: Exchange) =>
  e.method === "GET" && /\/metadata\/v1\/catalogs\/[^/]+\/layers\/[^/]+\/(partitions|changes)$/.test(e.path)

// --- what the service holds ---------------------------------------------------------------------

export interface Expected {
  readonly version: number
  readonly dataHandle: string
  readonly checksum: string | null
  readonly dataSize: number | null
  /** sha1 of the blob as the service serves it (gunzipped when stored gzip); null for a deletion. */
  readonly dataSha1: string | null
}

/** Runs `work` over `items` with at most `limit` at once. */
export const eachLimited = async <T>(items: ReadonlyArray<T>, limit: number, work: (item: T) => Promise<void>) => {
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!)
  }))
}

/**
 * GETs from the service as the demo application, with a fresh token whenever one expired (short
 * token lifetimes), and again after an injected fault (429, 5xx, a reset or cut body).
 */
export const authorizedGetter = (svc: TestService) => {
  let token: Promise<string> | undefined
  return async (pathOrUrl: string): Promise<Response> => {
    const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${svc.url}${pathOrUrl}`
    for (let attempt = 0;; attempt++) {
      const current = token ??= svc.token()
      let res: Response
      let body: ArrayBuffer
      try {
        res = await fetch(url, { headers: { authorization: `Bearer ${await current}` } })
        body = await res.arrayBuffer()
      } catch (e) {
        if (attempt >= 50) throw e
        continue
      }
      if (res.status === 401 && attempt < 2) {
        if (token === current) token = undefined
        continue
      }
      if ((res.status === 429 || res.status >= 500) && attempt < 50) continue
      return new Response(res.status === 204 || res.status === 304 ? null : body, {
        status: res.status,
        headers: res.headers
      })
    }
  }
}

/** The service's own listing of a layer at a version, and every blob fetched from it and hashed here. */
export const serviceState = async (
  svc: TestService,
  layer: string,
  version: number | undefined,
  catalog = DEMO
): Promise<Map<string, Expected>> => {
  const get = authorizedGetter(svc)
  const params = `${version === undefined ? "" : `version=${version}&`}additionalFields=checksum,dataSize`
  const res = await get(`/metadata/v1/catalogs/${catalog}/layers/${layer}/partitions?${params}`)
  expect(res.status).toBe(200)
  const listing = (await res.json()) as {
    partitions: Array<{ partition: string; version: number; dataHandle: string; checksum?: string; dataSize?: number }>
  }
  const state = new Map<string, Expected>()
  await eachLimited(listing.partitions, 16, async (p) => {
    let dataSha1: string | null = null
    if (p.dataHandle !== "") {
      const blob = await get(`/blobstore/v1/catalogs/${catalog}/layers/${layer}/data/${p.dataHandle}`)
      expect(blob.status === 200 || blob.status === 204, `blob ${p.dataHandle}: ${blob.status}`).toBe(true)
      let bytes = new Uint8Array(await blob.arrayBuffer())
      if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = new Uint8Array(gunzipSync(bytes))
      dataSha1 = sha1(bytes)
    }
    state.set(p.partition, {
      version: p.version,
      dataHandle: p.dataHandle,
      checksum: p.checksum ?? null,
      dataSize: p.dataSize ?? null,
      dataSha1
    })
  })
  return state
}

/** Row for row, the files hold what the service holds: each partition exactly once, data equal by sha1. */
export const expectMatchesService = (rows: ReadonlyArray<ReadRow>, expected: ReadonlyMap<string, Expected>) => {
  const seen = new Set<string>()
  const problems: Array<string> = []
  for (const row of rows) {
    if (seen.has(row.partition)) problems.push(`${row.partition} twice`)
    seen.add(row.partition)
    const want = expected.get(row.partition)
    if (want === undefined) {
      problems.push(`${row.partition} is not in the service`)
      continue
    }
    if (row.data_handle !== want.dataHandle) {
      problems.push(`${row.partition}: data handle ${row.data_handle} != ${want.dataHandle}`)
    }
    if (Number(row.partition_version) !== want.version) {
      problems.push(`${row.partition}: version ${row.partition_version} != ${want.version}`)
    }
    if (row.data_sha1 !== want.dataSha1) {
      problems.push(`${row.partition}: data sha1 ${row.data_sha1} != ${want.dataSha1}`)
    }
    if (want.checksum !== null && row.checksum !== want.checksum) {
      problems.push(`${row.partition}: checksum ${row.checksum} != ${want.checksum}`)
    }
  }
  for (const id of expected.keys()) if (!seen.has(id)) problems.push(`${id} is missing`)
  expect(problems.slice(0, 20), `${problems.length} differences`).toEqual([])
  expect(rows.length).toBe(expected.size)
}
