/**
 * The service answers data reads from `Reads` (src/server/Reads.ts: prepared statements on a second,
 * read-only SQLite connection, shared by the lean path and the routes) and everything else from the
 * repositories (src/server/db/*) on the Effect SqlClient. Where both describe the same thing they must
 * agree: the versions the metadata API lists and the versions a listing serves, the partition counts
 * of a version and the partitions listed at it, the parts and the listing they split, the query API's
 * partitions and the listing's, and who may read a catalog (lookup's grant check and the data routes').
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { grant, OTHER } from "../admin/helpers.ts"
import { startService, type TestService } from "../support/service.ts"
import { bearer, DEMO, type Entry, expectJson, expectStatus, metadata, query, rawRequest } from "./helpers.ts"

interface VersionInfo {
  readonly version: number
  readonly partitionCounts?: Record<string, number>
}

const FIELDS = "additionalFields=dataSize,checksum,crc,compressedDataSize"

describe("Reads and the repositories agree", () => {
  let svc: TestService
  let dataDir: string
  let auth: Record<string, string>

  const status = async (url: string, headers = auth) => (await rawRequest(`${svc.url}${url}`, headers)).status
  const json = async <T>(url: string, headers = auth): Promise<T> => {
    const res = await rawRequest(`${svc.url}${url}`, headers)
    expect(res.status, `${url}: ${res.body.toString().slice(0, 300)}`).toBe(200)
    return JSON.parse(res.body.toString()) as T
  }
  const partitionsAt = async (layer: string, params: string) =>
    (await json<{ partitions: ReadonlyArray<Entry> }>(metadata(`/layers/${layer}/partitions?${params}`))).partitions
  const versions = async () =>
    (await json<{ versions: ReadonlyArray<VersionInfo> }>(metadata("/versions?startVersion=-1"))).versions

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-reads-"))
    svc = await startService({ seed: { partitions: 80, versions: 5 }, dataDir })
    auth = bearer(await svc.token())
  })
  afterAll(async () => {
    await svc?.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  it("the versions /versions, /versions/latest, /versions/minimum and /layerVersions know are the ones a listing serves, before and after a raised minimum", async () => {
    const check = async () => {
      const listed = (await versions()).map((v) => v.version)
      const latest = (await json<{ version: number }>(metadata("/versions/latest?startVersion=-1"))).version
      const minimum = (await json<{ version: number }>(metadata("/versions/minimum"))).version
      expect(listed).toEqual(Array.from({ length: latest - minimum + 1 }, (_, i) => minimum + i))
      for (let v = minimum - 2; v <= latest + 1; v++) {
        const known = listed.includes(v) ? 200 : 400
        expect(await status(metadata(`/layers/places/partitions?version=${v}`)), `listing at ${v}`).toBe(known)
        expect(await status(metadata(`/layerVersions?version=${v}`)), `layerVersions at ${v}`).toBe(known)
        expect(await status(query(`/layers/places/partitions?partition=1&version=${v}`)), `query at ${v}`).toBe(known)
      }
      return { minimum, latest }
    }
    const before = await check()
    expect(before.minimum).toBe(0)
    await expectStatus(
      await svc.get(metadata("/versions/minimum"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ version: 2 })
      }),
      204
    )
    expect(await check()).toEqual({ minimum: 2, latest: before.latest })
  })

  it("a version's partitionCounts are the partitions a listing at it returns", async () => {
    let compared = 0
    for (const info of await versions()) {
      for (const [layer, count] of Object.entries(info.partitionCounts ?? {})) {
        expect((await partitionsAt(layer, `version=${info.version}`)).length, `${layer} at ${info.version}`).toBe(count)
        compared++
      }
    }
    expect(compared).toBeGreaterThan(3)
  })

  it("the parts of a listing (ranked by the versions repository) cover it exactly once, in order", async () => {
    const latest = (await json<{ version: number }>(metadata("/versions/latest?startVersion=-1"))).version
    for (const [kind, params] of [["partitions", `version=${latest}`], ["changes", "startVersion=1"]] as const) {
      const whole = (await json<{ partitions: ReadonlyArray<Entry> }>(
        metadata(`/layers/places/${kind}?${params}&${FIELDS}`)
      )).partitions
      expect(whole.length, kind).toBeGreaterThan(5)
      for (const requested of [1, 2, 3, 7, 500]) {
        const { parts } = await json<{ parts: ReadonlyArray<string> }>(
          metadata(`/layers/places/${kind}/parts?numRequestedParts=${requested}&${params}`)
        )
        expect(parts.length, `${kind}: ${requested} parts`).toBeLessThanOrEqual(requested)
        const joined: Array<Entry> = []
        for (const part of parts) {
          joined.push(
            ...(await json<{ partitions: ReadonlyArray<Entry> }>(
              metadata(`/layers/places/${kind}?${params}&part=${part}&${FIELDS}`)
            )).partitions
          )
        }
        expect(joined, `${kind} in ${requested} parts`).toEqual(whole)
      }
    }
  })

  it("the query API answers for a set of ids what the listing holds for them", async () => {
    const latest = (await json<{ version: number }>(metadata("/versions/latest?startVersion=-1"))).version
    for (
      const [layer, kind, params] of [
        ["places", "partitions", `version=${latest}`],
        ["places", "partitions", "version=3"],
        ["places", "changes", `startVersion=2&endVersion=${latest}`],
        ["traffic", "partitions", ""],
        ["tiles", "partitions", `version=${latest}`]
      ] as const
    ) {
      const listed = (await json<{ partitions: ReadonlyArray<Entry> }>(
        metadata(`/layers/${layer}/${kind}?${params}&${FIELDS}`)
      )).partitions
      expect(listed.length, `${layer} ${kind} ${params}`).toBeGreaterThan(0)
      const ids = [...listed.filter((_, i) => i % 3 === 0).map((p) => p.partition), "no-such-partition"].slice(0, 100)
      const answered = (await json<{ partitions: ReadonlyArray<Entry> }>(
        query(
          `/layers/${layer}/${kind}?${
            ids.map((id) => `partition=${encodeURIComponent(id)}`).join("&")
          }&${params}&${FIELDS}`
        )
      )).partitions
      const byId = new Map(answered.map((p) => [p.partition, p]))
      expect(answered.length, `${layer} ${kind} ${params}`).toBe(ids.length - 1)
      for (const id of ids.slice(0, -1)) expect(byId.get(id)).toEqual(listed.find((p) => p.partition === id))
    }
  })

  it("who may read a catalog: lookup (the catalogs repository's grants) and the data routes (Reads) agree for every grant", async () => {
    const other = bearer(await svc.token(OTHER))
    const handle = (await partitionsAt("places", "version=2"))[0]!.dataHandle
    const reads = {
      lookup: `/lookup/v1/resources/${DEMO}/apis`,
      config: `/config/v1/catalogs/${DEMO}`,
      latest: metadata("/versions/latest?startVersion=-1"),
      listing: metadata("/layers/places/partitions?version=2"),
      blob: `/blobstore/v1/catalogs/${DEMO}/layers/places/data/${handle}`
    }
    const outcomes: Record<string, Record<string, number>> = {}
    for (
      const [name, read, write] of [
        ["no grant", false, false],
        ["read", true, false],
        ["write only", false, true],
        ["read and write", true, true],
        ["revoked", false, false]
      ] as const
    ) {
      if (name !== "no grant") grant(dataDir, DEMO, OTHER, read, write)
      const seen: Record<string, number> = {}
      for (const [what, url] of Object.entries(reads)) seen[what] = await status(url, other)
      outcomes[name] = seen
    }
    const allowed = { lookup: 200, config: 200, latest: 200, listing: 200, blob: 200 }
    const denied = { lookup: 404, config: 403, latest: 403, listing: 403, blob: 403 }
    expect(outcomes).toEqual({
      "no grant": denied,
      read: allowed,
      "write only": denied,
      "read and write": allowed,
      revoked: denied
    })
  })

  it("a blob the blobs repository holds is one a read serves, and only then", async () => {
    const url = `/blobstore/v1/catalogs/${DEMO}/layers/places/data/conformance-blob-1`
    const put = () => svc.get(url, { method: "PUT", headers: { "content-type": "application/json" }, body: `{"n":1}` })
    expect(await status(url)).toBe(404)
    await expectStatus(await put(), 200)
    expect(await status(url)).toBe(200)
    expect((await rawRequest(`${svc.url}${url}`, auth)).body.toString()).toBe(`{"n":1}`)
    // Blobs of a versioned layer are immutable: the repository knows it exists.
    const again = await put()
    expect(again.status).toBe(409)
    expect((await expectJson<{ status: number }>(again, 409)).status).toBe(409)
  })
})
