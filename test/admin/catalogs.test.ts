/**
 * Catalog administration over HTTP: create (202, status link, pending then 303/201), update, delete;
 * the regional rules; per-region base URLs from lookup; layer deletion with its seven steps; and the
 * 60-second delete/create warning. Plus the client's AdminApi against the same service.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { AdminApi, CatalogExists } from "../../src/client/AdminApi.ts"
import { Lookup } from "../../src/client/Lookup.ts"
import { DEMO, expectDataError, expectJson, expectStatus } from "../server/helpers.ts"
import { provideClient } from "../support/client.ts"
import { startService, type TestService } from "../support/service.ts"
import {
  catalogBody,
  createCatalog,
  del,
  grant,
  hrnOf,
  layer,
  OTHER,
  pollStatus,
  post,
  publishInline,
  put,
  type StatusLinkBody,
  STEPS,
  warningsOf,
  withDb
} from "./helpers.ts"

const FORBIDDEN_TEXT =
  "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden"

let svc: TestService
let dataDir: string

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-admin-"))
  svc = await startService({ seed: { partitions: 20, versions: 2 }, dataDir })
})
afterAll(async () => {
  await svc?.close()
  fs.rmSync(dataDir, { recursive: true, force: true })
})

const getCatalog = (hrn: string, appId?: string) =>
  svc.get(`/config/v1/catalogs/${hrn}`, appId === undefined ? {} : { appId })
const listHrns = async (appId?: string) =>
  (await expectJson<{ results: { items: Array<{ hrn: string }> } }>(
    await svc.get("/config/v1/catalogs", appId === undefined ? {} : { appId }),
    200
  )).results.items.map((i) => i.hrn)

describe("catalog creation", () => {
  it("answers 202 with a status link that is pending, then 303 to the new catalog, which its creator owns and lists", async () => {
    const body = catalogBody("created-one", [layer("places", "versioned"), layer("live", "stream")], { tags: ["t1"] })
    const res = await post(svc, "/config/v1/catalogs", body)
    const link = await expectJson<StatusLinkBody>(res, 202)
    expect(link.title).toBe("Catalog Creation")
    expect(link.type).toBe("urn:olp-types:status")
    expect(link.href).toBe(`${svc.url}/config/v1/status/${link.configToken}`)

    const { pending, final } = await pollStatus(svc, link.href)
    expect(pending.length).toBeGreaterThanOrEqual(1)
    for (const p of pending) expect(p).toEqual({ status: "pending" })
    expect(final.status).toBe(303)
    const location = final.headers.get("location")
    expect(location).toBe(`${svc.url}/config/v1/catalogs/${hrnOf("created-one")}`)
    expect(await final.json()).toMatchObject({ status: "success", item: { hrn: hrnOf("created-one") } })

    const catalog = await expectJson<any>(await svc.get(location!), 200)
    expect(catalog).toMatchObject({
      id: "created-one",
      hrn: hrnOf("created-one"),
      name: "Catalog created-one",
      summary: "Summary of created-one",
      description: "Description of created-one",
      owner: { creator: { id: "demo-app" } },
      tags: ["t1"],
      billingTags: [],
      version: 1,
      notifications: { enabled: false },
      replication: { regions: [{ id: "eu-ireland", role: "primary" }] }
    })
    expect(catalog.created).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(catalog.layers.map((l: any) => [l.id, l.layerType, l.hrn])).toEqual([
      ["places", "versioned", `${hrnOf("created-one")}:places`],
      ["live", "stream", `${hrnOf("created-one")}:live`]
    ])
    expect(await listHrns()).toContain(hrnOf("created-one"))
    // Another application neither lists nor reads it.
    expect(await listHrns(OTHER)).not.toContain(hrnOf("created-one"))
    expect(await expectStatus(await getCatalog(hrnOf("created-one"), OTHER), 403)).toBe(FORBIDDEN_TEXT)
  })

  it("creates a catalog without layers, and answers 201 with the item when polled with flags=noRedirects", async () => {
    const link = await expectJson<StatusLinkBody>(
      await post(svc, "/config/v1/catalogs", catalogBody("created-empty")),
      202
    )
    const { final } = await pollStatus(svc, link.href, { query: "?flags=noRedirects" })
    const done = await expectJson<any>(final, 201)
    expect(done).toMatchObject({
      status: "success",
      item: { hrn: hrnOf("created-empty"), href: `${svc.url}/config/v1/catalogs/${hrnOf("created-empty")}` }
    })
    const catalog = await expectJson<any>(await getCatalog(hrnOf("created-empty")), 200)
    expect(catalog.layers).toEqual([])
    // Layers can be added afterwards with a full update.
    const update = await put(
      svc,
      `/config/v1/catalogs/${hrnOf("created-empty")}`,
      catalogBody("created-empty", [layer("later", "volatile")])
    )
    await pollStatus(svc, (await expectJson<StatusLinkBody>(update, 202)).href)
    expect((await expectJson<any>(await getCatalog(hrnOf("created-empty")), 200)).layers.map((l: any) => l.id)).toEqual(
      ["later"]
    )
  })

  it("refuses an id that is taken with 409, whoever owns the catalog", async () => {
    await expectDataError(await post(svc, "/config/v1/catalogs", catalogBody("demo")), 409, "id")
    await expectDataError(await post(svc, "/config/v1/catalogs", catalogBody("restricted")), 409, "id")
    await createCatalog(svc, catalogBody("taken-by-other"), OTHER)
    await expectDataError(await post(svc, "/config/v1/catalogs", catalogBody("taken-by-other")), 409, "id")
  })

  it("refuses ids that break the rules and bodies without the required fields with 400", async () => {
    for (const id of ["ab", "-abc", "abc-", "Upper-case", "under_score", "a".repeat(64), 42]) {
      await expectDataError(await post(svc, "/config/v1/catalogs", { ...catalogBody("x"), id }), 400, "id")
    }
    for (const field of ["name", "summary", "description"]) {
      const body: Record<string, unknown> = catalogBody("missing-field")
      delete body[field]
      await expectDataError(await post(svc, "/config/v1/catalogs", body), 400, field)
    }
    await expectDataError(
      await post(svc, "/config/v1/catalogs", catalogBody("bad-layer", [layer("x", "nonsense")])),
      400,
      "layers[0].layerType"
    )
    await expectDataError(
      await post(svc, "/config/v1/catalogs", catalogBody("dup-layer", [layer("x", "stream"), layer("x", "volatile")])),
      400,
      "layers"
    )
    await expectDataError(await post(svc, "/config/v1/catalogs", "not an object"), 400)
    // Nothing was created by the refused requests.
    const hrns = await listHrns()
    expect(hrns.filter((h) => /missing-field|bad-layer|dup-layer/.test(h))).toEqual([])
  })
})

describe("catalog deletion", () => {
  it("answers 202, is pending then 200 success, and removes the catalog, its layers and data; the id can be reused", async () => {
    const hrn = await createCatalog(svc, catalogBody("to-delete", [layer("places", "versioned")]))
    await publishInline(svc, hrn, "places", { a: "alpha", b: "beta" })
    const pk = withDb(
      dataDir,
      (db) => db.prepare("SELECT pk FROM layers WHERE catalog_hrn = ? AND id = 'places'").get(hrn).pk
    )
    const res = await del(svc, `/config/v1/catalogs/${hrn}`)
    const link = await expectJson<StatusLinkBody>(res, 202)
    expect(link.title).toBe("Catalog Deletion")
    const { pending, final } = await pollStatus(svc, link.href)
    expect(pending.length).toBeGreaterThanOrEqual(1)
    expect(await expectJson(final, 200)).toEqual({ status: "success" })
    expect(await listHrns()).not.toContain(hrn)
    expect(await expectStatus(await getCatalog(hrn), 403)).toBe(FORBIDDEN_TEXT)
    await expectStatus(await svc.get(`/metadata/v1/catalogs/${hrn}/layers/places/partitions?version=0`), 403)
    const left = withDb(dataDir, (db) => ({
      partitions: db.prepare("SELECT COUNT(*) AS n FROM partitions WHERE layer_pk = ?").get(pk).n,
      blobs: db.prepare("SELECT COUNT(*) AS n FROM blobs WHERE layer_pk = ?").get(pk).n,
      versions: db.prepare("SELECT COUNT(*) AS n FROM versions WHERE catalog_hrn = ?").get(hrn).n
    }))
    expect(left).toEqual({ partitions: 0, blobs: 0, versions: 0 })
    // The id is free again.
    expect(await createCatalog(svc, catalogBody("to-delete"))).toBe(hrn)
    expect((await expectJson<any>(await getCatalog(hrn), 200)).layers).toEqual([])
  })

  it("lets only the creator delete: another application, even with a read/write grant, gets the answer of a missing catalog", async () => {
    const hrn = await createCatalog(svc, catalogBody("keep-me"))
    expect(await expectStatus(await del(svc, `/config/v1/catalogs/${hrn}`, { appId: OTHER }), 403)).toBe(FORBIDDEN_TEXT)
    grant(dataDir, hrn, OTHER, true, true)
    expect(await expectStatus(await del(svc, `/config/v1/catalogs/${hrn}`, { appId: OTHER }), 403)).toBe(FORBIDDEN_TEXT)
    expect(await expectStatus(await del(svc, `/config/v1/catalogs/${hrnOf("no-such-catalog")}`), 403)).toBe(
      FORBIDDEN_TEXT
    )
    await expectStatus(await getCatalog(hrn), 200)
  })
})

describe("regional rules", () => {
  it("takes the region at creation: US West / EU West names or ids, or replication for a multi-region catalog", async () => {
    const us = await createCatalog(svc, catalogBody("in-us-west", [layer("s", "stream")], { region: "US West" }))
    expect((await expectJson<any>(await getCatalog(us), 200)).replication).toEqual({
      regions: [{ id: "us-oregon", role: "primary" }]
    })
    const eu = await createCatalog(svc, catalogBody("in-eu-west", [], { region: "eu-ireland" }))
    expect((await expectJson<any>(await getCatalog(eu), 200)).replication).toEqual({
      regions: [{ id: "eu-ireland", role: "primary" }]
    })
    const multi = await createCatalog(
      svc,
      catalogBody("multi-region", [layer("v", "versioned")], {
        replication: { regions: [{ id: "us-oregon", role: "secondary" }, { id: "eu-ireland", role: "primary" }] }
      })
    )
    expect((await expectJson<any>(await getCatalog(multi), 200)).replication).toEqual({
      regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }]
    })
  })

  it("lets a US West catalog hold only stream, versioned and volatile layers", async () => {
    for (const type of ["index", "objectstore", "interactivemap"]) {
      const body = await expectDataError(
        await post(svc, "/config/v1/catalogs", catalogBody(`us-${type}`, [layer("x", type)], { region: "us-oregon" })),
        400,
        "layers[0].layerType"
      )
      expect(body.detail![0]!.error).toMatch(/US West/)
    }
    await createCatalog(
      svc,
      catalogBody("us-all-three", [layer("a", "stream"), layer("b", "versioned"), layer("c", "volatile")], {
        region: "US West"
      })
    )
    // The same layer types are fine in EU West.
    await createCatalog(
      svc,
      catalogBody("eu-any", [layer("i", "index"), layer("m", "interactivemap"), layer("o", "objectstore")], {
        region: "EU West"
      })
    )
  })

  it("lets a multi-region catalog hold only versioned, volatile and stream layers", async () => {
    const replication = { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }] }
    for (const type of ["index", "objectstore", "interactivemap"]) {
      const body = await expectDataError(
        await post(svc, "/config/v1/catalogs", catalogBody(`mr-${type}`, [layer("x", type)], { replication })),
        400,
        "layers[0].layerType"
      )
      expect(body.detail![0]!.error).toMatch(/multi-region/)
    }
    await createCatalog(
      svc,
      catalogBody("mr-all-three", [layer("a", "stream"), layer("b", "versioned"), layer("c", "volatile")], {
        replication
      })
    )
  })

  it("refuses unknown or unselectable regions and contradictory replication", async () => {
    const refuse = async (id: string, extra: Record<string, unknown>, name: string) =>
      expectDataError(await post(svc, "/config/v1/catalogs", catalogBody(id, [], extra)), 400, name)
    await refuse("r-seoul", { region: "ap-seoul" }, "region")
    await refuse("r-mars", { region: "mars" }, "region")
    await refuse("r-number", { region: 7 }, "region")
    await refuse(
      "r-rep-mars",
      { replication: { regions: [{ id: "mars", role: "primary" }] } },
      "replication.regions[0].id"
    )
    await refuse("r-two-primaries", {
      replication: { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "primary" }] }
    }, "replication.regions")
    await refuse("r-no-primary", {
      replication: { regions: [{ id: "eu-ireland", role: "secondary" }, { id: "us-oregon", role: "secondary" }] }
    }, "replication.regions")
    await refuse("r-same-twice", {
      replication: { regions: [{ id: "eu-ireland", role: "primary" }, { id: "eu-ireland", role: "secondary" }] }
    }, "replication.regions")
    await refuse("r-bad-role", {
      replication: { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "backup" }] }
    }, "replication.regions[1].role")
    await refuse("r-contradiction", {
      region: "us-oregon",
      replication: { regions: [{ id: "eu-ireland", role: "primary" }] }
    }, "region")
    await refuse("r-no-regions", { replication: { regions: "eu-ireland" } }, "replication.regions")
  })

  it("keeps the region for good: an update may not change it, nor make a multi-region catalog single-region", async () => {
    const us = await createCatalog(svc, catalogBody("fixed-region", [layer("s", "stream")], { region: "us-oregon" }))
    await expectDataError(
      await put(
        svc,
        `/config/v1/catalogs/${us}`,
        catalogBody("fixed-region", [layer("s", "stream")], { region: "eu-ireland" })
      ),
      400,
      "region"
    )
    await expectDataError(
      await put(
        svc,
        `/config/v1/catalogs/${us}`,
        catalogBody("fixed-region", [], { replication: { regions: [{ id: "eu-ireland", role: "primary" }] } })
      ),
      400,
      "replication"
    )
    // Naming the same region again is fine.
    await expectStatus(
      await put(
        svc,
        `/config/v1/catalogs/${us}`,
        catalogBody("fixed-region", [layer("s", "stream")], { region: "US West" })
      ),
      202
    )

    const replication = { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }] }
    const multi = await createCatalog(svc, catalogBody("stays-multi", [], { replication }))
    await expectDataError(
      await put(
        svc,
        `/config/v1/catalogs/${multi}`,
        catalogBody("stays-multi", [], { replication: { regions: [{ id: "eu-ireland", role: "primary" }] } })
      ),
      400,
      "replication"
    )
    await expectStatus(
      await put(
        svc,
        `/config/v1/catalogs/${multi}`,
        catalogBody("stays-multi", [], { replication, summary: "changed" })
      ),
      202
    )
    expect((await expectJson<any>(await getCatalog(multi), 200)).replication).toEqual(replication)
  })

  it("refuses an update that adds a layer type the catalog's regions cannot hold", async () => {
    const us = await createCatalog(svc, catalogBody("us-no-index", [layer("s", "stream")], { region: "us-oregon" }))
    await expectDataError(
      await put(
        svc,
        `/config/v1/catalogs/${us}`,
        catalogBody("us-no-index", [layer("s", "stream"), layer("i", "index")])
      ),
      400,
      "layers[1].layerType"
    )
    const multi = await createCatalog(
      svc,
      catalogBody("mr-no-map", [], {
        replication: { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }] }
      })
    )
    await expectDataError(
      await put(svc, `/config/v1/catalogs/${multi}`, catalogBody("mr-no-map", [layer("m", "interactivemap")])),
      400,
      "layers[0].layerType"
    )
    expect((await expectJson<any>(await getCatalog(us), 200)).layers.map((l: any) => l.id)).toEqual(["s"])
    expect((await expectJson<any>(await getCatalog(multi), 200)).layers).toEqual([])
  })

  it("gives per-region base URLs through lookup's region parameter, only for the catalog's regions, and they work", async () => {
    const replication = { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }] }
    const hrn = await createCatalog(svc, catalogBody("regional-urls", [layer("v", "versioned")], { replication }))
    const lookup = async (query: string) =>
      expectJson<Array<{ api: string; version: string; baseURL: string }>>(
        await svc.get(`/lookup/v1/resources/${hrn}/apis${query}`),
        200
      )
    const plain = await lookup("")
    const eu = await lookup("?region=eu-ireland")
    const us = await lookup("?region=us-oregon")
    const baseOf = (entries: typeof plain, api: string) => entries.find((e) => e.api === api)!.baseURL
    expect(baseOf(eu, "metadata")).toBe(`${svc.url}/regions/eu-ireland/metadata/v1/catalogs/${hrn}`)
    expect(baseOf(us, "metadata")).toBe(`${svc.url}/regions/us-oregon/metadata/v1/catalogs/${hrn}`)
    // Without `region`, a multi-region catalog's URLs are its primary region's.
    expect(plain).toEqual(eu)
    expect(baseOf(us, "config")).toBe(`${svc.url}/config/v1`)
    expect(us.map((e) => e.api).sort()).toEqual(plain.map((e) => e.api).sort())
    // Publish through the US West publish API, read through the EU West metadata and the US West blob API.
    const publish = baseOf(us, "publish")
    const init = await expectJson<{ id: string }>(await post(svc, `${publish}/publications`, { layerIds: ["v"] }), 200)
    await expectStatus(
      await post(svc, `${publish}/layers/v/publications/${init.id}/partitions`, {
        partitions: [{ partition: "p", data: Buffer.from("regional").toString("base64") }]
      }),
      204
    )
    await expectStatus(await put(svc, `${publish}/publications/${init.id}`, undefined), 204)
    const listing = await expectJson<{ partitions: Array<{ dataHandle: string }> }>(
      await svc.get(`${baseOf(eu, "metadata")}/layers/v/partitions?version=0`),
      200
    )
    const blob = await svc.get(`${baseOf(us, "blob")}/layers/v/data/${listing.partitions[0]!.dataHandle}`)
    expect(await blob.text()).toBe("regional")

    // A single-region catalog has no US West URLs; unknown regions are refused.
    await expectDataError(await svc.get(`/lookup/v1/resources/${DEMO}/apis?region=us-oregon`), 404, "region")
    expect(baseOf(await expectJson(await svc.get(`/lookup/v1/resources/${DEMO}/apis?region=eu-ireland`), 200), "query"))
      .toBe(
        `${svc.url}/regions/eu-ireland/query/v1/catalogs/${DEMO}`
      )
    await expectDataError(await svc.get(`/lookup/v1/resources/${hrn}/apis?region=ap-seoul`), 400, "region")
  })
})

describe("layer deletion", () => {
  it("answers 202 with a status reference whose status walks the seven steps in order, then 200 success; the layer's data and metadata are gone", async () => {
    const hrn = await createCatalog(
      svc,
      catalogBody("layer-delete", [layer("doomed", "versioned"), layer("kept", "versioned")])
    )
    await publishInline(svc, hrn, "doomed", { a: "only in doomed", b: "shared text" })
    await publishInline(svc, hrn, "kept", { k: "shared text" })
    const before = withDb(dataDir, (db) => {
      const pk = db.prepare("SELECT pk FROM layers WHERE catalog_hrn = ? AND id = 'doomed'").get(hrn).pk
      return {
        pk,
        digests: db.prepare("SELECT sha256 FROM blobs WHERE layer_pk = ? ORDER BY data_handle").all(pk).map((r) =>
          r.sha256 as string
        )
      }
    })
    expect(before.digests).toHaveLength(2)

    const res = await del(svc, `/config/v1/catalogs/${hrn}/layers/doomed`)
    const ref = await expectJson<StatusLinkBody>(res, 202)
    expect(ref.title).toBe("Layer Deletion")
    expect(ref.type).toBe("urn:olp-types:status")
    expect(ref.href).toMatch(new RegExp(`^${svc.url}/config/v1/status/`))

    const { pending, final } = await pollStatus(svc, ref.href, { intervalMs: 15 })
    expect(pending.length).toBeGreaterThanOrEqual(2)
    let last = -1
    const seen = new Set<number>()
    for (const p of pending) {
      expect(p.status).toBe("pending")
      expect(p.steps.map((s: any) => s.name)).toEqual(STEPS)
      const states: Array<string> = p.steps.map((s: any) => s.state)
      const current = states.indexOf("In progress")
      expect(current).toBeGreaterThanOrEqual(0)
      expect(states).toEqual(
        STEPS.map((_, i) => (i < current ? "Completed" : i === current ? "In progress" : "Not started"))
      )
      expect(current).toBeGreaterThanOrEqual(last)
      last = current
      seen.add(current)
    }
    expect(seen.size).toBeGreaterThanOrEqual(2)
    expect(await expectJson(final, 200)).toEqual({ status: "success" })

    const catalog = await expectJson<any>(await getCatalog(hrn), 200)
    expect(catalog.layers.map((l: any) => l.id)).toEqual(["kept"])
    await expectDataError(
      await svc.get(`/metadata/v1/catalogs/${hrn}/layers/doomed/partitions?version=1`),
      400,
      "layer"
    )
    const after = withDb(dataDir, (db) => ({
      partitions: db.prepare("SELECT COUNT(*) AS n FROM partitions WHERE layer_pk = ?").get(before.pk).n,
      blobs: db.prepare("SELECT COUNT(*) AS n FROM blobs WHERE layer_pk = ?").get(before.pk).n,
      layerVersions: db.prepare("SELECT COUNT(*) AS n FROM layer_versions WHERE layer_pk = ?").get(before.pk).n,
      contents: before.digests.map((d) => db.prepare("SELECT COUNT(*) AS n FROM contents WHERE sha256 = ?").get(d).n)
    }))
    // The content only the deleted layer used is gone; the content the kept layer shares stays.
    const shared = withDb(
      dataDir,
      (db) =>
        db.prepare(
          "SELECT sha256 FROM blobs b JOIN layers l ON l.pk = b.layer_pk WHERE l.catalog_hrn = ? AND l.id = 'kept'"
        ).get(hrn).sha256
    )
    expect(after.partitions).toBe(0)
    expect(after.blobs).toBe(0)
    expect(after.layerVersions).toBe(0)
    expect(after.contents).toEqual(before.digests.map((d) => (d === shared ? 1 : 0)))
    const kept = await expectJson<{ partitions: Array<{ partition: string }> }>(
      await svc.get(`/metadata/v1/catalogs/${hrn}/layers/kept/partitions?version=1`),
      200
    )
    expect(kept.partitions.map((p) => p.partition)).toEqual(["k"])

    // Deleting it again: the layer no longer exists.
    await expectDataError(await del(svc, `/config/v1/catalogs/${hrn}/layers/doomed`), 404, "layerId")
  })

  it("warns when a delete and a create of the same layer id follow each other within 60 seconds, and not otherwise", async () => {
    const hrn = await createCatalog(
      svc,
      catalogBody("sixty-seconds", [layer("young", "stream"), layer("old", "stream")])
    )
    withDb(
      dataDir,
      (db) =>
        db.prepare("UPDATE layers SET created = '2020-01-01T00:00:00.000Z' WHERE catalog_hrn = ? AND id = 'old'").run(
          hrn
        )
    )

    const young = await del(svc, `/config/v1/catalogs/${hrn}/layers/young`)
    await expectStatus(young, 202)
    expect(warningsOf(young)).toEqual([expect.stringMatching(/layer 'young' was created \d+ s ago; .*60 seconds/)])
    const old = await del(svc, `/config/v1/catalogs/${hrn}/layers/old`)
    await expectStatus(old, 202)
    expect(old.headers.get("warning")).toBeNull()

    const recreate = await put(
      svc,
      `/config/v1/catalogs/${hrn}`,
      catalogBody("sixty-seconds", [layer("young", "stream")])
    )
    await expectStatus(recreate, 202)
    expect(warningsOf(recreate)).toEqual([expect.stringMatching(/layer 'young' was deleted \d+ s ago; .*60 seconds/)])
    withDb(
      dataDir,
      (db) =>
        db.prepare("UPDATE layer_deletions SET deleted_at = 0 WHERE catalog_hrn = ? AND layer_id = 'old'").run(hrn)
    )
    const later = await put(
      svc,
      `/config/v1/catalogs/${hrn}`,
      catalogBody("sixty-seconds", [layer("young", "stream"), layer("old", "stream")])
    )
    await expectStatus(later, 202)
    expect(later.headers.get("warning")).toBeNull()

    // A new catalog that reuses the id of a catalog deleted moments ago warns about its layers too.
    await pollStatus(svc, (await expectJson<StatusLinkBody>(await del(svc, `/config/v1/catalogs/${hrn}`), 202)).href)
    const again = await post(svc, "/config/v1/catalogs", catalogBody("sixty-seconds", [layer("young", "stream")]))
    await expectStatus(again, 202)
    expect(warningsOf(again)).toEqual([expect.stringMatching(/layer 'young' was deleted/)])
  })

  it("refuses: a missing layer (404), another application's catalog (like a missing one), a read-only grant", async () => {
    const hrn = await createCatalog(svc, catalogBody("layer-guard", [layer("l", "stream")]))
    await expectDataError(await del(svc, `/config/v1/catalogs/${hrn}/layers/nope`), 404, "layerId")
    expect(await expectStatus(await del(svc, `/config/v1/catalogs/${hrn}/layers/l`, { appId: OTHER }), 403)).toBe(
      FORBIDDEN_TEXT
    )
    grant(dataDir, hrn, OTHER, true, false)
    expect(await expectStatus(await del(svc, `/config/v1/catalogs/${hrn}/layers/l`, { appId: OTHER }), 403)).toBe(
      FORBIDDEN_TEXT
    )
    expect((await expectJson<any>(await getCatalog(hrn), 200)).layers.map((l: any) => l.id)).toEqual(["l"])
    // With write permission the other application may delete the layer.
    grant(dataDir, hrn, OTHER, true, true)
    await expectStatus(await del(svc, `/config/v1/catalogs/${hrn}/layers/l`, { appId: OTHER }), 202)
  })
})

describe("client AdminApi", () => {
  it.live("creates and waits without assuming the catalog is there at once, follows layer deletion steps, and names a taken id", () =>
    Effect.gen(function*() {
      const admin = yield* AdminApi
      const accepted = yield* admin.createCatalog(
        catalogBody("via-client", [layer("events", "stream"), layer("gone", "volatile")], { region: "us-oregon" })
      )
      const pendingSeen: Array<string> = []
      const created = yield* admin.awaitOperation(accepted.link!, {
        interval: "20 millis",
        onPending: (s) => Effect.sync(() => void pendingSeen.push(s.status))
      })
      const catalog = yield* admin.awaitCatalog(hrnOf("via-client"), { interval: "20 millis" })
      const deletion = yield* admin.deleteLayer(catalog.hrn, "gone")
      const steps: Array<string> = []
      const deleted = yield* admin.awaitOperation(deletion.link!, {
        interval: "20 millis",
        onPending: (s) => Effect.sync(() => void steps.push(s.steps!.find((x) => x.state === "In progress")!.name))
      })
      const taken = yield* Effect.flip(admin.createCatalog(catalogBody("via-client")))
      const us = yield* (yield* Lookup).baseUrl({ api: "stream", version: "v2", hrn: catalog.hrn, region: "us-oregon" })
      expect(pendingSeen.length).toBeGreaterThanOrEqual(1)
      expect(created.status).toBe("success")
      expect(catalog.layers.map((l) => l.id)).toEqual(["events", "gone"])
      expect(deletion.warnings).toEqual([expect.stringMatching(/60 seconds/)])
      expect(steps.length).toBeGreaterThanOrEqual(1)
      expect(steps.map((s) => STEPS.indexOf(s))).toEqual([...steps.map((s) => STEPS.indexOf(s))].sort((a, b) => a - b))
      expect(deleted).toEqual({ status: "success" })
      expect(taken).toBeInstanceOf(CatalogExists)
      expect(taken.message).toMatch(/'via-client' already exists/)
      expect(us).toBe(`${svc.url}/regions/us-oregon/stream/v2/catalogs/${hrnOf("via-client")}`)
    }).pipe(provideClient(svc)))
})
