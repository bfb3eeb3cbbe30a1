/**
 * Lookup (service discovery) and config (catalog list and catalog objects) over HTTP.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Sqlite from "../../src/server/db/Sqlite.ts"
import { startService, type TestService } from "../support/service.ts"
import { DEMO, expectDataError, expectJson, expectStatus, listing, RESTRICTED } from "./helpers.ts"

interface ApiEntry {
  readonly api: string
  readonly version: string
  readonly baseURL: string
  readonly parameters?: Record<string, string>
}

interface Summary {
  readonly href: string
  readonly hrn: string
  readonly title: string
  readonly type: string
}

interface CatalogList<T> {
  readonly results: { readonly items: ReadonlyArray<T>; readonly next?: string; readonly previous?: string }
}

const maxAge = (res: Response) => Number(/max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1] ?? NaN)

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

describe("lookup API", () => {
  let svc: TestService

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 40, versions: 3 } })
  })
  afterAll(() => svc?.close())

  const apis = async (p: string, appId = "demo-app") => {
    const res = await svc.get(`/lookup/v1${p}`, { appId })
    const body = await expectJson<Array<ApiEntry>>(res, 200)
    expect(maxAge(res)).toBeGreaterThan(0)
    return body
  }

  it("lists the platform APIs as an array of {api, version, baseURL, parameters} with Cache-Control max-age", async () => {
    const platform = await apis("/platform/apis")
    expect(Array.isArray(platform)).toBe(true)
    const config = platform.find((e) => e.api === "config" && e.version === "v1")
    expect(config).toEqual({ api: "config", version: "v1", baseURL: `${svc.url}/config/v1`, parameters: {} })
    for (const e of platform) {
      expect(e.version).toMatch(/^v[0-9]+(\.[0-9]+)?$/)
      expect(e.api).toMatch(/^[a-z0-9\-_]+$/)
    }
    // The base URL works as given.
    const catalogs = await expectJson<CatalogList<Summary>>(await svc.get(`${config!.baseURL}/catalogs`), 200)
    expect(catalogs.results.items.map((i) => i.hrn)).toContain(DEMO)
  })

  it("answers the single-API platform form with an array of one", async () => {
    const one = await apis("/platform/apis/config/v1")
    expect(one).toEqual((await apis("/platform/apis")).filter((e) => e.api === "config" && e.version === "v1"))
    expect(one).toHaveLength(1)
  })

  it("lists the catalog APIs for a raw and a percent-encoded HRN alike, and their base URLs work", async () => {
    const raw = await apis(`/resources/${DEMO}/apis`)
    const encoded = await apis(`/resources/${encodeURIComponent(DEMO)}/apis`)
    expect(encoded).toEqual(raw)
    const find = (api: string, version: string) => {
      const found = raw.filter((e) => e.api === api && e.version === version)
      expect(found, `${api} ${version}`).toHaveLength(1)
      return found[0]!.baseURL
    }
    for (const e of raw) expect(e.baseURL.startsWith(svc.url)).toBe(true)
    expect(find("blob", "v1")).toMatch(/\/blobstore\/v1\/catalogs\//)
    expect(find("publish", "v2")).toMatch(/\/publish\/v2\/catalogs\//)
    find("stream", "v2")
    find("config", "v1")

    const latest = await expectJson<{ version: number }>(
      await svc.get(`${find("metadata", "v1")}/versions/latest?startVersion=-1`),
      200
    )
    expect(latest.version).toBe(2)
    const places = await listing(svc, "places", `version=${latest.version}&additionalFields=checksum`)
    const first = places.partitions[0]!
    const byQuery = await expectJson<{ partitions: Array<{ dataHandle: string }> }>(
      await svc.get(
        `${find("query", "v1")}/layers/places/partitions?partition=${first.partition}&version=${latest.version}`
      ),
      200
    )
    expect(byQuery.partitions.map((p) => p.dataHandle)).toEqual([first.dataHandle])
    const data = await svc.get(`${find("blob", "v1")}/layers/places/data/${first.dataHandle}`)
    expect(data.status).toBe(200)
    await data.arrayBuffer()
    const traffic = await listing(svc, "traffic", "")
    const volatile = await svc.get(
      `${find("volatile-blob", "v1")}/layers/traffic/data/${traffic.partitions[0]!.dataHandle}`
    )
    expect(volatile.status).toBe(200)
    await volatile.arrayBuffer()
    const catalog = await expectJson<{ hrn: string }>(await svc.get(`${find("config", "v1")}/catalogs/${DEMO}`), 200)
    expect(catalog.hrn).toBe(DEMO)
  })

  it("answers a layer HRN with its catalog's APIs", async () => {
    expect(await apis(`/resources/${DEMO}:places/apis`)).toEqual(await apis(`/resources/${DEMO}/apis`))
  })

  it("answers the single-API resource forms with an array of one, raw or percent-encoded", async () => {
    const all = await apis(`/resources/${DEMO}/apis`)
    for (
      const [api, version] of [["metadata", "v1"], ["query", "v1"], ["blob", "v1"], ["volatile-blob", "v1"], [
        "publish",
        "v2"
      ]] as const
    ) {
      const expected = all.filter((e) => e.api === api && e.version === version)
      expect(await apis(`/resources/${DEMO}/apis/${api}/${version}`)).toEqual(expected)
      expect(await apis(`/resources/${encodeURIComponent(DEMO)}/apis/${api}/${version}`)).toEqual(expected)
    }
  })

  it("answers an unknown API or version with 404 and the {title, status, detail} body", async () => {
    for (
      const p of [
        `/resources/${DEMO}/apis/nope/v1`,
        `/resources/${DEMO}/apis/blob/v10`,
        "/platform/apis/metadata/v1",
        "/platform/apis/config/v2"
      ]
    ) {
      const body = await expectDataError(await svc.get(`/lookup/v1${p}`), 404)
      expect(body.title).toBe("Not Found")
      expect(body.detail?.[0]?.error).toMatch(/not found/i)
    }
  })

  it("answers an unknown but well-formed catalog HRN with 404", async () => {
    await expectDataError(await svc.get(`/lookup/v1/resources/hrn:local:data:::no-such-catalog/apis`), 404)
  })

  it("answers a malformed HRN with 400", async () => {
    for (
      const hrn of [
        "not-an-hrn",
        "hrn:local:data",
        "hrn:local:schema:::demo",
        "hrn:nowhere:data:::demo",
        "hrn:local:data:::UPPER_case",
        encodeURIComponent("hrn::data:::demo")
      ]
    ) {
      await expectDataError(await svc.get(`/lookup/v1/resources/${hrn}/apis`), 400, "hrn")
    }
  })

  it("gives every catalog its own base URL for each catalog-bound API", async () => {
    const demo = await apis(`/resources/${DEMO}/apis`)
    const restricted = await apis(`/resources/${RESTRICTED}/apis`, "other-app")
    const platformUrls = new Set((await apis("/platform/apis")).map((e) => e.baseURL))
    const bound = demo.filter((e) => !platformUrls.has(e.baseURL))
    expect(bound.map((e) => e.api).sort()).toEqual([
      "blob",
      "ingest",
      "metadata",
      "publish",
      "query",
      "stream",
      "volatile-blob"
    ])
    for (const e of bound) {
      const other = restricted.find((r) => r.api === e.api && r.version === e.version)
      expect(other, e.api).toBeDefined()
      expect(other!.baseURL).not.toBe(e.baseURL)
    }
    const demoUrls = new Set(bound.map((e) => e.baseURL))
    expect(restricted.filter((e) => demoUrls.has(e.baseURL))).toEqual([])
    // And the other catalog's base URL really serves the other catalog.
    const metadataUrl = restricted.find((e) => e.api === "metadata")!.baseURL
    const layers = await expectJson<{ layerVersions: Array<{ layer: string }> }>(
      await svc.get(`${metadataUrl}/layerVersions?version=0`, { appId: "other-app" }),
      200
    )
    expect(layers.layerVersions.map((l) => l.layer)).toEqual(["private"])
  })
})

describe("config API", () => {
  let svc: TestService
  let dataDir: string

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-config-test-"))
    svc = await startService({ seed: { partitions: 40, versions: 3 }, dataDir })
    // The service has no API for grants (catalogs are created by their owner); give demo-app read on
    // the restricted catalog directly in the store so that it sees two catalogs and paging has pages.
    const db = Sqlite.open(path.join(dataDir, "catalog.db"))
    try {
      db.prepare("INSERT INTO grants (catalog_hrn, app_id, can_read, can_write) VALUES (?, ?, 1, 0)").run(
        RESTRICTED,
        "demo-app"
      )
    } finally {
      db.close()
    }
  })
  afterAll(async () => {
    await svc?.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  const list = async <T>(params = "") =>
    expectJson<CatalogList<T> & { verbose?: boolean }>(await svc.get(`/config/v1/catalogs${params}`), 200)

  it("lists catalog summaries {href, hrn, title, type} whose href serves the catalog", async () => {
    const body = await list<Summary>()
    expect(Object.keys(body)).toEqual(["results"])
    expect(body.results.next).toBeUndefined()
    expect(body.results.items.map((i) => i.hrn)).toEqual([DEMO, RESTRICTED])
    for (const item of body.results.items) {
      expect(Object.keys(item).sort()).toEqual(["href", "hrn", "title", "type"])
      expect(item.type).toBe("urn:olp-types:catalog")
      expect(item.href).toBe(`${svc.url}/config/v1/catalogs/${item.hrn}`)
      const catalog = await expectJson<{ hrn: string; name: string }>(await svc.get(item.href), 200)
      expect(catalog.hrn).toBe(item.hrn)
      expect(item.title).toBe(catalog.name)
    }
    expect(body.results.items[0]!.title).toBe("Demo catalog")
  })

  it("lists full catalog objects with verbose=true, equal to GET of each catalog", async () => {
    const body = await list<Record<string, unknown>>("?verbose=true")
    expect(body.results.items).toHaveLength(2)
    for (const item of body.results.items) {
      const single = await expectJson<Record<string, unknown>>(
        await svc.get(`/config/v1/catalogs/${item.hrn as string}`),
        200
      )
      expect(item).toEqual(single)
      expect(Array.isArray(item.layers)).toBe(true)
    }
  })

  for (const verbose of [false, true]) {
    it(`pages with limit=1 through next links that can be followed (verbose=${verbose})`, async () => {
      const all = (await list<{ hrn: string }>(verbose ? "?verbose=true" : "")).results.items
      const seen: Array<{ hrn: string }> = []
      let page = await list<{ hrn: string }>(`?limit=1${verbose ? "&verbose=true" : ""}`)
      let pages = 1
      expect(page.results.previous).toBeUndefined()
      seen.push(...page.results.items)
      while (page.results.next !== undefined) {
        expect(page.results.items).toHaveLength(1)
        expect(page.results.next).toMatch(
          new RegExp(`^${svc.url.replace(/[.]/g, "\\.")}/config/v1/catalogs/context/[^/?]+$`)
        )
        page = await expectJson(await svc.get(page.results.next), 200)
        pages++
        expect(page.results.previous).toBeDefined()
        seen.push(...page.results.items)
        expect(pages).toBeLessThan(10)
      }
      expect(pages).toBe(2)
      expect(seen).toEqual(all)
      // previous leads back to the first page.
      const back = await expectJson<CatalogList<{ hrn: string }>>(await svc.get(page.results.previous!), 200)
      expect(back.results.items).toEqual(all.slice(0, 1))
    })
  }

  it("refuses limit=0 and a made-up page context with 400", async () => {
    await expectDataError(await svc.get("/config/v1/catalogs?limit=0"), 400, "limit")
    await expectDataError(await svc.get("/config/v1/catalogs/context/not-a-context"), 400)
  })

  it("returns the catalog with its layers: heretile partitioning, tile levels and gzip on tiles", async () => {
    const catalog = await expectJson<Record<string, any>>(await svc.get(`/config/v1/catalogs/${DEMO}`), 200)
    expect(catalog).toMatchObject({ id: "demo", hrn: DEMO, name: "Demo catalog", notifications: { enabled: false } })
    for (const key of ["summary", "description"]) expect(typeof catalog[key]).toBe("string")
    expect(catalog.created).toMatch(ISO_MS)
    expect(Array.isArray(catalog.tags)).toBe(true)
    expect(catalog.billingTags).toEqual([])
    expect(Number.isInteger(catalog.version)).toBe(true)
    expect(catalog.owner.creator.id).toBe("demo-app")

    const layers = catalog.layers as Array<Record<string, any>>
    expect(layers.map((l) => l.id)).toEqual(["tiles", "roads", "places", "traffic", "events"])
    const layer = (id: string) => layers.find((l) => l.id === id)!
    for (const l of layers) {
      expect(l.hrn).toBe(`${DEMO}:${l.id}`)
      expect(l.created).toMatch(ISO_MS)
      expect(typeof l.name).toBe("string")
      expect(Array.isArray(l.tags)).toBe(true)
      expect(Array.isArray(l.billingTags)).toBe(true)
      expect(l.partitioningScheme).toBe(l.partitioning.scheme)
    }
    expect(layer("tiles")).toMatchObject({
      layerType: "versioned",
      contentType: "application/geo+json",
      contentEncoding: "gzip",
      partitioning: { scheme: "heretile", tileLevels: [12] },
      partitioningScheme: "heretile"
    })
    expect(layer("roads")).toMatchObject({
      layerType: "versioned",
      contentType: "application/x-protobuf",
      schema: { hrn: "hrn:local:schema:::com.here.catalogexport.demo:road-tile_v1:1.0.0" },
      partitioning: { scheme: "heretile", tileLevels: [12] }
    })
    expect(layer("places")).toMatchObject({
      layerType: "versioned",
      contentType: "application/json",
      partitioning: { scheme: "generic" }
    })
    expect(layer("places").contentEncoding).toBeUndefined()
    expect(layer("traffic")).toMatchObject({ layerType: "volatile", partitioning: { scheme: "generic" } })
    expect(layer("events")).toMatchObject({ layerType: "stream" })

    // Every tile partition id is a level-12 HERE tile id, as tileLevels says.
    const tiles = await listing(svc, "tiles", "version=0")
    expect(tiles.partitions.length).toBeGreaterThan(0)
    for (const p of tiles.partitions) {
      const id = Number(p.partition)
      expect(String(id)).toBe(p.partition)
      expect(id.toString(2).length).toBe(2 * 12 + 1)
      expect(id).toBeLessThan(1.5 * 4 ** 12)
    }
  })

  it("serves the same catalog for a percent-encoded HRN and for a bare catalog id", async () => {
    const raw = await expectJson(await svc.get(`/config/v1/catalogs/${DEMO}`), 200)
    expect(await expectJson(await svc.get(`/config/v1/catalogs/${encodeURIComponent(DEMO)}`), 200)).toEqual(raw)
    expect(await expectJson(await svc.get("/config/v1/catalogs/demo"), 200)).toEqual(raw)
  })

  it("lets a read grant read but not write", async () => {
    const catalog = await expectJson<{ hrn: string }>(await svc.get(`/config/v1/catalogs/${RESTRICTED}`), 200)
    expect(catalog.hrn).toBe(RESTRICTED)
    const p1 = await listing(svc, "private", "version=0", {}, RESTRICTED)
    expect(p1.partitions.map((p) => p.partition)).toEqual(["p1"])
    const init = await svc.get(`/publish/v2/catalogs/${RESTRICTED}/publications`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ layerIds: ["private"] })
    })
    await expectStatus(init, 403)
  })
})
