/**
 * Bearer authentication on every data endpoint, and catalog visibility between applications:
 * a catalog that is not the caller's must look exactly like one that does not exist.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import {
  blob,
  DEMO,
  expectJson,
  expectStatus,
  listing,
  metadata,
  publish,
  query,
  RESTRICTED,
  sha1,
  sleep
} from "./helpers.ts"

const MISSING = "hrn:local:data:::does-not-exist"

interface Endpoint {
  readonly method: string
  readonly path: string
  readonly body?: string
  readonly contentType?: string
}

/** Every route of the service except the token endpoint. */
const endpoints = (handle: string): ReadonlyArray<Endpoint> => [
  { method: "GET", path: "/lookup/v1/platform/apis" },
  { method: "GET", path: "/lookup/v1/platform/apis/config/v1" },
  { method: "GET", path: `/lookup/v1/resources/${DEMO}/apis` },
  { method: "GET", path: `/lookup/v1/resources/${DEMO}/apis/metadata/v1` },
  { method: "GET", path: "/config/v1/catalogs" },
  { method: "GET", path: "/config/v1/catalogs/context/eyJvZmZzZXQiOjAsImxpbWl0IjoxLCJ2ZXJib3NlIjpmYWxzZX0" },
  { method: "GET", path: `/config/v1/catalogs/${DEMO}` },
  { method: "GET", path: metadata("/layers/places/partitions?version=0") },
  { method: "GET", path: metadata("/layers/places/partitions/parts?numRequestedParts=2") },
  { method: "GET", path: metadata("/layers/places/changes?startVersion=0&endVersion=1") },
  { method: "GET", path: metadata("/layers/places/changes/parts?numRequestedParts=2") },
  { method: "GET", path: metadata("/versions?startVersion=-1&endVersion=1") },
  { method: "GET", path: metadata("/versions/latest?startVersion=-1") },
  { method: "GET", path: metadata("/versions/minimum") },
  { method: "GET", path: metadata("/layerVersions?version=0") },
  { method: "GET", path: query("/layers/places/partitions?partition=place-0000001") },
  { method: "GET", path: query("/layers/places/changes?partition=place-0000001&startVersion=0") },
  { method: "GET", path: blob("places", handle) },
  { method: "HEAD", path: blob("places", handle) },
  { method: "GET", path: `/blob/v1/catalogs/${DEMO}/layers/places/data/${handle}` },
  { method: "PUT", path: blob("places", "auth-test-handle"), body: "{}", contentType: "application/json" },
  { method: "DELETE", path: blob("traffic", "traffic-1-0") },
  {
    method: "POST",
    path: publish("/publications"),
    body: JSON.stringify({ layerIds: ["places"] }),
    contentType: "application/json"
  },
  { method: "GET", path: publish("/publications/v2-00000000-0000-0000-0000-000000000000") },
  { method: "PUT", path: publish("/publications/v2-00000000-0000-0000-0000-000000000000") },
  { method: "DELETE", path: publish("/publications/v2-00000000-0000-0000-0000-000000000000") },
  {
    method: "POST",
    path: publish("/layers/places/publications/v2-00000000-0000-0000-0000-000000000000/partitions"),
    body: JSON.stringify({ partitions: [] }),
    contentType: "application/json"
  }
]

const call = (svc: TestService, e: Endpoint, authorization: string | undefined) =>
  fetch(`${svc.url}${e.path}`, {
    method: e.method,
    headers: {
      ...(authorization === undefined ? {} : { authorization }),
      ...(e.contentType === undefined ? {} : { "content-type": e.contentType })
    },
    ...(e.body === undefined ? {} : { body: e.body })
  })

describe("bearer authentication and catalog visibility", () => {
  let svc: TestService
  let handle: string
  let latestBefore: number

  beforeAll(async () => {
    svc = await startService()
    const places = await listing(svc, "places", "version=0")
    handle = places.partitions[0]!.dataHandle
    latestBefore =
      (await expectJson<{ version: number }>(await svc.get(metadata("/versions/latest?startVersion=-1")), 200)).version
  })
  afterAll(() => svc?.close())

  it("refuses missing, malformed, unknown and expired bearer tokens with 401 on every endpoint", async () => {
    const expiring = await svc.token("demo-app", 1)
    const issued = Date.now()
    // The short token works before it expires (so the 401 below is about time, not the token).
    expect((await call(svc, { method: "GET", path: "/config/v1/catalogs" }, `Bearer ${expiring}`)).status).toBe(200)
    await sleep(Math.max(0, issued + 1_300 - Date.now()))

    const refusals: ReadonlyArray<readonly [string, string | undefined]> = [
      ["missing", undefined],
      ["not bearer", "Basic ZGVtbzpkZW1v"],
      ["empty bearer", "Bearer"],
      ["two words", "Bearer abc def"],
      ["unknown", "Bearer lcs.this-token-was-never-issued"],
      ["expired", `Bearer ${expiring}`]
    ]
    for (const e of endpoints(handle)) {
      for (const [what, authorization] of refusals) {
        const res = await call(svc, e, authorization)
        const text = await res.text()
        expect(res.status, `${what} token, ${e.method} ${e.path}`).toBe(401)
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/)
        if (e.method !== "HEAD") {
          const body = JSON.parse(text)
          expect(body).toEqual({
            error: "Unauthorized",
            error_description: expect.stringMatching(/^Token Validation Failure/)
          })
        }
      }
    }
    // Nothing was written by the refused requests.
    expect((await svc.get(blob("places", "auth-test-handle"), { method: "HEAD" })).status).toBe(404)
    expect((await svc.get(blob("traffic", "traffic-1-0"), { method: "HEAD" })).status).toBe(200)
    expect(
      (await expectJson<{ version: number }>(await svc.get(metadata("/versions/latest?startVersion=-1")), 200)).version
    ).toBe(latestBefore)
  })

  it("accepts a valid token on the same endpoints (the refusals above are about the token)", async () => {
    const token = await svc.token()
    for (const e of endpoints(handle).filter((e) => e.method === "GET" && !e.path.includes("/publications/"))) {
      const res = await call(svc, e, `bearer  ${token}`)
      await res.arrayBuffer()
      expect(res.status, `${e.method} ${e.path}`).toBe(200)
    }
  })

  it("lists only the catalogs an application may read", async () => {
    const hrns = async (appId: string, params = "") =>
      (await expectJson<{ results: { items: Array<{ hrn: string }> } }>(
        await svc.get(`/config/v1/catalogs${params}`, { appId }),
        200
      )).results.items
        .map((i) => i.hrn)
    expect(await hrns("demo-app")).toEqual([DEMO])
    expect(await hrns("other-app")).toEqual([RESTRICTED])
    expect(await hrns("demo-app", "?verbose=true")).toEqual([DEMO])
    expect(await hrns("other-app", "?verbose=true")).toEqual([RESTRICTED])
  })

  it("answers a catalog of another application with the same 403 plain text as a catalog that does not exist", async () => {
    const missing = await svc.get(`/config/v1/catalogs/${MISSING}`, { appId: "other-app" })
    const missingText = await expectStatus(missing, 403)
    expect(missingText).toBe(
      "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden"
    )
    expect(missing.headers.get("content-type")).toMatch(/^text\/plain/)

    for (const [appId, hrn] of [["other-app", DEMO], ["demo-app", RESTRICTED]] as const) {
      for (
        const path of [
          `/config/v1/catalogs/${hrn}`,
          `/config/v1/catalogs/${encodeURIComponent(hrn)}`,
          `/config/v1/catalogs/${hrn.split(":").pop()}`
        ]
      ) {
        const res = await svc.get(path, { appId })
        expect(await expectStatus(res, 403), `${appId} ${path}`).toBe(missingText)
        expect(res.headers.get("content-type")).toBe(missing.headers.get("content-type"))
      }
    }
    // The owners do see them.
    expect((await expectJson<{ hrn: string }>(await svc.get(`/config/v1/catalogs/${DEMO}`), 200)).hrn).toBe(DEMO)
    expect(
      (await expectJson<{ hrn: string }>(
        await svc.get(`/config/v1/catalogs/${RESTRICTED}`, { appId: "other-app" }),
        200
      )).hrn
    ).toBe(RESTRICTED)
  })

  it("refuses metadata, query, blob, lookup and publish on another application's catalog, exactly as for a missing one", async () => {
    const restricted = await listing(svc, "private", "version=0", { appId: "other-app" }, RESTRICTED)
    expect(restricted.partitions.map((p) => p.partition)).toEqual(["p1"])
    const secretHandle = restricted.partitions[0]!.dataHandle

    const cases = (hrn: string, layer: string, h: string, partition: string): ReadonlyArray<Endpoint> => [
      { method: "GET", path: metadata(`/layers/${layer}/partitions?version=0`, hrn) },
      { method: "GET", path: metadata(`/layers/${layer}/partitions/parts?numRequestedParts=2`, hrn) },
      { method: "GET", path: metadata(`/layers/${layer}/changes?startVersion=-1`, hrn) },
      { method: "GET", path: metadata("/versions/latest?startVersion=-1", hrn) },
      { method: "GET", path: metadata("/versions/minimum", hrn) },
      { method: "GET", path: metadata("/versions", hrn) },
      { method: "GET", path: metadata("/layerVersions?version=0", hrn) },
      { method: "GET", path: query(`/layers/${layer}/partitions?partition=${partition}`, hrn) },
      { method: "GET", path: blob(layer, h, hrn) },
      { method: "HEAD", path: blob(layer, h, hrn) },
      { method: "PUT", path: blob(layer, "intruder-1", hrn), body: "{}", contentType: "application/json" },
      {
        method: "POST",
        path: publish("/publications", hrn),
        body: JSON.stringify({ layerIds: [layer] }),
        contentType: "application/json"
      }
    ]
    const statusAndBody = async (res: Response) => [res.status, await res.text()] as const

    for (
      const [appId, hrn, layer, h, partition] of [
        ["other-app", DEMO, "places", handle, "place-0000000"],
        ["demo-app", RESTRICTED, "private", secretHandle, "p1"]
      ] as const
    ) {
      const token = await svc.token(appId)
      const asMissing = cases(MISSING, layer, h, partition)
      for (const [i, e] of cases(hrn, layer, h, partition).entries()) {
        const [status, body] = await statusAndBody(await call(svc, e, `Bearer ${token}`))
        const [missingStatus, missingBody] = await statusAndBody(await call(svc, asMissing[i]!, `Bearer ${token}`))
        expect(status, `${appId} ${e.method} ${e.path}`).toBe(403)
        expect(missingStatus).toBe(403)
        expect(body).toBe(missingBody)
        if (e.method !== "HEAD") {
          expect(JSON.parse(body)).toEqual({ error: "Forbidden", error_description: expect.any(String) })
        }
      }
      const lookup = await call(svc, { method: "GET", path: `/lookup/v1/resources/${hrn}/apis` }, `Bearer ${token}`)
      const lookupMissing = await call(
        svc,
        { method: "GET", path: `/lookup/v1/resources/${MISSING}/apis` },
        `Bearer ${token}`
      )
      const body = await expectJson<{ title: string; status: number }>(lookup, 404)
      const missingBody = await expectJson<{ title: string; status: number }>(lookupMissing, 404)
      expect(body.title).toBe(missingBody.title)
      expect(body.status).toBe(404)
    }
    // Nothing was written by the refused writes.
    expect((await svc.get(blob("places", "intruder-1"), { method: "HEAD" })).status).toBe(404)
    expect((await svc.get(blob("private", "intruder-1", RESTRICTED), { method: "HEAD", appId: "other-app" })).status)
      .toBe(404)
  })

  it("serves the owner its own data (the refusals are about the caller)", async () => {
    const restricted = await listing(svc, "private", "version=0&additionalFields=checksum,dataSize", {
      appId: "other-app"
    }, RESTRICTED)
    const p1 = restricted.partitions[0]!
    const res = await svc.get(blob("private", p1.dataHandle, RESTRICTED), { appId: "other-app" })
    const bytes = new Uint8Array(await res.arrayBuffer())
    expect(res.status).toBe(200)
    expect(new TextDecoder().decode(bytes)).toBe(`{"secret":true}`)
    expect(sha1(bytes)).toBe(p1.checksum)
    expect(bytes.byteLength).toBe(p1.dataSize)
    const lookup = await expectJson<Array<{ api: string }>>(
      await svc.get(`/lookup/v1/resources/${RESTRICTED}/apis`, { appId: "other-app" }),
      200
    )
    expect(lookup.map((e) => e.api)).toContain("metadata")
  })
})
