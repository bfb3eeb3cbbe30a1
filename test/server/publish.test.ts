/**
 * Publish API v2 over HTTP: a publication becomes a catalog version whose listing shows exactly the
 * uploaded changes; newer inits cancel older ones; invalid partition ids are refused; volatile
 * publications overwrite in place.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import {
  blob,
  byId,
  canonical,
  DEMO,
  type Entry,
  expectDataError,
  expectJson,
  expectStatus,
  latestVersion,
  type Listing,
  listing,
  metadata,
  publish,
  query,
  sha1
} from "./helpers.ts"

interface Publication {
  readonly id: string
  readonly catalogId: string
  readonly catalogVersion: number
  readonly layerIds: ReadonlyArray<string>
  readonly details: {
    readonly state: string
    readonly message: string
    readonly started: number
    readonly modified: number
    readonly expires: number
  }
}

const json = (body: unknown) => ({ headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

describe("publish API v2", () => {
  let svc: TestService

  const init = async (layerIds: ReadonlyArray<string>) => {
    const res = await svc.get(publish("/publications"), { method: "POST", ...json({ layerIds }) })
    const body = await expectJson<Publication>(res, 200)
    return { body, location: res.headers.get("location") }
  }
  const upload = (id: string, layer: string, partitions: ReadonlyArray<Record<string, unknown>>) =>
    svc.get(publish(`/layers/${layer}/publications/${id}/partitions`), { method: "POST", ...json({ partitions }) })
  const submit = (id: string) => svc.get(publish(`/publications/${id}`), { method: "PUT" })
  const cancel = (id: string) => svc.get(publish(`/publications/${id}`), { method: "DELETE" })
  const get = async (id: string) => expectJson<Publication>(await svc.get(publish(`/publications/${id}`)), 200)
  const putBlob = async (layer: string, handle: string, bytes: Uint8Array) =>
    expectStatus(
      await svc.get(blob(layer, handle), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: bytes
      }),
      200
    )
  const changes = async (start: number, end: number, layer = "places") =>
    (await expectJson<Listing>(
      await svc.get(
        metadata(`/layers/${layer}/changes?startVersion=${start}&endVersion=${end}&additionalFields=dataSize,checksum`)
      ),
      200
    ))
      .partitions

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 60, versions: 3 } })
  })
  afterAll(() => svc?.close())

  it("initialises a publication with 200 and a Location that serves it", async () => {
    const latest = await latestVersion(svc)
    const { body, location } = await init(["places", "tiles"])
    expect(body.id).toMatch(/^v2-[0-9a-f-]{36}$/)
    expect(body).toMatchObject({
      catalogId: "demo",
      catalogVersion: latest,
      layerIds: ["places", "tiles"],
      details: { state: "initialized" }
    })
    expect(typeof body.details.message).toBe("string")
    expect(body.details.expires).toBeGreaterThan(body.details.started)
    expect(body.details.modified).toBeGreaterThanOrEqual(body.details.started)
    expect(location).toBe(`${svc.url}/publish/v2/catalogs/${DEMO}/publications/${body.id}`)
    expect(await expectJson(await svc.get(location!), 200)).toEqual(body)
    await expectStatus(await cancel(body.id), 204)
  })

  it("submits uploaded partitions (204) as a new catalog version whose listing shows exactly those changes", async () => {
    const before = await latestVersion(svc)
    const old = (await listing(svc, "places", `version=${before}&additionalFields=dataSize,checksum`)).partitions
    const replaced = old[1]!
    const removed = old[2]!
    const fresh = new TextEncoder().encode(JSON.stringify({ id: "published-new", text: "a new place" }))
    const replacement = new TextEncoder().encode(JSON.stringify({ id: replaced.partition, text: "replaced" }))
    const inline = new TextEncoder().encode(JSON.stringify({ id: "published-inline" }))
    await putBlob("places", "published-new-1", fresh)
    await putBlob("places", "published-replacement-1", replacement)

    const { body } = await init(["places"])
    const live = [
      { partition: "published-new", dataHandle: "published-new-1", checksum: sha1(fresh), dataSize: fresh.byteLength },
      {
        partition: replaced.partition,
        dataHandle: "published-replacement-1",
        checksum: sha1(replacement),
        dataSize: replacement.byteLength
      }
    ]
    const uploaded = [...live, { partition: removed.partition, dataHandle: "" }]
    await expectStatus(await upload(body.id, "places", uploaded.slice(0, 2)), 204)
    await expectStatus(await upload(body.id, "places", uploaded.slice(2)), 204)
    await expectStatus(
      await upload(body.id, "places", [{
        partition: "published-inline",
        data: Buffer.from(inline).toString("base64"),
        checksum: sha1(inline),
        dataSize: inline.byteLength
      }]),
      204
    )
    // Nothing is visible before the submit.
    expect(await latestVersion(svc)).toBe(before)
    await expectStatus(await submit(body.id), 204)

    const after = await latestVersion(svc)
    expect(after).toBe(before + 1)
    expect(await get(body.id)).toMatchObject({ catalogVersion: after, details: { state: "succeeded" } })

    const now = (await listing(svc, "places", `version=${after}&additionalFields=dataSize,checksum`)).partitions
    const inlineEntry = now.find((e) => e.partition === "published-inline")
    expect(inlineEntry).toBeDefined()
    const expected = new Map(old.map((e) => [e.partition, e as Entry]))
    expected.delete(removed.partition)
    for (const u of live) {
      expected.set(u.partition, {
        version: after,
        partition: u.partition,
        layer: "places",
        dataHandle: u.dataHandle,
        checksum: u.checksum,
        dataSize: u.dataSize
      })
    }
    expected.set("published-inline", {
      version: after,
      partition: "published-inline",
      layer: "places",
      dataHandle: inlineEntry!.dataHandle,
      checksum: sha1(inline),
      dataSize: inline.byteLength
    })
    expect(canonical(now)).toEqual(canonical([...expected.values()]))

    // The uploaded and inline blobs are what the listing says.
    for (const e of now.filter((e) => e.version === after)) {
      const bytes = new Uint8Array(await (await svc.get(blob("places", e.dataHandle))).arrayBuffer())
      expect(sha1(bytes), e.partition).toBe(e.checksum)
    }
    // The previous version is untouched, and the changes are exactly the uploads.
    expect((await listing(svc, "places", `version=${before}&additionalFields=dataSize,checksum`)).partitions).toEqual(
      old
    )
    const delta = await changes(before, after)
    expect(canonical(delta)).toEqual(
      canonical([
        ...[...expected.values()].filter((e) => e.version === after),
        { version: after, partition: removed.partition, layer: "places", dataHandle: "" }
      ])
    )
    // Layer versions and the query API agree.
    const layers = await expectJson<{ layerVersions: Array<{ layer: string; version: number }> }>(
      await svc.get(metadata(`/layerVersions?version=${after}`)),
      200
    )
    expect(layers.layerVersions.find((l) => l.layer === "places")!.version).toBe(after)
    expect(layers.layerVersions.find((l) => l.layer === "tiles")!.version).toBeLessThan(after)
    const byQuery = await expectJson<Listing>(
      await svc.get(query(`/layers/places/partitions?version=${after}&partition=published-new,${removed.partition}`)),
      200
    )
    expect(byQuery.partitions.map((e) => e.partition)).toEqual(["published-new"])
    expect(
      (await expectJson<Listing>(
        await svc.get(query(`/layers/places/partitions?version=${before}&partition=published-new`)),
        200
      )).partitions
    ).toEqual([])
  })

  it("cancels an initialized publication when a new one is initialised; its uploads never appear", async () => {
    const before = await latestVersion(svc)
    const first = (await init(["places"])).body
    await expectStatus(
      await upload(first.id, "places", [{ partition: "from-cancelled", dataHandle: "some-handle-1" }]),
      204
    )
    const second = (await init(["places"])).body
    expect(second.id).not.toBe(first.id)
    expect((await get(first.id)).details.state).toBe("cancelled")
    expect((await get(second.id)).details.state).toBe("initialized")
    await expectDataError(
      await upload(first.id, "places", [{ partition: "late", dataHandle: "h-1" }]),
      409,
      "publication"
    )
    await expectDataError(await submit(first.id), 409, "publication")

    await expectStatus(
      await upload(second.id, "places", [{ partition: "from-second", dataHandle: "some-handle-2" }]),
      204
    )
    await expectStatus(await submit(second.id), 204)
    const after = await latestVersion(svc)
    expect(after).toBe(before + 1)
    expect((await changes(before, after)).map((e) => e.partition)).toEqual(["from-second"])
  })

  it("cancels with DELETE (204); a cancelled publication cannot be cancelled or submitted again", async () => {
    const before = await latestVersion(svc)
    const { body } = await init(["places"])
    await expectStatus(await upload(body.id, "places", [{ partition: "never", dataHandle: "never-1" }]), 204)
    await expectStatus(await cancel(body.id), 204)
    expect((await get(body.id)).details.state).toBe("cancelled")
    await expectDataError(await cancel(body.id), 409, "publication")
    await expectDataError(await submit(body.id), 409, "publication")
    expect(await latestVersion(svc)).toBe(before)
    await expectDataError(await svc.get(publish("/publications/v2-00000000-0000-0000-0000-000000000000")), 404)
  })

  it("refuses invalid partition ids and data handles with 400 and stages nothing from such a request", async () => {
    const before = await latestVersion(svc)
    const { body } = await init(["places"])
    const badIds = ["../x", "a/b", "%2e%2e", "\u0000", "x\u0000y", "", "a b", "caf\u00e9", "x".repeat(501), "..\\x"]
    for (const bad of badIds) {
      const res = await upload(body.id, "places", [{ partition: "valid-one", dataHandle: "valid-handle" }, {
        partition: bad,
        dataHandle: "h-2"
      }])
      await expectDataError(res, 400, "partition")
    }
    await expectDataError(await upload(body.id, "places", [{ partition: 42, dataHandle: "h" }]), 400)
    await expectDataError(
      await upload(body.id, "places", [{ partition: "valid-two", dataHandle: "../etc/passwd" }]),
      400,
      "dataHandle"
    )
    await expectDataError(await upload(body.id, "places", [{ partition: "valid-three" }]), 400, "dataHandle")
    await expectDataError(
      await upload(body.id, "places", [{ partition: "valid-four", dataHandle: "x".repeat(601) }]),
      400,
      "dataHandle"
    )
    // The longest valid id is fine.
    await expectStatus(
      await upload(body.id, "places", [{ partition: "p".repeat(500), dataHandle: "long-id-handle" }]),
      204
    )
    await expectStatus(await submit(body.id), 204)
    const after = await latestVersion(svc)
    expect(after).toBe(before + 1)
    expect((await changes(before, after)).map((e) => e.partition)).toEqual(["p".repeat(500)])
  })

  it("refuses bad publication requests with 400", async () => {
    for (const layerIds of [["places", "traffic"], ["events"], ["nope"], []]) {
      await expectDataError(await svc.get(publish("/publications"), { method: "POST", ...json({ layerIds }) }), 400)
    }
    await expectDataError(
      await svc.get(publish("/publications"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{not json"
      }),
      400,
      "body"
    )
    await expectDataError(
      await svc.get(publish("/publications"), { method: "POST", ...json({ layers: ["places"] }) }),
      400,
      "body"
    )
    const { body } = await init(["places"])
    await expectDataError(
      await upload(body.id, "tiles", [{ partition: "23618402", dataHandle: "h-tile" }]),
      400,
      "layer"
    )
    await expectStatus(await cancel(body.id), 204)
  })

  it("publishes volatile partitions in place: no new version, the listing shows the overwrite", async () => {
    const before = await latestVersion(svc)
    const old = (await listing(svc, "traffic", "additionalFields=checksum")).partitions
    // A versioned publication stays initialized while a volatile one runs: they are of different kinds.
    const versioned = (await init(["places"])).body

    const updated = new TextEncoder().encode(`{"segment":"segment-0","speedKmh":1}`)
    const added = new TextEncoder().encode(`{"segment":"segment-9999","speedKmh":99}`)
    await expectStatus(
      await svc.get(blob("traffic", "traffic-published-0"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: updated
      }),
      200
    )
    await expectStatus(
      await svc.get(blob("traffic", "traffic-published-9999"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: added
      }),
      200
    )
    const { body } = await init(["traffic"])
    await expectStatus(
      await upload(body.id, "traffic", [
        { partition: "segment-0000", dataHandle: "traffic-published-0", checksum: sha1(updated) },
        { partition: "segment-9999", dataHandle: "traffic-published-9999", checksum: sha1(added) },
        { partition: "segment-0001", dataHandle: "" }
      ]),
      204
    )
    const submittedAt = Date.now()
    await expectStatus(await submit(body.id), 204)
    expect((await get(body.id)).details.state).toBe("succeeded")
    expect((await get(versioned.id)).details.state).toBe("initialized")
    expect(await latestVersion(svc)).toBe(before)

    const now = (await listing(svc, "traffic", "additionalFields=checksum")).partitions
    const expected = byId(old)
    expected.set("segment-0000", {
      version: -1,
      partition: "segment-0000",
      layer: "traffic",
      dataHandle: "traffic-published-0",
      checksum: sha1(updated)
    })
    expected.set("segment-9999", {
      version: -1,
      partition: "segment-9999",
      layer: "traffic",
      dataHandle: "traffic-published-9999",
      checksum: sha1(added)
    })
    expected.delete("segment-0001")
    expect(canonical(now)).toEqual(canonical([...expected.values()]))
    // The changes since the submit show the two writes and the removal (an empty data handle).
    const since = (await expectJson<Listing>(
      await svc.get(metadata(`/layers/traffic/changes?sinceTime=${submittedAt}&additionalFields=checksum`)),
      200
    )).partitions
    expect(canonical(since)).toEqual(
      canonical([
        expected.get("segment-0000")!,
        expected.get("segment-9999")!,
        { version: -1, partition: "segment-0001", layer: "traffic", dataHandle: "" }
      ])
    )
    for (const id of ["segment-0000", "segment-9999"]) {
      const e = now.find((p) => p.partition === id)!
      expect(sha1(new Uint8Array(await (await svc.get(blob("traffic", e.dataHandle))).arrayBuffer()))).toBe(e.checksum)
    }
    await expectStatus(await cancel(versioned.id), 204)
  })
})
