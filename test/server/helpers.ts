/**
 * Small helpers shared by the end-to-end tests of the local service. Everything goes over real HTTP;
 * nothing here reaches into the server's modules except the seed's catalog and application names.
 */
import { createHash } from "node:crypto"
import * as http from "node:http"
import { expect } from "vitest"
import type { TestService } from "../support/service.ts"

export const DEMO = "hrn:local:data:::demo"
export const RESTRICTED = "hrn:local:data:::restricted"

export const sha1 = (bytes: Uint8Array | string): string => createHash("sha1").update(bytes).digest("hex")

export interface Entry {
  readonly version: number
  readonly partition: string
  readonly layer?: string
  readonly dataHandle: string
  readonly dataSize?: number
  readonly checksum?: string
  readonly compressedDataSize?: number
  readonly crc?: string
}

export interface Listing {
  readonly partitions: ReadonlyArray<Entry>
  readonly next?: string
}

export const metadata = (path: string, catalog = DEMO) => `/metadata/v1/catalogs/${catalog}${path}`
export const query = (path: string, catalog = DEMO) => `/query/v1/catalogs/${catalog}${path}`
export const blob = (layer: string, handle: string, catalog = DEMO) =>
  `/blobstore/v1/catalogs/${catalog}/layers/${layer}/data/${handle}`
export const publish = (path: string, catalog = DEMO) => `/publish/v2/catalogs/${catalog}${path}`

/** Asserts the status (showing the body when it differs) and returns the parsed JSON body. */
export const expectJson = async <T = any>(res: Response, status: number): Promise<T> => {
  const text = await res.text()
  if (res.status !== status) expect.fail(`expected ${status}, got ${res.status} for ${res.url}: ${text.slice(0, 500)}`)
  return JSON.parse(text) as T
}

export const expectStatus = async (res: Response, status: number): Promise<string> => {
  const text = await res.text()
  if (res.status !== status) expect.fail(`expected ${status}, got ${res.status} for ${res.url}: ${text.slice(0, 500)}`)
  return text
}

/** The metadata/query/lookup error body `{title, status, detail: [{name, error}]}`. */
export const expectDataError = async (res: Response, status: number, name?: string, error?: string | RegExp) => {
  const body = await expectJson<{ title: string; status: number; detail?: Array<{ name: string; error: string }> }>(
    res,
    status
  )
  expect(res.headers.get("content-type")).toMatch(/^application\/json/)
  expect(typeof body.title).toBe("string")
  expect(body.title.length).toBeGreaterThan(0)
  expect(body.status).toBe(status)
  if (name !== undefined) {
    expect(body.detail).toHaveLength(1)
    expect(body.detail![0]!.name).toBe(name)
    expect(typeof body.detail![0]!.error).toBe("string")
    if (typeof error === "string") expect(body.detail![0]!.error).toBe(error)
    else if (error !== undefined) expect(body.detail![0]!.error).toMatch(error)
  }
  return body
}

export const listing = async (
  svc: TestService,
  layer: string,
  params: string,
  init: RequestInit & { appId?: string } = {},
  catalog = DEMO
) =>
  expectJson<Listing>(
    await svc.get(metadata(`/layers/${layer}/partitions${params === "" ? "" : `?${params}`}`, catalog), init),
    200
  )

export const latestVersion = async (svc: TestService, catalog = DEMO, appId?: string) =>
  (await expectJson<{ version: number }>(
    await svc.get(metadata("/versions/latest?startVersion=-1", catalog), appId === undefined ? {} : { appId }),
    200
  ))
    .version

export const byId = (entries: ReadonlyArray<Entry>) => new Map(entries.map((e) => [e.partition, e]))

/** Canonical, order-independent text of a set of entries, for exact comparisons. */
export const canonical = (entries: ReadonlyArray<Entry>) =>
  entries.map((e) => JSON.stringify(Object.fromEntries(Object.entries(e).sort(([a], [b]) => (a < b ? -1 : 1))))).sort()

export interface RawResponse {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
  /** Set when the connection broke before the response was complete. */
  readonly error: Error | undefined
}

/**
 * A GET with node:http: no transparent decompression, and what arrived before a broken connection
 * is kept (fetch throws it away). Rejects only when no response head arrived at all.
 */
export const rawRequest = (url: string, headers: Record<string, string> = {}, method = "GET"): Promise<RawResponse> =>
  new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      let settled = false
      const finish = (error: Error | undefined) => {
        if (settled) return
        settled = true
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), error })
      }
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => finish(res.complete ? undefined : new Error("response incomplete")))
      res.on("aborted", () => finish(new Error("aborted")))
      res.on("error", (e) => finish(e))
      res.on(
        "close",
        () => finish(res.complete ? undefined : new Error("connection closed before the response was complete"))
      )
    })
    req.on("error", reject)
    req.end()
  })

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Initialises a publication, uploads partitions per layer, and submits it; returns the publication id. */
export const publishPartitions = async (
  svc: TestService,
  layerIds: ReadonlyArray<string>,
  uploads: Record<string, ReadonlyArray<Record<string, unknown>>>,
  batch = 10_000
) => {
  const init = await expectJson<{ id: string }>(
    await svc.get(publish("/publications"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ layerIds })
    }),
    200
  )
  for (const [layer, partitions] of Object.entries(uploads)) {
    for (let i = 0; i < partitions.length; i += batch) {
      const res = await svc.get(publish(`/layers/${layer}/publications/${init.id}/partitions`), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ partitions: partitions.slice(i, i + batch) })
      })
      await expectStatus(res, 204)
    }
  }
  await expectStatus(await svc.get(publish(`/publications/${init.id}`), { method: "PUT" }), 204)
  return init.id
}
