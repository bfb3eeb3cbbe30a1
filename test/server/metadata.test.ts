/**
 * The metadata API over HTTP: partitions at a version, additional fields, parts, Range resumption,
 * changes (checked against what two full listings say), versions, layer versions, volatile listings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import {
  blob as blobPath,
  byId,
  canonical,
  type Entry,
  expectDataError,
  expectJson,
  type Listing,
  listing,
  metadata,
  sha1
} from "./helpers.ts"

const VERSIONS = 12
const PARTITIONS = 300

/** What a changes listing over (start, end] must hold, derived from full listings only. */
const deriveChanges = (at: ReadonlyMap<number, ReadonlyArray<Entry>>, start: number, end: number) => {
  const before = byId(at.get(start) ?? [])
  const after = byId(at.get(end)!)
  const live: Array<Entry> = []
  const deleted = new Map<string, number>()
  for (const [id, e] of after) {
    const old = before.get(id)
    if (old === undefined || old.dataHandle !== e.dataHandle) live.push(e)
  }
  for (const id of before.keys()) {
    if (after.has(id)) continue
    // Deleted at the first version from which it is absent through `end`.
    let v = end
    while (v - 1 > start && !byId(at.get(v - 1)!).has(id)) v--
    deleted.set(id, v)
  }
  return { live, deleted }
}

describe("metadata API", () => {
  let svc: TestService
  let latest: number
  /** Full listings of `places` with checksum and dataSize, per version. */
  const places = new Map<number, ReadonlyArray<Entry>>()

  const text = async (p: string, headers: Record<string, string> = {}) => {
    const res = await svc.get(metadata(p), { headers })
    return { res, bytes: new Uint8Array(await res.arrayBuffer()) }
  }

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: PARTITIONS, versions: VERSIONS } })
    latest =
      (await expectJson<{ version: number }>(await svc.get(metadata("/versions/latest?startVersion=-1")), 200)).version
    for (let v = 0; v <= latest; v++) {
      places.set(v, (await listing(svc, "places", `version=${v}&additionalFields=dataSize,checksum`)).partitions)
    }
  })
  afterAll(() => svc?.close())

  describe("versions", () => {
    it("reports the latest version the seed created and minimum 0", async () => {
      expect(latest).toBe(VERSIONS - 1)
      expect(await expectJson(await svc.get(metadata("/versions/latest?startVersion=-1")), 200)).toEqual({
        version: VERSIONS - 1
      })
      expect(await expectJson(await svc.get(metadata("/versions/latest")), 200)).toEqual({ version: VERSIONS - 1 })
      expect(await expectJson(await svc.get(metadata("/versions/minimum")), 200)).toEqual({ version: 0 })
    })

    it("lists versions with an exclusive startVersion and an inclusive endVersion", async () => {
      const body = await expectJson<
        {
          versions: Array<
            { version: number; timestamp: number; dependencies: unknown; partitionCounts: Record<string, number> }
          >
        }
      >(
        await svc.get(metadata("/versions?startVersion=2&endVersion=6")),
        200
      )
      expect(body.versions.map((v) => v.version)).toEqual([3, 4, 5, 6])
      for (const v of body.versions) {
        expect(Object.keys(v).sort()).toEqual(["dependencies", "partitionCounts", "timestamp", "version"])
        expect(Object.values(v.partitionCounts).every((n) => Number.isInteger(n) && n >= 0)).toBe(true)
        expect(v.dependencies).toEqual([])
        expect(Number.isInteger(v.timestamp)).toBe(true)
      }
      const all = await expectJson<{ versions: Array<{ version: number; timestamp: number }> }>(
        await svc.get(metadata("/versions")),
        200
      )
      expect(all.versions.map((v) => v.version)).toEqual(Array.from({ length: VERSIONS }, (_, i) => i))
      for (let i = 1; i < all.versions.length; i++) {
        expect(all.versions[i]!.timestamp).toBeGreaterThanOrEqual(all.versions[i - 1]!.timestamp)
      }
      expect(all.versions.slice(3, 7)).toEqual(body.versions)
      const listed = await expectJson<{ versions: Array<{ version: number }> }>(
        await svc.get(metadata("/versions?version=1&version=4")),
        200
      )
      expect(listed.versions.map((v) => v.version)).toEqual([1, 4])
      const empty = await expectJson<{ versions: Array<unknown> }>(
        await svc.get(metadata("/versions?startVersion=5&endVersion=5")),
        200
      )
      expect(empty.versions).toEqual([])
    })

    it("refuses more than 1000 versions per call, an endVersion above the latest, and end < start with 400", async () => {
      const top = VERSIONS - 1
      expect((await svc.get(metadata(`/versions?startVersion=${top - 1000}&endVersion=${top}`))).status).toBe(200)
      await expectDataError(
        await svc.get(metadata(`/versions?startVersion=${top - 1001}&endVersion=${top}`)),
        400,
        "endVersion",
        /1000/
      )
      await expectDataError(
        await svc.get(metadata(`/versions?startVersion=0&endVersion=${top + 1}`)),
        400,
        "endVersion",
        `Invalid version: latest known version is ${top}`
      )
      await expectDataError(await svc.get(metadata("/versions?startVersion=5&endVersion=3")), 400, "endVersion")
      await expectDataError(await svc.get(metadata("/versions?startVersion=x")), 400, "startVersion")
    })

    it("reports per layer the last version at or below V in which it changed (layerVersions)", async () => {
      const versions = await expectJson<{ versions: Array<{ version: number; timestamp: number }> }>(
        await svc.get(metadata("/versions")),
        200
      )
      const timestampOf = new Map(versions.versions.map((v) => [v.version, v.timestamp]))
      const tiles = new Map<number, ReadonlyArray<Entry>>()
      for (let v = 0; v <= latest; v++) tiles.set(v, (await listing(svc, "tiles", `version=${v}`)).partitions)
      const changedAt = (at: Map<number, ReadonlyArray<Entry>>, v: number) =>
        v === 0 ? at.get(0)!.length > 0 : canonical(at.get(v)!).join("\n") !== canonical(at.get(v - 1)!).join("\n")

      for (const v of [0, 4, latest]) {
        const body = await expectJson<
          { version: number; layerVersions: Array<{ layer: string; version: number; timestamp: number }> }
        >(
          await svc.get(metadata(`/layerVersions?version=${v}`)),
          200
        )
        expect(body.version).toBe(v)
        expect(body.layerVersions.map((l) => l.layer)).toEqual(["places", "roads", "tiles"])
        for (const [layer, at] of [["places", places], ["tiles", tiles]] as const) {
          let expected = v
          while (expected > 0 && !changedAt(at as Map<number, ReadonlyArray<Entry>>, expected)) expected--
          const entry = body.layerVersions.find((l) => l.layer === layer)!
          expect(entry.version, `${layer} at ${v}`).toBe(expected)
          expect(entry.timestamp).toBe(timestampOf.get(expected))
        }
      }
      await expectDataError(await svc.get(metadata("/layerVersions")), 400, "version")
      await expectDataError(
        await svc.get(metadata(`/layerVersions?version=${latest + 1}`)),
        400,
        "version",
        `Invalid version: latest known version is ${latest}`
      )
    })
  })

  describe("partitions", () => {
    it("lists the partitions of a versioned layer at a version: sorted, unique, versions not above it", async () => {
      for (const [v, entries] of places) {
        expect(entries.length).toBeGreaterThan(0)
        const ids = entries.map((e) => e.partition)
        expect(new Set(ids).size).toBe(ids.length)
        expect([...ids].sort()).toEqual(ids)
        for (const e of entries) {
          expect(e.layer).toBe("places")
          expect(e.dataHandle).not.toBe("")
          expect(e.version).toBeLessThanOrEqual(v)
          expect(e.version).toBeGreaterThanOrEqual(0)
        }
      }
      expect(places.get(0)!.length).toBe(PARTITIONS)
      expect(places.get(0)!.every((e) => e.version === 0)).toBe(true)
      // The seed changes something in every version, so listings differ.
      expect(canonical(places.get(latest)!)).not.toEqual(canonical(places.get(0)!))
    })

    it("carries no additional fields unless asked, and exactly the asked ones", async () => {
      const plain = await listing(svc, "places", `version=${latest}`)
      for (const e of plain.partitions) {
        expect(Object.keys(e).sort()).toEqual(["dataHandle", "layer", "partition", "version"])
      }
      const withSize = await listing(svc, "places", `version=${latest}&additionalFields=dataSize`)
      for (const e of withSize.partitions) {
        expect(Object.keys(e).sort()).toEqual(["dataHandle", "dataSize", "layer", "partition", "version"])
      }
      // Repeated parameters mean the same as a comma-joined one; crc was never published so it stays absent.
      const repeated = await listing(
        svc,
        "places",
        `version=${latest}&additionalFields=checksum&additionalFields=dataSize&additionalFields=crc`
      )
      expect(repeated.partitions).toEqual(places.get(latest))
      const tiles = await listing(
        svc,
        "tiles",
        `version=${latest}&additionalFields=dataSize,checksum,compressedDataSize,crc`
      )
      for (const e of tiles.partitions) {
        expect(Object.keys(e).sort()).toEqual([
          "checksum",
          "compressedDataSize",
          "dataHandle",
          "dataSize",
          "layer",
          "partition",
          "version"
        ])
      }
    })

    it("lists dataSize and checksum that match the blobs (sha1 of the bytes)", async () => {
      const entries = places.get(latest)!
      for (const e of entries.filter((_, i) => i % 10 === 0)) {
        const res = await svc.get(blobPath("places", e.dataHandle))
        const bytes = new Uint8Array(await res.arrayBuffer())
        expect(res.status).toBe(200)
        expect(bytes.byteLength).toBe(e.dataSize)
        expect(sha1(bytes)).toBe(e.checksum)
      }
    })

    it("refuses an unknown additional field with 400", async () => {
      await expectDataError(
        await svc.get(metadata(`/layers/places/partitions?version=0&additionalFields=dataSize,colour`)),
        400,
        "additionalFields",
        /colour/
      )
    })

    it("requires a version for a versioned layer", async () => {
      await expectDataError(await svc.get(metadata("/layers/places/partitions")), 400, "version")
      await expectDataError(await svc.get(metadata("/layers/places/partitions?version=latest")), 400, "version")
    })

    it("refuses a version above the latest with 'Invalid version: latest known version is N'", async () => {
      const body = await expectDataError(
        await svc.get(metadata(`/layers/places/partitions?version=${latest + 1}`)),
        400,
        "version",
        `Invalid version: latest known version is ${latest}`
      )
      expect(body).toEqual({
        title: "Bad Request",
        status: 400,
        detail: [{ name: "version", error: `Invalid version: latest known version is ${latest}` }]
      })
    })

    it("refuses an unknown layer with 400 naming the layer", async () => {
      const body = await expectDataError(await svc.get(metadata("/layers/nope/partitions?version=0")), 400, "layer")
      expect(body).toEqual({
        title: "Bad Request",
        status: 400,
        detail: [{ name: "layer", error: "Layer 'nope' is missing in the catalog configuration." }]
      })
    })

    it("serves the same listing under a percent-encoded catalog HRN", async () => {
      const encoded = await expectJson<Listing>(
        await svc.get(
          `/metadata/v1/catalogs/${
            encodeURIComponent("hrn:local:data:::demo")
          }/layers/places/partitions?version=3&additionalFields=dataSize,checksum`
        ),
        200
      )
      expect(encoded.partitions).toEqual(places.get(3))
    })
  })

  describe("parts", () => {
    for (const [layer, version] of [["places", 0], ["places", "latest"], ["tiles", 5]] as const) {
      it(`splits the ${layer} listing at version ${version} into parts whose union is the full listing, without duplicates`, async () => {
        const v = version === "latest" ? latest : version
        const full = (await listing(svc, layer, `version=${v}&additionalFields=checksum`)).partitions
        const parts = await expectJson<{ parts: Array<string> }>(
          await svc.get(metadata(`/layers/${layer}/partitions/parts?numRequestedParts=4`)),
          200
        )
        expect(parts.parts).toHaveLength(4)
        expect(new Set(parts.parts).size).toBe(4)
        const union: Array<Entry> = []
        const sizes: Array<number> = []
        for (const part of parts.parts) {
          expect(typeof part).toBe("string")
          const one =
            (await listing(svc, layer, `version=${v}&additionalFields=checksum&part=${encodeURIComponent(part)}`))
              .partitions
          sizes.push(one.length)
          union.push(...one)
        }
        expect(union.length).toBe(full.length)
        expect(new Set(union.map((e) => e.partition)).size).toBe(union.length)
        expect(canonical(union)).toEqual(canonical(full))
        // Parts are real splits, not one part holding everything.
        expect(Math.max(...sizes)).toBeLessThan(full.length)
      })
    }

    it("refuses a missing or out-of-range numRequestedParts and a made-up part id with 400", async () => {
      await expectDataError(await svc.get(metadata("/layers/places/partitions/parts")), 400, "numRequestedParts")
      await expectDataError(
        await svc.get(metadata("/layers/places/partitions/parts?numRequestedParts=0")),
        400,
        "numRequestedParts"
      )
      await expectDataError(
        await svc.get(metadata("/layers/places/partitions?version=0&part=bm90LWEtcGFydA")),
        400,
        "part"
      )
    })
  })

  describe("Range resumption", () => {
    it("resumes the listing at any byte offset with 206, and prefix + rest equals the full document byte for byte", async () => {
      const q = `/layers/places/partitions?version=${latest}&additionalFields=dataSize,checksum`
      const full = await text(q)
      expect(full.res.status).toBe(200)
      const n = full.bytes.byteLength
      expect(JSON.parse(new TextDecoder().decode(full.bytes)).partitions).toEqual(places.get(latest))
      for (const offset of [0, 1, 15, Math.floor(n / 3), Math.floor(n / 2) + 7, n - 2, n - 1]) {
        const rest = await text(q, { range: `bytes=${offset}-` })
        expect(rest.res.status, `offset ${offset}`).toBe(206)
        expect(rest.res.headers.get("content-range")).toMatch(new RegExp(`^bytes ${offset}-`))
        const joined = Buffer.concat([full.bytes.subarray(0, offset), rest.bytes])
        expect(joined.byteLength).toBe(n)
        expect(Buffer.compare(joined, Buffer.from(full.bytes)), `offset ${offset}`).toBe(0)
      }
      // The query form `range=bytes=N-` works the same.
      const viaQuery = await text(`${q}&range=${encodeURIComponent(`bytes=${Math.floor(n / 2)}-`)}`)
      expect(viaQuery.res.status).toBe(206)
      expect(Buffer.compare(Buffer.from(viaQuery.bytes), Buffer.from(full.bytes.subarray(Math.floor(n / 2))))).toBe(0)
    })

    it("resumes a part and a changes listing too", async () => {
      const parts = await expectJson<{ parts: Array<string> }>(
        await svc.get(metadata("/layers/places/partitions/parts?numRequestedParts=3")),
        200
      )
      for (
        const q of [
          `/layers/places/partitions?version=2&part=${encodeURIComponent(parts.parts[1]!)}`,
          `/layers/places/changes?startVersion=1&endVersion=${latest}&additionalFields=checksum`
        ]
      ) {
        const full = await text(q)
        const offset = Math.floor(full.bytes.byteLength * 0.6)
        const rest = await text(q, { range: `bytes=${offset}-` })
        expect(rest.res.status).toBe(206)
        expect(Buffer.compare(Buffer.concat([full.bytes.subarray(0, offset), rest.bytes]), Buffer.from(full.bytes)))
          .toBe(0)
      }
    })

    it("answers an offset at or beyond the end, and unsupported range forms, with 416", async () => {
      const q = `/layers/places/partitions?version=1`
      const full = await text(q)
      for (
        const range of [
          `bytes=${full.bytes.byteLength}-`,
          `bytes=${full.bytes.byteLength + 1000}-`,
          "bytes=0-10",
          "bytes=-5",
          "lines=3-"
        ]
      ) {
        const res = await svc.get(metadata(q), { headers: { range } })
        const body = await expectJson<{ status: number }>(res, 416)
        expect(body.status, range).toBe(416)
      }
    })
  })

  describe("changes", () => {
    for (const [start, end] of [[3, 7], [0, 1], [-1, 0], [5, 11], [10, 11]] as const) {
      it(`lists exactly the changes in (${start}, ${end}] that full listings at both ends imply`, async () => {
        const res = await svc.get(
          metadata(`/layers/places/changes?startVersion=${start}&endVersion=${end}&additionalFields=dataSize,checksum`)
        )
        const changes = (await expectJson<Listing>(res, 200)).partitions
        const { live, deleted } = deriveChanges(places, start, end)
        const actualLive = changes.filter((e) => e.dataHandle !== "")
        const actualDeleted = changes.filter((e) => e.dataHandle === "")
        expect(canonical(actualLive)).toEqual(canonical(live))
        for (const e of actualLive) expect(e.version).toBeGreaterThan(start)
        for (const [id, version] of deleted) {
          const entry = actualDeleted.find((e) => e.partition === id)
          expect(entry, `deletion of ${id}`).toBeDefined()
          expect(entry!.version).toBe(version)
          expect(entry!.layer).toBe("places")
        }
        // A deletion the two ends do not show can only be of a partition that lived and died inside the range.
        for (const e of actualDeleted.filter((e) => !deleted.has(e.partition))) {
          expect(byId(places.get(start) ?? []).has(e.partition)).toBe(false)
          expect(byId(places.get(end)!).has(e.partition)).toBe(false)
          const livedInside = Array.from({ length: end - start - 1 }, (_, i) => start + 1 + i).some((v) =>
            byId(places.get(v)!).has(e.partition)
          )
          expect(livedInside, `${e.partition} deleted in (${start}, ${end}]`).toBe(true)
        }
        const ids = changes.map((e) => e.partition)
        expect(new Set(ids).size).toBe(ids.length)
        // The seeded history has both kinds of change in every range starting at a real version.
        if (start >= 0) {
          expect(live.length).toBeGreaterThan(0)
          expect(deleted.size).toBeGreaterThan(0)
        }
      })
    }

    it("lists the full version 0 as the changes in (-1, 0], and nothing for an empty range", async () => {
      const first = (await expectJson<Listing>(
        await svc.get(
          metadata("/layers/places/changes?startVersion=-1&endVersion=0&additionalFields=dataSize,checksum")
        ),
        200
      ))
        .partitions
      expect(first).toEqual(places.get(0))
      const none = await expectJson<Listing>(
        await svc.get(metadata("/layers/places/changes?startVersion=4&endVersion=4")),
        200
      )
      expect(none.partitions).toEqual([])
    })

    it("defaults endVersion to the latest", async () => {
      const explicit = await text(`/layers/places/changes?startVersion=6&endVersion=${latest}`)
      const implicit = await text("/layers/places/changes?startVersion=6")
      expect(Buffer.compare(Buffer.from(explicit.bytes), Buffer.from(implicit.bytes))).toBe(0)
    })

    it("splits changes into parts whose union is the whole changes listing", async () => {
      const q = `startVersion=0&endVersion=${latest}&additionalFields=checksum`
      const full = (await expectJson<Listing>(await svc.get(metadata(`/layers/places/changes?${q}`)), 200)).partitions
      const parts = await expectJson<{ parts: Array<string> }>(
        await svc.get(metadata("/layers/places/changes/parts?numRequestedParts=3")),
        200
      )
      expect(parts.parts.length).toBe(3)
      const union: Array<Entry> = []
      for (const part of parts.parts) {
        union.push(
          ...(await expectJson<Listing>(
            await svc.get(metadata(`/layers/places/changes?${q}&part=${encodeURIComponent(part)}`)),
            200
          )).partitions
        )
      }
      expect(new Set(union.map((e) => e.partition)).size).toBe(union.length)
      expect(canonical(union)).toEqual(canonical(full))
    })

    it("requires startVersion and refuses an endVersion above the latest", async () => {
      await expectDataError(await svc.get(metadata("/layers/places/changes")), 400, "startVersion")
      await expectDataError(
        await svc.get(metadata(`/layers/places/changes?startVersion=0&endVersion=${latest + 1}`)),
        400,
        "endVersion",
        `Invalid version: latest known version is ${latest}`
      )
      await expectDataError(
        await svc.get(metadata("/layers/places/changes?startVersion=6&endVersion=2")),
        400,
        "endVersion"
      )
    })
  })

  describe("volatile and stream layers", () => {
    it("lists a volatile layer without a version, every partition at version -1, with no next link for a small layer", async () => {
      const res = await svc.get(metadata("/layers/traffic/partitions?additionalFields=dataSize,checksum"))
      const raw = await res.text()
      expect(res.status).toBe(200)
      const body = JSON.parse(raw) as Listing
      expect(Object.keys(body)).toEqual(["partitions"])
      expect(body.partitions).toHaveLength(100)
      for (const e of body.partitions) {
        expect(e.version).toBe(-1)
        expect(e.layer).toBe("traffic")
        expect(e.dataHandle).not.toBe("")
      }
      // The latest data: the blob behind every handle is the one the checksum describes.
      for (const e of body.partitions.filter((_, i) => i % 7 === 0)) {
        const bytes = new Uint8Array(await (await svc.get(blobPath("traffic", e.dataHandle))).arrayBuffer())
        expect(sha1(bytes)).toBe(e.checksum)
        expect(JSON.parse(new TextDecoder().decode(bytes)).segment).toBe(`segment-${Number(e.partition.split("-")[1])}`)
      }
    })

    it("lists volatile changes since a time, and parts of a volatile layer", async () => {
      const all = (await expectJson<Listing>(await svc.get(metadata("/layers/traffic/partitions")), 200)).partitions
      const since0 =
        (await expectJson<Listing>(await svc.get(metadata("/layers/traffic/changes?sinceTime=0")), 200)).partitions
      expect(canonical(since0)).toEqual(canonical(all))
      const future = (await expectJson<Listing>(
        await svc.get(metadata(`/layers/traffic/changes?sinceTime=${Date.now() + 3_600_000}`)),
        200
      )).partitions
      expect(future).toEqual([])
    })

    it("refuses listings of a stream layer with 400", async () => {
      await expectDataError(await svc.get(metadata("/layers/events/partitions")), 400, "layer")
      await expectDataError(await svc.get(metadata("/layers/events/changes?startVersion=0")), 400, "layer")
    })
  })
})
