import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sha1 } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import {
  blobStatus,
  eventually,
  latestVersion,
  type ListedPartition,
  listing,
  minimumVersion,
  publish,
  setMinimum
} from "./support.ts"

/**
 * The local service's catalog-version rules (data-catalog-interface.md "Catalog versions"), over
 * HTTP only: what a client of the real service would observe. Tests run in order on one service.
 */

let svc: TestService
const VERSIONED = ["places", "tiles"] as const

const belowMinimum = (minimum: number, name = "version") => ({
  title: "Bad Request",
  status: 400,
  detail: [{ name, error: `Invalid version: minimum version for this catalog is ${minimum}` }]
})

const body = async (res: Response) => ({ status: res.status, body: await res.json() })

/** sha1 of what the blob API serves for a handle (decoded when gzip), or its status when it is not 200. */
const blobDigest = async (layer: string, handle: string) => {
  const res = await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/${layer}/data/${handle}`)
  if (res.status !== 200) return res.status
  let bytes = new Uint8Array(await res.arrayBuffer())
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = new Uint8Array(gunzipSync(bytes))
  return sha1(bytes)
}

/** The volatile layer as a reader sees it: listing and every blob. */
const trafficState = async () => {
  const partitions = await listing(svc, "traffic")
  const blobs = await Promise.all(
    partitions.map(async (p) => [p.partition, await blobDigest("traffic", p.dataHandle)] as const)
  )
  return { partitions, blobs }
}

const catalogConfig = async () => (await (await svc.get(`/config/v1/catalogs/${DEMO}`)).json()) as Record<string, any>

const putCatalog = (config: unknown) =>
  svc.get(`/config/v1/catalogs/${DEMO}`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(config)
  })

const readableVersions = async () => {
  const latest = await latestVersion(svc)
  const res = await svc.get(`/metadata/v1/catalogs/${DEMO}/versions?startVersion=-1&endVersion=${latest}`)
  return ((await res.json()) as { versions: Array<{ version: number }> }).versions.map((v) => v.version)
}

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 40, versions: 6 } })
})
afterAll(() => svc.close())

describe("the minimum version", () => {
  it("makes versions below it unreadable at once, with the real service's 400, and collects what no surviving version uses", async () => {
    expect(await latestVersion(svc)).toBe(5)
    expect(await minimumVersion(svc)).toBe(0)
    // Before: every version of every versioned layer, and where each data handle is visible.
    const before = new Map<string, Array<Array<ListedPartition>>>()
    const visibleAt = new Map<string, Map<string, Set<number>>>()
    for (const layer of VERSIONED) {
      const versions: Array<Array<ListedPartition>> = []
      const handles = new Map<string, Set<number>>()
      for (let v = 0; v <= 5; v++) {
        const partitions = await listing(svc, layer, v)
        versions.push(partitions)
        for (const p of partitions) handles.set(p.dataHandle, (handles.get(p.dataHandle) ?? new Set()).add(v))
      }
      before.set(layer, versions)
      visibleAt.set(layer, handles)
    }
    const traffic = await trafficState()

    const res = await setMinimum(svc, 2)
    expect(res.status).toBe(204)
    expect(await res.text()).toBe("")

    // Unreadable at once, exactly as the real service answers.
    expect(await minimumVersion(svc)).toBe(2)
    for (const layer of VERSIONED) {
      for (const v of [0, 1]) {
        expect(await body(await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?version=${v}`)))
          .toEqual({ status: 400, body: belowMinimum(2) })
      }
    }
    expect(
      await body(await svc.get(`/query/v1/catalogs/${DEMO}/layers/places/partitions?version=1&partition=place-0000001`))
    ).toEqual({ status: 400, body: belowMinimum(2) })
    expect(await body(await svc.get(`/metadata/v1/catalogs/${DEMO}/layerVersions?version=1`))).toEqual({
      status: 400,
      body: belowMinimum(2)
    })
    expect(await body(await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/places/changes?startVersion=0&endVersion=3`)))
      .toEqual({
        status: 400,
        body: belowMinimum(2, "startVersion")
      })
    // Changes from just below the minimum are still complete, so they are served.
    expect((await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/places/changes?startVersion=1&endVersion=3`)).status)
      .toBe(200)
    expect(await readableVersions()).toEqual([2, 3, 4, 5])

    // Versions at or above the minimum are untouched.
    for (const layer of VERSIONED) {
      for (let v = 2; v <= 5; v++) expect(await listing(svc, layer, v)).toEqual(before.get(layer)![v])
    }

    // Collected afterwards: blobs visible only below the minimum end up 404; all others stay readable.
    for (const layer of VERSIONED) {
      const handles = [...visibleAt.get(layer)!]
      const gone = handles.filter(([, versions]) => [...versions].every((v) => v < 2)).map(([h]) => h)
      const kept = handles.filter(([, versions]) => [...versions].some((v) => v >= 2)).map(([h]) => h)
      expect(gone.length).toBeGreaterThan(0)
      expect(kept.length).toBeGreaterThan(0)
      await eventually(
        async () => (await Promise.all(gone.map((h) => blobStatus(svc, layer, h)))).every((s) => s === 404),
        `the ${layer} blobs of versions 0..1 are collected`
      )
      const checksums = new Map(before.get(layer)!.flat().map((p) => [p.dataHandle, p.checksum]))
      for (const handle of kept) expect(await blobDigest(layer, handle)).toBe(checksums.get(handle))
    }
    // The volatile layer is not affected.
    expect(await trafficState()).toEqual(traffic)
  })

  it("never moves down, never past the latest version, and needs an integer", async () => {
    const refuse = async (version: unknown) => {
      const res = await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/minimum`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ version })
      })
      expect(res.status).toBe(400)
      return ((await res.json()) as { detail: Array<{ name: string; error: string }> }).detail[0]!
    }
    expect((await refuse(1)).error).toMatch(/minimum version is 2 and cannot be lowered/)
    const past = await refuse(6)
    expect(past.name).toBe("version")
    expect(past.error).toMatch(/latest known version is 5/)
    expect(past.error).toMatch(/last version of a catalog cannot be deleted/)
    await refuse("3")
    await refuse(2.5)
    expect(await minimumVersion(svc)).toBe(2)
    // Setting the current minimum again is accepted and changes nothing.
    expect((await setMinimum(svc, 2)).status).toBe(204)
    expect(await readableVersions()).toEqual([2, 3, 4, 5])
  })

  it("deletes a data handle reused across versions with the version that owned it: reading it fails with 404", async () => {
    const owner = await publish(svc, [
      { partition: "hz-a", data: JSON.stringify({ a: 1 }), dataHandle: "hazard-1" },
      { partition: "hz-keep", data: JSON.stringify({ keep: 1 }), dataHandle: "keep-1" }
    ])
    // The next version reuses hazard-1 for another partition (what the interface warns against) and moves hz-a on.
    const reuser = await publish(svc, [
      { partition: "hz-b", dataHandle: "hazard-1" },
      { partition: "hz-a", data: JSON.stringify({ a: 2 }), dataHandle: "hazard-2" }
    ])
    expect([owner, reuser]).toEqual([6, 7])
    const atReuser = new Map((await listing(svc, "places", reuser)).map((p) => [p.partition, p.dataHandle]))
    expect(atReuser.get("hz-b")).toBe("hazard-1")
    expect(await blobStatus(svc, "places", "hazard-1")).toBe(200)

    expect((await setMinimum(svc, reuser)).status).toBe(204)
    await eventually(
      async () => (await blobStatus(svc, "places", "hazard-1")) === 404,
      "the reused handle is collected with version 6"
    )
    // The surviving version still lists the partition, which now references data that does not exist.
    expect(new Map((await listing(svc, "places", reuser)).map((p) => [p.partition, p.dataHandle])).get("hz-b")).toBe(
      "hazard-1"
    )
    const res = await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/hazard-1`)
    expect(res.status).toBe(404)
    // A blob of version 6 that version 7 still uses unchanged survives, as does the new one.
    expect(await blobDigest("places", "keep-1")).toBe(sha1(JSON.stringify({ keep: 1 })))
    expect(await blobDigest("places", "hazard-2")).toBe(sha1(JSON.stringify({ a: 2 })))
  })
})

describe("automatic version deletion", () => {
  it("refuses numberOfVersionsToKeep outside 1..50000", async () => {
    const config = await catalogConfig()
    for (const keep of [50_001, 0, -1, 2.5]) {
      const res = await putCatalog({ ...config, automaticVersionDeletion: { numberOfVersionsToKeep: keep } })
      expect(res.status).toBe(400)
      expect(JSON.stringify(await res.json())).toMatch(/numberOfVersionsToKeep/)
    }
    expect((await catalogConfig()).automaticVersionDeletion).toBeUndefined()
    // The upper bound itself is accepted.
    const max = await putCatalog({ ...config, automaticVersionDeletion: { numberOfVersionsToKeep: 50_000 } })
    expect(max.status).toBe(202)
  })

  it("with N=3, six commits leave exactly 3 readable versions, and only versioned layers are touched", async () => {
    const res = await putCatalog({
      ...(await catalogConfig()),
      automaticVersionDeletion: { numberOfVersionsToKeep: 3 }
    })
    expect(res.status).toBe(202)
    const link = (await res.json()) as { href: string }
    const status = await svc.get(`${link.href}?flags=noRedirects`)
    expect(status.status).toBe(200)
    expect(((await status.json()) as { status: string }).status).toBe("success")
    expect((await catalogConfig()).automaticVersionDeletion).toEqual({ numberOfVersionsToKeep: 3 })
    // Enabling it deletes nothing by itself: the trigger is a commit.
    expect(await readableVersions()).toEqual([7])

    const traffic = await trafficState()
    const tilesAt7 = await listing(svc, "tiles", 7)
    const handles: Array<string> = []
    for (let i = 1; i <= 6; i++) {
      const handle = `auto-${i}`
      handles.push(handle)
      const version = await publish(svc, [{
        partition: "auto",
        data: JSON.stringify({ commit: i }),
        dataHandle: handle
      }])
      expect(version).toBe(7 + i)
      const expected = Array.from({ length: Math.min(3, i + 1) }, (_, k) => version - Math.min(3, i + 1) + 1 + k)
      await eventually(
        async () => JSON.stringify(await readableVersions()) === JSON.stringify(expected),
        `versions ${expected} remain after commit ${i}`
      )
    }
    expect(await readableVersions()).toEqual([11, 12, 13])
    expect(await minimumVersion(svc)).toBe(11)
    expect(await body(await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=10`))).toEqual({
      status: 400,
      body: belowMinimum(11)
    })
    // The blobs of the deleted versions go, those of the remaining ones stay.
    await eventually(
      async () =>
        (await Promise.all(handles.slice(0, 3).map((h) => blobStatus(svc, "places", h)))).every((s) => s === 404),
      "auto-1..3 are collected"
    )
    for (const handle of handles.slice(3)) expect(await blobStatus(svc, "places", handle)).toBe(200)
    // The versioned layer that did not change keeps its data; the volatile layer is untouched.
    expect(await listing(svc, "tiles", 13)).toEqual(tilesAt7)
    for (const p of tilesAt7) expect(await blobStatus(svc, "tiles", p.dataHandle)).toBe(200)
    expect(await trafficState()).toEqual(traffic)
  })

  it("DELETE automaticVersionDeletion turns it off", async () => {
    const res = await svc.get(`/config/v1/catalogs/${DEMO}/automaticVersionDeletion`, { method: "DELETE" })
    expect(res.status).toBe(202)
    expect((await catalogConfig()).automaticVersionDeletion).toBeUndefined()
    await publish(svc, [{ partition: "auto", data: JSON.stringify({ commit: 7 }) }])
    await publish(svc, [{ partition: "auto", data: JSON.stringify({ commit: 8 }) }])
    expect(await readableVersions()).toEqual([11, 12, 13, 14, 15])
  })
})

describe("the last version", () => {
  it("can become the minimum, but never be deleted", async () => {
    const latest = await latestVersion(svc)
    expect((await setMinimum(svc, latest)).status).toBe(204)
    expect(await readableVersions()).toEqual([latest])
    const res = await setMinimum(svc, latest + 1)
    expect(res.status).toBe(400)
    expect(((await res.json()) as { detail: Array<{ error: string }> }).detail[0]!.error).toMatch(/cannot be deleted/)
    expect(await minimumVersion(svc)).toBe(latest)
    expect((await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=${latest}`)).status).toBe(200)
  })
})
