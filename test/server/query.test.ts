/**
 * The query API over HTTP: partitions by id (repeated or comma-joined), limits, versions, and
 * changes by id, all checked against the metadata API's full listings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"
import {
  byId,
  canonical,
  type Entry,
  expectDataError,
  expectJson,
  type Listing,
  listing,
  metadata,
  query
} from "./helpers.ts"

describe("query API", () => {
  let svc: TestService
  let latest: number
  const at = new Map<number, ReadonlyArray<Entry>>()

  const byIds = async (params: string, layer = "places") =>
    (await expectJson<Listing>(await svc.get(query(`/layers/${layer}/partitions?${params}`)), 200)).partitions

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 200, versions: 6 } })
    latest =
      (await expectJson<{ version: number }>(await svc.get(metadata("/versions/latest?startVersion=-1")), 200)).version
    for (let v = 0; v <= latest; v++) {
      at.set(v, (await listing(svc, "places", `version=${v}&additionalFields=dataSize,checksum`)).partitions)
    }
  })
  afterAll(() => svc?.close())

  it("returns the requested partitions, by repeated partition= and by comma-joined ids alike", async () => {
    const entries = at.get(3)!
    const pick = [entries[0]!, entries[17]!, entries[entries.length - 1]!]
    const repeated = await byIds(
      `version=3&additionalFields=dataSize,checksum&${pick.map((e) => `partition=${e.partition}`).join("&")}`
    )
    expect(canonical(repeated)).toEqual(canonical(pick))
    const joined = await byIds(
      `version=3&additionalFields=dataSize,checksum&partition=${pick.map((e) => e.partition).join(",")}`
    )
    expect(canonical(joined)).toEqual(canonical(pick))
    const mixed = await byIds(
      `version=3&additionalFields=dataSize,checksum&partition=${pick[0]!.partition},${pick[1]!.partition}&partition=${
        pick[2]!.partition
      }`
    )
    expect(canonical(mixed)).toEqual(canonical(pick))
    // Without additionalFields the entries carry the four base fields only.
    const plain = await byIds(`version=3&partition=${pick[0]!.partition}`)
    expect(plain).toEqual([{
      version: pick[0]!.version,
      partition: pick[0]!.partition,
      layer: "places",
      dataHandle: pick[0]!.dataHandle
    }])
  })

  it("accepts 1 and 100 ids and refuses 0 and 101 with 400", async () => {
    const ids = at.get(latest)!.map((e) => e.partition)
    expect(ids.length).toBeGreaterThanOrEqual(101)
    const hundred = await byIds(`version=${latest}&${ids.slice(0, 100).map((id) => `partition=${id}`).join("&")}`)
    expect(hundred.map((e) => e.partition).sort()).toEqual(ids.slice(0, 100).sort())
    expect(await byIds(`version=${latest}&partition=${ids[5]}`)).toHaveLength(1)
    await expectDataError(
      await svc.get(
        query(
          `/layers/places/partitions?version=${latest}&${ids.slice(0, 101).map((id) => `partition=${id}`).join("&")}`
        )
      ),
      400,
      "partition"
    )
    await expectDataError(
      await svc.get(query(`/layers/places/partitions?version=${latest}&partition=${ids.slice(0, 101).join(",")}`)),
      400,
      "partition"
    )
    await expectDataError(await svc.get(query(`/layers/places/partitions?version=${latest}`)), 400, "partition")
    await expectDataError(
      await svc.get(query(`/layers/places/partitions?version=${latest}&partition=`)),
      400,
      "partition"
    )
  })

  it("omits unknown ids silently", async () => {
    const known = at.get(latest)![3]!
    const found = await byIds(
      `version=${latest}&additionalFields=dataSize,checksum&partition=no-such-partition&partition=${known.partition}&partition=place-9999999`
    )
    expect(found).toEqual([known])
    expect(await byIds(`version=${latest}&partition=no-such-partition`)).toEqual([])
  })

  it("answers at the requested version, and at the latest without one", async () => {
    const first = byId(at.get(0)!)
    const last = byId(at.get(latest)!)
    const changed = [...last.values()].filter((e) =>
      first.has(e.partition) && first.get(e.partition)!.dataHandle !== e.dataHandle
    ).slice(0, 5)
    expect(changed.length).toBeGreaterThan(0)
    const ids = changed.map((e) => `partition=${e.partition}`).join("&")
    for (const v of [0, 2, latest]) {
      const expected = changed.map((e) => byId(at.get(v)!).get(e.partition)).filter((e): e is Entry => e !== undefined)
      expect(canonical(await byIds(`version=${v}&additionalFields=dataSize,checksum&${ids}`))).toEqual(
        canonical(expected)
      )
    }
    expect(canonical(await byIds(`additionalFields=dataSize,checksum&${ids}`))).toEqual(canonical(changed))
    await expectDataError(
      await svc.get(query(`/layers/places/partitions?version=${latest + 1}&${ids}`)),
      400,
      "version",
      `Invalid version: latest known version is ${latest}`
    )
  })

  it("omits a partition at versions where it is deleted", async () => {
    let found: { id: string; live: number; gone: number } | undefined
    for (let v = 1; v <= latest && found === undefined; v++) {
      const now = byId(at.get(v)!)
      const gone = at.get(v - 1)!.find((e) => !now.has(e.partition))
      if (gone !== undefined) found = { id: gone.partition, live: v - 1, gone: v }
    }
    expect(found).toBeDefined()
    expect((await byIds(`version=${found!.live}&partition=${found!.id}`)).map((e) => e.partition)).toEqual([found!.id])
    expect(await byIds(`version=${found!.gone}&partition=${found!.id}`)).toEqual([])
  })

  it("answers volatile ids at version -1 and refuses an unknown layer", async () => {
    const traffic = (await listing(svc, "traffic", "additionalFields=checksum")).partitions
    const pick = traffic.slice(10, 13)
    const got = await byIds(`additionalFields=checksum&partition=${pick.map((e) => e.partition).join(",")}`, "traffic")
    expect(canonical(got)).toEqual(canonical(pick))
    for (const e of got) expect(e.version).toBe(-1)
    await expectDataError(await svc.get(query("/layers/nope/partitions?partition=a")), 400, "layer")
  })

  it("lists changes by id as the matching subset of the metadata changes listing", async () => {
    const all = (await expectJson<Listing>(
      await svc.get(metadata(`/layers/places/changes?startVersion=1&endVersion=${latest}&additionalFields=checksum`)),
      200
    ))
      .partitions
    expect(all.some((e) => e.dataHandle === "")).toBe(true)
    const deletion = all.find((e) => e.dataHandle === "")!
    const pick = [all[0]!, deletion, all[all.length - 1]!]
    const unchanged = at.get(latest)!.find((e) => e.version <= 1)
    const ids = [...pick.map((e) => e.partition), ...(unchanged ? [unchanged.partition] : [])].join(",")
    const got = (await expectJson<Listing>(
      await svc.get(
        query(`/layers/places/changes?startVersion=1&endVersion=${latest}&additionalFields=checksum&partition=${ids}`)
      ),
      200
    )).partitions
    expect(canonical(got)).toEqual(canonical([...new Map(pick.map((e) => [e.partition, e])).values()]))
  })
})
