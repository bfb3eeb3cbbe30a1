/**
 * Fault injection over real connections: throttling with Retry-After, dropped connections, bodies
 * cut short of their Content-Length, token and lookup spared, and the same seed giving the same
 * sequence of outcomes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FaultOptions, noFaults } from "../../src/server/Faults.ts"
import { startService, type TestService } from "../support/service.ts"
import { bearer, blob, DEMO, expectJson, metadata, query, rawRequest } from "./helpers.ts"

const small = { partitions: 20, versions: 2 }

const start = (faults: Partial<FaultOptions>) => startService({ seed: small, faults: { ...noFaults, ...faults } })

type Outcome = "ok" | "429" | "503" | "reset" | "truncated" | `other ${number}`

/** One request on a fresh connection, classified by what arrived. */
const outcome = async (url: string, token: string): Promise<Outcome> => {
  try {
    const res = await rawRequest(url, bearer(token))
    if (res.error !== undefined) {
      expect(res.body.byteLength).toBeLessThan(Number(res.headers["content-length"]))
      return "truncated"
    }
    if (res.status === 200) {
      expect(res.body.byteLength).toBe(Number(res.headers["content-length"]))
      JSON.parse(res.body.toString("utf8"))
      return "ok"
    }
    if (res.status === 429 || res.status === 503) {
      expect(JSON.parse(res.body.toString("utf8")).status).toBe(res.status)
      return String(res.status) as "429" | "503"
    }
    return `other ${res.status}`
  } catch (e) {
    expect(String((e as { code?: string }).code ?? e)).toMatch(/ECONNRESET|socket hang up/)
    return "reset"
  }
}

/** The same data request for every sequence: a JSON body with a Content-Length, so truncation shows. */
const sequence = async (svc: TestService, n: number) => {
  const token = await svc.token()
  const out: Array<Outcome> = []
  for (let i = 0; i < n; i++) out.push(await outcome(`${svc.url}/config/v1/catalogs`, token))
  return out
}

describe("fault injection", () => {
  const services: Array<TestService> = []
  afterAll(async () => {
    await Promise.all(services.map((s) => s.close()))
  })

  describe("throttle: 1", () => {
    let svc: TestService
    beforeAll(async () => {
      svc = await start({ throttle: 1, retryAfterSeconds: 7 })
      services.push(svc)
    })

    it("answers every data endpoint with 429 and Retry-After: 7", async () => {
      for (
        const path of [
          "/config/v1/catalogs",
          `/config/v1/catalogs/${DEMO}`,
          metadata("/versions/latest?startVersion=-1"),
          metadata("/layers/places/partitions?version=0"),
          query("/layers/places/partitions?partition=place-0000001"),
          blob("places", "any-handle")
        ]
      ) {
        const res = await svc.get(path)
        const body = await expectJson<Record<string, unknown>>(res, 429)
        expect(res.headers.get("retry-after"), path).toBe("7")
        expect(body).toEqual({ title: "Too Many Requests", status: 429 })
      }
      const put = await svc.get(blob("traffic", "x-1"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: "{}"
      })
      expect(put.status).toBe(429)
      await put.arrayBuffer()
    })

    it("spares the token endpoint and lookup", async () => {
      const token = await svc.token()
      expect(token).toMatch(/\S/)
      for (
        const path of [
          "/lookup/v1/platform/apis",
          `/lookup/v1/resources/${DEMO}/apis`,
          `/lookup/v1/resources/${DEMO}/apis/metadata/v1`
        ]
      ) {
        const res = await fetch(`${svc.url}${path}`, { headers: bearer(token) })
        expect(res.status, path).toBe(200)
        expect(res.headers.get("retry-after")).toBeNull()
        expect(Array.isArray(await res.json())).toBe(true)
      }
    })
  })

  describe("reset: 1", () => {
    let svc: TestService
    beforeAll(async () => {
      svc = await start({ reset: 1 })
      services.push(svc)
    })

    it("drops the connection without a response on data endpoints", async () => {
      const token = await svc.token()
      for (const path of ["/config/v1/catalogs", metadata("/layers/places/partitions?version=0")]) {
        await expect(rawRequest(`${svc.url}${path}`, bearer(token))).rejects.toMatchObject({
          code: expect.stringMatching(/ECONNRESET/)
        })
        await expect(fetch(`${svc.url}${path}`, { headers: bearer(token) })).rejects.toThrow(TypeError)
      }
    })

    it("spares the token endpoint and lookup", async () => {
      const token = await svc.token()
      const res = await fetch(`${svc.url}/lookup/v1/resources/${DEMO}/apis`, { headers: bearer(token) })
      expect(res.status).toBe(200)
      await res.arrayBuffer()
    })
  })

  describe("truncate: 1", () => {
    let svc: TestService
    beforeAll(async () => {
      svc = await start({ truncate: 1 })
      services.push(svc)
    })

    it("delivers fewer bytes than Content-Length and then drops the connection", async () => {
      const token = await svc.token()
      // The upload itself is processed before its (empty) response is cut.
      const uploaded = Buffer.from(JSON.stringify({ pad: "0123456789".repeat(1000) }))
      await fetch(`${svc.url}${blob("traffic", "truncate-me")}`, {
        method: "PUT",
        headers: { ...bearer(token), "content-type": "application/json" },
        body: uploaded
      }).then((r) => r.arrayBuffer()).catch(() => undefined)

      const res = await rawRequest(`${svc.url}${blob("traffic", "truncate-me")}`, bearer(token))
      expect(res.status).toBe(200)
      expect(Number(res.headers["content-length"])).toBe(uploaded.byteLength)
      expect(res.error).toBeDefined()
      expect(res.body.byteLength).toBeGreaterThan(0)
      expect(res.body.byteLength).toBeLessThan(uploaded.byteLength)
      // What did arrive is the start of the blob.
      expect(Buffer.compare(res.body, uploaded.subarray(0, res.body.byteLength))).toBe(0)

      // fetch reports the cut as an error while reading the body.
      const viaFetch = await fetch(`${svc.url}${blob("traffic", "truncate-me")}`, { headers: bearer(token) })
      expect(viaFetch.status).toBe(200)
      await expect(viaFetch.arrayBuffer()).rejects.toThrow()
    })

    it("cuts streamed listings short too", async () => {
      const token = await svc.token()
      const res = await rawRequest(`${svc.url}${metadata("/layers/places/partitions?version=0")}`, bearer(token))
      expect(res.status).toBe(200)
      expect(res.error).toBeDefined()
      expect(() => JSON.parse(res.body.toString("utf8"))).toThrow()
    })

    it("spares the token endpoint and lookup", async () => {
      const token = await svc.token()
      const res = await rawRequest(`${svc.url}/lookup/v1/resources/${DEMO}/apis`, bearer(token))
      expect(res.error).toBeUndefined()
      expect(res.status).toBe(200)
      expect(JSON.parse(res.body.toString("utf8")).length).toBeGreaterThan(0)
    })
  })

  describe("the fault seed", () => {
    const mixed = { throttle: 0.2, unavailable: 0.15, reset: 0.15, truncate: 0.15 }
    let a: TestService
    let b: TestService
    let c: TestService
    beforeAll(async () => {
      ;[a, b, c] = await Promise.all([
        start({ ...mixed, seed: 77 }),
        start({ ...mixed, seed: 77 }),
        start({ ...mixed, seed: 78 })
      ])
      services.push(a, b, c)
    })

    it("gives the same sequence of outcomes for the same seed, and another for another seed", async () => {
      const first = await sequence(a, 40)
      const second = await sequence(b, 40)
      const other = await sequence(c, 40)
      expect(second).toEqual(first)
      expect(other).not.toEqual(first)
      // Every kind of outcome occurs, so the comparison covers all of them.
      for (const kind of ["ok", "429", "503", "reset", "truncated"]) expect(first, kind).toContain(kind)
      expect(first.filter((o) => o.startsWith("other"))).toEqual([])
    })
  })
})
