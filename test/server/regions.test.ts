/**
 * Multi-region catalogs in the local service (regional storage rules 5 and 8-11): each region is a
 * replica behind its own base URLs; a region taken down answers 503; versioned layers replicate
 * synchronously (no new data while either region is down, earlier data stays readable), volatile
 * layers asynchronously (a write not yet copied when its region fails is lost in the backup, a write
 * made during a failover is not copied back), stream layers asynchronously (messages not yet copied
 * at the failure are delivered after the recovery; new messages go to the backup). All over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { catalogBody, createCatalog, layer, post, put } from "../admin/helpers.ts"
import { startService, type TestService } from "../support/service.ts"
import { bearer, DEMO, expectDataError, expectJson, expectStatus, rawRequest, sleep } from "./helpers.ts"

const EU = "eu-ireland"
const US = "us-oregon"
/** Long enough that a test acts on a write before its copy is made, even on a busy machine. */
const DELAY_MS = 1500

let svc: TestService
let hrn: string

const replication = { regions: [{ id: EU, role: "primary" }, { id: US, role: "secondary" }] }

const at = (region: string, path: string) => `/regions/${region}${path}`
const metadataIn = (region: string, path: string) => at(region, `/metadata/v1/catalogs/${hrn}${path}`)

const setRegion = async (region: string, state: "up" | "down") =>
  expectJson<{ regions: Array<{ id: string; state: string }>; pendingCopies: number }>(
    await put(svc, `/local/v1/regions/${region}`, { state }),
    200
  )

const status = async () =>
  expectJson<{ regions: Array<{ id: string; state: string }>; pendingCopies: number }>(
    await svc.get("/local/v1/regions"),
    200
  )

/** Waits until every copy between the replicas was made or dropped. */
const settled = async () => {
  for (let i = 0; i < 200; i++) {
    if ((await status()).pendingCopies === 0) return
    await sleep(50)
  }
  expect.fail("copies between the replicas stayed pending")
}

const until = async <A>(what: string, probe: () => Promise<A | undefined>) => {
  for (let i = 0; i < 200; i++) {
    const value = await probe()
    if (value !== undefined) return value
    await sleep(50)
  }
  return expect.fail(`timed out waiting for ${what}`)
}

/** One publication through a region's publish API; the status of the first request that is not accepted, else 204. */
const publishIn = async (region: string, layerId: string, partitions: Record<string, string>) => {
  const base = at(region, `/publish/v2/catalogs/${hrn}`)
  const init = await post(svc, `${base}/publications`, { layerIds: [layerId] })
  if (init.status !== 200) return init
  const { id } = (await init.json()) as { id: string }
  const upload = await post(svc, `${base}/layers/${layerId}/publications/${id}/partitions`, {
    partitions: Object.entries(partitions).map(([partition, text]) => ({
      partition,
      data: Buffer.from(text).toString("base64")
    }))
  })
  if (upload.status !== 204) return upload
  return put(svc, `${base}/publications/${id}`, undefined)
}

/** The partitions of a layer as a region lists them, with their content: `{partition: text}`. */
const contentIn = async (region: string, layerId: string, version?: number) => {
  const query = version === undefined ? "" : `?version=${version}`
  const listing = await expectJson<{ partitions: Array<{ partition: string; dataHandle: string }> }>(
    await svc.get(metadataIn(region, `/layers/${layerId}/partitions${query}`)),
    200
  )
  const out: Record<string, string> = {}
  for (const p of listing.partitions) {
    const blob = await svc.get(at(region, `/blobstore/v1/catalogs/${hrn}/layers/${layerId}/data/${p.dataHandle}`))
    out[p.partition] = await expectStatus(blob, 200)
  }
  return out
}

const latestIn = async (region: string) =>
  (await expectJson<{ version: number }>(await svc.get(metadataIn(region, "/versions/latest")), 200)).version

const ingest = async (region: string, text: string) =>
  svc.get(at(region, `/ingest/v1/catalogs/${hrn}/layers/s`), {
    method: "POST",
    headers: { "content-type": "text/plain", "x-here-message-key": "k" },
    body: text
  })

/** Every message of the stream layer as a region holds it, in offset order (a new consumer group reads from the start). */
const messagesIn = async (region: string) => {
  const sub = await expectJson<{ nodeBaseURL: string; subscriptionId: string }>(
    await post(svc, at(region, `/stream/v2/catalogs/${hrn}/layers/s/subscribe?mode=serial`), {
      kafkaConsumerProperties: { "group.id": crypto.randomUUID() }
    }),
    201
  )
  const page = await expectJson<{ messages: Array<{ metaData: { data: string } }> }>(
    await svc.get(`${sub.nodeBaseURL}/layers/s/partitions?subscriptionId=${sub.subscriptionId}&mode=serial`),
    200
  )
  return page.messages.map((m) => Buffer.from(m.metaData.data, "base64").toString("utf8"))
}

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 20, versions: 2 }, replicationDelayMs: DELAY_MS })
  hrn = await createCatalog(
    svc,
    catalogBody("two-regions", [layer("v", "versioned"), layer("vol", "volatile"), layer("s", "stream")], {
      replication
    })
  )
})
afterAll(() => svc?.close())

describe("regions of the local service", () => {
  it("hands out a multi-region catalog's URLs per region (its primary's without `region`), and one that is down answers 503 to every catalog-bound request", async () => {
    const lookup = async (query: string) =>
      expectJson<Array<{ api: string; baseURL: string }>>(
        await svc.get(`/lookup/v1/resources/${hrn}/apis${query}`),
        200
      )
    const baseOf = (entries: Array<{ api: string; baseURL: string }>, api: string) =>
      entries.find((e) => e.api === api)!.baseURL
    expect(baseOf(await lookup(""), "metadata")).toBe(`${svc.url}/regions/${EU}/metadata/v1/catalogs/${hrn}`)
    expect(baseOf(await lookup(`?region=${US}`), "ingest")).toBe(`${svc.url}/regions/${US}/ingest/v1/catalogs/${hrn}`)
    expect(baseOf(await lookup(""), "config")).toBe(`${svc.url}/config/v1`)

    expect((await setRegion(US, "down")).regions).toEqual([{ id: EU, state: "up" }, { id: US, state: "down" }])
    try {
      const auth = bearer(await svc.token())
      // The lean path (plain URL) and the router (percent-encoded catalog) answer alike, before any other check.
      for (
        const url of [
          at(US, `/metadata/v1/catalogs/${hrn}/layers/v/partitions?version=0`),
          at(US, `/metadata/v1/catalogs/${encodeURIComponent(hrn)}/layers/v/partitions?version=0`),
          at(US, `/blobstore/v1/catalogs/${hrn}/layers/v/data/anything`),
          at(US, `/blobstore/v1/catalogs/${encodeURIComponent(hrn)}/layers/v/data/anything`),
          at(US, `/metadata/v1/catalogs/${DEMO}/versions/latest`)
        ]
      ) {
        const res = await rawRequest(`${svc.url}${url}`, auth)
        expect(res.status, url).toBe(503)
        expect(JSON.parse(res.body.toString())).toEqual({
          title: "Service Unavailable",
          status: 503,
          detail: [{ name: "region", error: `region ${US} is unavailable` }]
        })
        expect((await rawRequest(`${svc.url}${url}`, {})).status, `${url} without a token`).toBe(503)
      }
      // The config API and lookup are platform-wide; the other region serves as before.
      await expectStatus(await svc.get(`/config/v1/catalogs/${hrn}`), 200)
      expect(baseOf(await lookup(`?region=${US}`), "metadata")).toBe(
        `${svc.url}/regions/${US}/metadata/v1/catalogs/${hrn}`
      )
      await expectStatus(await svc.get(metadataIn(EU, "/layers/v/partitions/parts?numRequestedParts=2")), 200)
    } finally {
      await setRegion(US, "up")
    }
    // A catalog is served only by its own regions: elsewhere it answers like a missing catalog.
    await expectStatus(await svc.get(at(US, `/metadata/v1/catalogs/${DEMO}/versions/latest`)), 403)
    await expectStatus(await svc.get(at(EU, `/metadata/v1/catalogs/${DEMO}/versions/latest`)), 200)
    // The demo catalog lives in eu-ireland alone: that region down, its unprefixed URLs answer 503 too.
    await setRegion(EU, "down")
    try {
      await expectDataError(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest`), 503, "region")
      const res = await rawRequest(
        `${svc.url}/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=0`,
        bearer(await svc.token())
      )
      expect(res.status).toBe(503)
    } finally {
      await setRegion(EU, "up")
    }
  })

  it("refuses unknown regions and states at its admin endpoint", async () => {
    await expectDataError(await put(svc, "/local/v1/regions/ap-seoul", { state: "down" }), 404, "region")
    await expectDataError(await put(svc, `/local/v1/regions/${EU}`, { state: "sideways" }), 400, "state")
    await expectStatus(await svc.get("/local/v1/regions", { headers: { authorization: "Bearer nope" } }), 401)
    expect((await status()).regions.every((r) => r.state === "up")).toBe(true)
  })
})

describe("versioned layers replicate synchronously", () => {
  it("acknowledge a publication once both regions have it, take no new data while either region is down, and keep earlier data readable in the healthy one", async () => {
    await expectStatus(await publishIn(US, "v", { a: "first a", b: "first b" }), 204)
    const first = await latestIn(EU)
    // Read-after-write in either region, whichever region took the write.
    expect(await latestIn(US)).toBe(first)
    expect(await contentIn(EU, "v", first)).toEqual({ a: "first a", b: "first b" })
    expect(await contentIn(US, "v", first)).toEqual({ a: "first a", b: "first b" })

    for (const [down, healthy] of [[US, EU], [EU, US]] as const) {
      await setRegion(down, "down")
      try {
        // Refused in the healthy region, at every step of a publication, and for blob uploads and version deletion.
        const refused = await expectDataError(await publishIn(healthy, "v", { a: "lost" }), 503, "region")
        expect(refused.detail![0]!.error).toMatch(
          new RegExp(`region ${down} .*multi-region.*versioned layers take no new data`)
        )
        const blobPut = await svc.get(at(healthy, `/blobstore/v1/catalogs/${hrn}/layers/v/data/new-handle`), {
          method: "PUT",
          headers: { "content-type": "application/json" },
          body: "{}"
        })
        await expectDataError(blobPut, 503, "region")
        await expectDataError(
          await post(svc, metadataIn(healthy, "/versions/minimum"), { version: first }),
          503,
          "region"
        )
        // What was published before stays readable there.
        expect(await latestIn(healthy)).toBe(first)
        expect(await contentIn(healthy, "v", first)).toEqual({ a: "first a", b: "first b" })
      } finally {
        await setRegion(down, "up")
      }
    }
    // Both up again: new data is taken.
    await expectStatus(await publishIn(EU, "v", { a: "second a" }), 204)
    expect(await latestIn(US)).toBe(first + 1)
    expect(await contentIn(US, "v", first + 1)).toEqual({ a: "second a", b: "first b" })
  })

  it("refuse a publication started before the outage at its submission", async () => {
    const base = at(EU, `/publish/v2/catalogs/${hrn}`)
    const { id } = await expectJson<{ id: string }>(await post(svc, `${base}/publications`, { layerIds: ["v"] }), 200)
    await expectStatus(
      await post(svc, `${base}/layers/v/publications/${id}/partitions`, {
        partitions: [{ partition: "c", data: Buffer.from("c").toString("base64") }]
      }),
      204
    )
    const before = await latestIn(EU)
    await setRegion(US, "down")
    try {
      await expectDataError(await put(svc, `${base}/publications/${id}`, undefined), 503, "region")
    } finally {
      await setRegion(US, "up")
    }
    expect(await latestIn(EU)).toBe(before)
    await expectStatus(await put(svc, `${base}/publications/${id}`, undefined), 204)
    expect((await contentIn(US, "v", before + 1)).c).toBe("c")
  })
})

describe("volatile layers replicate asynchronously", () => {
  it("acknowledge a write in the selected region, copy it to the backup later, lose it there when the selected region fails first, and never copy a write made during the failover back", async () => {
    const started = Date.now()
    await expectStatus(await publishIn(EU, "vol", { x: "x1", y: "y1" }), 204)
    expect(await contentIn(EU, "vol")).toEqual({ x: "x1", y: "y1" })
    // Eventually consistent: the backup has it once the copy is made, not at once.
    const early = await contentIn(US, "vol")
    if (Date.now() - started < DELAY_MS) expect(early).toEqual({})
    await until("the copy in us-oregon", async () => ((await contentIn(US, "vol")).x === "x1" ? true : undefined))
    expect(await contentIn(US, "vol")).toEqual({ x: "x1", y: "y1" })

    // Written in eu-ireland, which fails before the copy is made: lost in the backup.
    await expectStatus(await publishIn(EU, "vol", { x: "x2" }), 204)
    await setRegion(EU, "down")
    try {
      await settled()
      expect(await contentIn(US, "vol")).toEqual({ x: "x1", y: "y1" })
      // During the failover, writes go to the backup.
      await expectStatus(await publishIn(US, "vol", { y: "y3", z: "z3" }), 204)
      const blob = await svc.get(at(US, `/blobstore/v1/catalogs/${hrn}/layers/vol/data/during-failover`), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: "written during the failover"
      })
      await expectStatus(blob, 200)
    } finally {
      await setRegion(EU, "up")
    }
    await sleep(DELAY_MS)
    await settled()
    // Not copied back: eu-ireland keeps what it had, its own lost write included.
    expect(await contentIn(EU, "vol")).toEqual({ x: "x2", y: "y1" })
    await expectStatus(await svc.get(at(EU, `/blobstore/v1/catalogs/${hrn}/layers/vol/data/during-failover`)), 404)
    expect(await contentIn(US, "vol")).toEqual({ x: "x1", y: "y3", z: "z3" })

    // Both up: writes replicate again, in either direction.
    await expectStatus(await publishIn(US, "vol", { z: "z4" }), 204)
    await until("the copy in eu-ireland", async () => ((await contentIn(EU, "vol")).z === "z4" ? true : undefined))
    expect(await contentIn(EU, "vol")).toEqual({ x: "x2", y: "y1", z: "z4" })
  })
})

describe("stream layers replicate asynchronously", () => {
  it("deliver messages acknowledged but not copied at the failure after the recovery, and take new messages in the backup meanwhile", async () => {
    for (const m of ["m1", "m2"]) expect(await expectJson(await ingest(EU, m), 200)).toHaveProperty("TraceID")
    expect(await messagesIn(EU)).toEqual(["m1", "m2"])
    await until("m1 and m2 in us-oregon", async () => ((await messagesIn(US)).length === 2 ? true : undefined))
    expect(await messagesIn(US)).toEqual(["m1", "m2"])

    // Acknowledged in eu-ireland, which fails before the copy: not in the backup yet.
    await expectStatus(await ingest(EU, "m3"), 200)
    await setRegion(EU, "down")
    try {
      await sleep(DELAY_MS + 300)
      expect(await messagesIn(US)).toEqual(["m1", "m2"])
      expect((await status()).pendingCopies).toBe(1)
      // New messages go to the backup region.
      await expectStatus(await ingest(US, "m4"), 200)
      await expectDataError(await ingest(EU, "m5"), 503, "region")
      expect(await messagesIn(US)).toEqual(["m1", "m2", "m4"])
    } finally {
      await setRegion(EU, "up")
    }
    // After the recovery: m3 is delivered in the backup (after what it took meanwhile), and m4 reaches eu-ireland.
    await until("m3 in us-oregon", async () => ((await messagesIn(US)).includes("m3") ? true : undefined))
    expect(await messagesIn(US)).toEqual(["m1", "m2", "m4", "m3"])
    await until("m4 in eu-ireland", async () => ((await messagesIn(EU)).includes("m4") ? true : undefined))
    expect(await messagesIn(EU)).toEqual(["m1", "m2", "m3", "m4"])
    await settled()
  })
})
