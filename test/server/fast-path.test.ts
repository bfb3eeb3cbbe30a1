/**
 * The lean path (src/server/FastPath.ts) serves blob reads and listings ahead of the router and must
 * answer exactly as the router does. A percent-encoded catalog segment means the same catalog to the
 * router but is never taken by the lean path, so every request here is sent both ways and the two
 * answers (status, headers, bytes; faults included) must be identical. Then: what the lean path caches
 * (tokens, access) follows grants, expiry, new versions, a raised minimum and a deleted layer at once.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { recognize } from "../../src/server/FastPath.ts"
import { type FaultOptions, noFaults } from "../../src/server/Faults.ts"
import { partitionEncoder } from "../../src/server/Listing.ts"
import {
  catalogBody,
  createCatalog,
  del,
  grant,
  layer,
  OTHER,
  pollStatus,
  publishInline,
  type StatusLinkBody
} from "../admin/helpers.ts"
import { startService, type TestService } from "../support/service.ts"
import {
  bearer,
  DEMO,
  type Entry,
  expectJson,
  expectStatus,
  listing,
  rawRequest,
  RESTRICTED,
  sleep
} from "./helpers.ts"

/** The same URL with the catalog segment's first character percent-encoded: only the router serves it. */
const viaRouter = (url: string) =>
  url.replace(
    /\/catalogs\/([^/]+)/,
    (_, catalog: string) => `/catalogs/%${catalog.charCodeAt(0).toString(16)}${catalog.slice(1)}`
  )

interface Answer {
  readonly status: number | "reset"
  readonly headers: Record<string, unknown>
  readonly body: string
  readonly complete: boolean
}

/** Everything a client can observe of one request on a fresh connection, but the Date header. */
const observe = async (url: string, headers: Record<string, string>, method = "GET"): Promise<Answer> => {
  try {
    const res = await rawRequest(url, headers, method)
    const { date: _date, ...rest } = res.headers
    return { status: res.status, headers: rest, body: res.body.toString("latin1"), complete: res.error === undefined }
  } catch (e) {
    expect(String((e as { code?: string }).code ?? e)).toMatch(/ECONNRESET|socket hang up/)
    return { status: "reset", headers: {}, body: "", complete: false }
  }
}

const blobPath = (catalog: string, layerId: string, handle: string, api = "blobstore") =>
  `/${api}/v1/catalogs/${catalog}/layers/${layerId}/data/${handle}`
const listPath = (catalog: string, layerId: string, rest: string) =>
  `/metadata/v1/catalogs/${catalog}/layers/${layerId}/${rest}`

describe("recognize", () => {
  const none = {}
  it("takes blob GET and HEAD (both APIs, region prefixes) and listing GETs with plain paths", () => {
    expect(recognize("GET", `${blobPath(DEMO, "places", "h-1")}?range=bytes=0-1`, none)).toEqual({
      kind: "blob",
      prefix: undefined,
      catalog: DEMO,
      layer: "places",
      handle: "h-1"
    })
    expect(recognize("HEAD", blobPath("demo", "places", "h-1", "blob"), none)?.kind).toBe("blob")
    expect(recognize("GET", `/regions/us-oregon${blobPath(DEMO, "places", "h-1")}`, none)?.prefix).toBe(
      "/regions/us-oregon"
    )
    expect(recognize("GET", listPath(DEMO, "places", "partitions?version=1"), none)?.kind).toBe("partitions")
    expect(recognize("GET", `/regions/eu-ireland${listPath(DEMO, "traffic", "changes")}`, none)?.kind).toBe("changes")
    expect(recognize("GET", blobPath(DEMO, "places", "h-1"), { "content-length": "0" })?.kind).toBe("blob")
  })

  it("leaves everything else to the router", () => {
    for (
      const [method, url, headers] of [
        ["PUT", blobPath(DEMO, "places", "h-1"), none],
        ["DELETE", blobPath(DEMO, "places", "h-1"), none],
        ["HEAD", listPath(DEMO, "places", "partitions"), none],
        ["GET", listPath(DEMO, "places", "partitions/parts"), none],
        ["GET", viaRouter(blobPath(DEMO, "places", "h-1")), none],
        ["GET", blobPath(DEMO, "places", "h%2D1"), none],
        ["GET", blobPath(DEMO, "places", "h-1;v=1"), none],
        ["GET", `${blobPath(DEMO, "places", "h-1")}/`, none],
        ["GET", blobPath(DEMO, "", "h-1"), none],
        ["GET", `/regions/ap-seoul${blobPath(DEMO, "places", "h-1")}`, none],
        ["GET", blobPath(DEMO, "places", "x".repeat(2049)), none],
        ["GET", blobPath(DEMO, "places", "h-1"), { "content-length": "2" }],
        ["GET", blobPath(DEMO, "places", "h-1"), { "transfer-encoding": "chunked" }]
      ] as const
    ) {
      expect(recognize(method, url, headers), `${method} ${url.slice(0, 120)}`).toBeUndefined()
    }
  })
})

describe("listing rows", () => {
  it("are the bytes JSON.stringify writes for the row's object, whatever the strings hold", () => {
    const strings = [
      "plain-1",
      "",
      "quote\"d",
      "back\\slash",
      "tab\tnew\nline\r\b\f",
      "\u0000\u001f\u007f",
      "é ü 中文",
      "emoji 😀",
      "lone \ud800 high",
      "lone \udfff low",
      "\u2028\u2029",
      "</script>"
    ]
    for (
      const [fields, fixedVersion] of [[["dataSize", "checksum", "crc", "compressedDataSize"], null], [[
        "crc",
        "dataSize"
      ], -1], [[], null]] as const
    ) {
      for (const s of strings) {
        const row = [s, 7, `h-${s}`, s, 1024, null, s === "" ? null : s] as const
        const object: Record<string, unknown> = {
          version: fixedVersion ?? 7,
          partition: s,
          layer: `layer ${s}`,
          dataHandle: `h-${s}`
        }
        const values: Record<string, unknown> = { dataSize: 1024, checksum: s, crc: row[6], compressedDataSize: null }
        for (const field of fields) if (values[field] !== null) object[field] = values[field]
        expect(partitionEncoder(`layer ${s}`, fields, fixedVersion)(row)).toBe(JSON.stringify(object))
      }
    }
  })
})

describe("lean path and router answer alike", () => {
  let svc: TestService
  let auth: Record<string, string>
  let places: ReadonlyArray<Entry>
  let tiles: ReadonlyArray<Entry>
  let latest: number

  /** Sends one request both ways, expects identical answers, and returns the answer. */
  const same = async (url: string, headers: Record<string, string> = auth, method = "GET", expected?: number) => {
    expect(recognize(method, url, headers), url).toBeDefined()
    expect(recognize(method, viaRouter(url), headers)).toBeUndefined()
    const lean = await observe(`${svc.url}${url}`, headers, method)
    const routed = await observe(`${svc.url}${viaRouter(url)}`, headers, method)
    expect(lean, `${method} ${url}`).toEqual(routed)
    if (expected !== undefined) expect(lean.status, `${method} ${url}: ${lean.body.slice(0, 300)}`).toBe(expected)
    return lean
  }

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 60, versions: 4 } })
    auth = bearer(await svc.token())
    latest =
      (await expectJson<{ version: number }>(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest`), 200))
        .version
    places = (await listing(svc, "places", `version=${latest}&additionalFields=dataSize,checksum`)).partitions
    tiles = (await listing(svc, "tiles", `version=${latest}`)).partitions
    await expectStatus(
      await svc.get(blobPath(DEMO, "places", "empty-blob"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: new Uint8Array(0)
      }),
      200
    )
  })
  afterAll(() => svc?.close())

  it("on blob reads: bytes, ranges, 304, 204, HEAD, gzip, both APIs, region prefixes", async () => {
    const handle = places[3]!.dataHandle
    const url = blobPath(DEMO, "places", handle)
    const full = await same(url, auth, "GET", 200)
    expect(full.body.length).toBe(places[3]!.dataSize)
    expect(full.headers).toMatchObject({
      "content-type": "application/json",
      "accept-ranges": "bytes",
      "content-length": String(places[3]!.dataSize)
    })
    for (const range of ["bytes=10-99", "bytes=-50", "bytes=100-", "bytes=0-999999"]) {
      await same(url, { ...auth, range }, "GET", 206)
    }
    await same(`${url}?range=${encodeURIComponent("bytes=20-29")}`, auth, "GET", 206)
    for (const range of ["bytes=999999-", "bytes=abc", "bytes=9-3", "bytes=-", "items=0-3"]) {
      await same(url, { ...auth, range }, "GET", 416)
    }
    await same(url, { ...auth, "if-none-match": String(full.headers.etag) }, "GET", 304)
    await same(url, { ...auth, "if-none-match": `"other"` }, "GET", 200)
    await same(url, auth, "HEAD", 200)
    await same(url, { ...auth, range: "bytes=0-9" }, "HEAD", 206)
    await same(blobPath(DEMO, "places", "empty-blob"), auth, "GET", 204)
    await same(blobPath(DEMO, "places", "empty-blob"), auth, "HEAD", 204)
    const gzip = await same(
      blobPath(DEMO, "tiles", tiles[0]!.dataHandle),
      { ...auth, "accept-encoding": "gzip" },
      "GET",
      200
    )
    expect(gzip.headers["content-encoding"]).toBe("gzip")
    await same(blobPath(DEMO, "places", handle, "blob"), auth, "GET", 200)
    await same(blobPath("demo", "places", handle), auth, "GET", 200)
    await same(`/regions/eu-ireland${url}`, auth, "GET", 200)
    // The demo catalog lives in eu-ireland only: in us-oregon it answers like a missing catalog.
    await same(`/regions/us-oregon${blobPath(DEMO, "places", handle, "blob")}`, auth, "HEAD", 403)
  })

  it("on blob read refusals: 400, 401, 403, 404", async () => {
    const handle = places[0]!.dataHandle
    await same(blobPath(DEMO, "places", "no-such-handle"), auth, "GET", 404)
    await same(blobPath(DEMO, "places", "no-such-handle"), auth, "HEAD", 404)
    await same(blobPath(DEMO, "tiles", handle), auth, "GET", 404)
    await same(blobPath(DEMO, "places", "bad_handle"), auth, "GET", 400)
    await same(blobPath(DEMO, "places", "x".repeat(601)), auth, "GET", 400)
    await same(blobPath(DEMO, "nowhere", handle), auth, "GET", 400)
    await same(blobPath(RESTRICTED, "private", "restricted-1"), auth, "GET", 403)
    await same(blobPath("hrn:local:data:::missing", "places", handle), auth, "GET", 403)
    await same(blobPath(DEMO, "places", handle), {}, "GET", 401)
    await same(blobPath(DEMO, "places", handle), { authorization: "Basic abc" }, "GET", 401)
    await same(blobPath(DEMO, "places", handle), bearer("lcs.not-a-token"), "GET", 401)
    await same(blobPath(DEMO, "places", handle), bearer("lcs.not-a-token"), "HEAD", 401)
  })

  it("on listings: versions, fields, parts, Range resumption, volatile and changes, refusals", async () => {
    const fields = "additionalFields=dataSize,checksum,crc,compressedDataSize"
    const full = await same(listPath(DEMO, "places", `partitions?version=${latest}&${fields}`), auth, "GET", 200)
    expect(JSON.parse(full.body).partitions).toHaveLength(places.length)
    expect(full.headers["content-type"]).toBe("application/json")
    await same(listPath(DEMO, "places", "partitions?version=0"), auth, "GET", 200)
    await same(
      listPath(DEMO, "tiles", `partitions?version=${latest}&additionalFields=compressedDataSize`),
      auth,
      "GET",
      200
    )
    await same(`/regions/eu-ireland${listPath(DEMO, "places", `partitions?version=${latest}`)}`, auth, "GET", 200)
    const parts = await expectJson<{ parts: ReadonlyArray<string> }>(
      await svc.get(listPath(DEMO, "places", "partitions/parts?numRequestedParts=3")),
      200
    )
    expect(parts.parts.length).toBeGreaterThan(1)
    for (const part of parts.parts) {
      await same(listPath(DEMO, "places", `partitions?version=${latest}&part=${part}&${fields}`), auth, "GET", 200)
    }
    const resumeAt = Math.floor(full.body.length / 3)
    await same(
      listPath(DEMO, "places", `partitions?version=${latest}&${fields}`),
      { ...auth, range: `bytes=${resumeAt}-` },
      "GET",
      206
    )
    await same(listPath(DEMO, "places", `partitions?version=${latest}&range=bytes%3D${resumeAt}-`), auth, "GET", 206)
    await same(
      listPath(DEMO, "places", `partitions?version=${latest}&${fields}`),
      { ...auth, range: `bytes=${full.body.length}-` },
      "GET",
      416
    )
    await same(listPath(DEMO, "places", `partitions?version=${latest}`), { ...auth, range: "bytes=0-10" }, "GET", 416)
    await same(listPath(DEMO, "traffic", "partitions?additionalFields=checksum"), auth, "GET", 200)
    await same(listPath(DEMO, "traffic", "changes?sinceTime=0"), auth, "GET", 200)
    await same(
      listPath(DEMO, "places", `changes?startVersion=0&endVersion=${latest}&additionalFields=dataSize`),
      auth,
      "GET",
      200
    )
    await same(listPath(DEMO, "places", "changes?startVersion=1"), auth, "GET", 200)
    await same(listPath(DEMO, "places", "changes"), auth, "GET", 400)
    await same(listPath(DEMO, "places", "partitions"), auth, "GET", 400)
    await same(listPath(DEMO, "places", `partitions?version=${latest + 1}`), auth, "GET", 400)
    await same(listPath(DEMO, "places", "partitions?version=x"), auth, "GET", 400)
    await same(listPath(DEMO, "places", `partitions?version=${latest}&additionalFields=colour`), auth, "GET", 400)
    await same(listPath(DEMO, "places", `partitions?version=${latest}&part=bm90LWEtcGFydA`), auth, "GET", 400)
    await same(listPath(DEMO, "events", "partitions"), auth, "GET", 400)
    await same(listPath(DEMO, "nowhere", "partitions?version=0"), auth, "GET", 400)
    await same(listPath(RESTRICTED, "private", "partitions?version=0"), auth, "GET", 403)
    await same(listPath(DEMO, "places", "partitions?version=0"), {}, "GET", 401)
  })
})

describe("faults on the lean path", () => {
  const mixed: Partial<FaultOptions> = {
    throttle: 0.15,
    unavailable: 0.1,
    reset: 0.15,
    truncate: 0.2,
    latencyMs: [1, 3],
    retryAfterSeconds: 3
  }
  let lean: TestService
  let routed: TestService
  beforeAll(async () => {
    ;[lean, routed] = await Promise.all([
      startService({ seed: { partitions: 20, versions: 2 }, faults: { ...noFaults, ...mixed, seed: 5 } }),
      startService({ seed: { partitions: 20, versions: 2 }, faults: { ...noFaults, ...mixed, seed: 5 } })
    ])
  })
  afterAll(async () => {
    await Promise.all([lean?.close(), routed?.close()])
  })

  it("hit it in the order and with the outcome they have on the router: same seed, same answers", async () => {
    // Tokens are spared; the listing that finds the handles is retried until it passes the faults.
    const auths = [bearer(await lean.token()), bearer(await routed.token())] as const
    let handles: ReadonlyArray<string> = []
    while (handles.length === 0) {
      const res = await observe(`${lean.url}${listPath(DEMO, "places", "partitions?version=0")}`, auths[0])
      if (res.status === 200 && res.complete) {
        handles = (JSON.parse(res.body).partitions as ReadonlyArray<Entry>).map((e) => e.dataHandle)
      }
      await observe(`${routed.url}${listPath(DEMO, "places", "partitions?version=0")}`, auths[1])
    }
    const requests = Array.from({ length: 60 }, (_, i) =>
      i % 4 === 3
        ? { method: "GET", url: listPath(DEMO, "places", "partitions?version=0&additionalFields=checksum") }
        : { method: i % 4 === 2 ? "HEAD" : "GET", url: blobPath(DEMO, "places", handles[i % handles.length]!) })
    const outcomes = { lean: [] as Array<Answer>, routed: [] as Array<Answer> }
    for (const { method, url } of requests) {
      expect(recognize(method, url, auths[0])).toBeDefined()
      outcomes.lean.push(await observe(`${lean.url}${url}`, auths[0], method))
      outcomes.routed.push(await observe(`${routed.url}${viaRouter(url)}`, auths[1], method))
    }
    expect(outcomes.lean).toEqual(outcomes.routed)
    const kinds = new Set(outcomes.lean.map((o) => (o.status === 200 && !o.complete ? "truncated" : String(o.status))))
    for (const kind of ["200", "429", "503", "reset", "truncated"]) expect(kinds, kind).toContain(kind)
    const throttled = outcomes.lean.find((o) => o.status === 429)!
    expect(throttled.headers["retry-after"]).toBe("3")
    expect(JSON.parse(throttled.body)).toEqual({ title: "Too Many Requests", status: 429 })
  })
})

describe("what the lean path caches follows every change", () => {
  let svc: TestService
  let dataDir: string
  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-fast-path-"))
    svc = await startService({ seed: { partitions: 20, versions: 2 }, dataDir })
  })
  afterAll(async () => {
    await svc?.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  const status = async (url: string, headers: Record<string, string>) => {
    expect(recognize("GET", url, headers)).toBeDefined()
    const res = await rawRequest(`${svc.url}${url}`, headers)
    return res.status
  }

  it("grants and revocations", async () => {
    const other = bearer(await svc.token(OTHER))
    const handle = (await listing(svc, "places", "version=0")).partitions[0]!.dataHandle
    const blobUrl = blobPath(DEMO, "places", handle)
    const listUrl = listPath(DEMO, "places", "partitions?version=0")
    expect(await status(blobUrl, other)).toBe(403)
    expect(await status(listUrl, other)).toBe(403)
    grant(dataDir, DEMO, OTHER, true, false)
    expect(await status(blobUrl, other)).toBe(200)
    expect(await status(listUrl, other)).toBe(200)
    grant(dataDir, DEMO, OTHER, false, false)
    expect(await status(blobUrl, other)).toBe(403)
    expect(await status(listUrl, other)).toBe(403)
  })

  it("token expiry", async () => {
    const short = bearer(await svc.token(undefined, 1))
    const url = listPath(DEMO, "places", "partitions?version=0")
    expect(await status(url, short)).toBe(200)
    await sleep(1100)
    const res = await rawRequest(`${svc.url}${url}`, short)
    expect(res.status).toBe(401)
    expect(JSON.parse(res.body.toString()).error_description).toMatch(/invalid time in token/)
  })

  it("a new version, a raised minimum, a deleted layer", async () => {
    const auth = bearer(await svc.token())
    const hrn = await createCatalog(svc, catalogBody("fast-path-changes", [layer("data", "versioned")]))
    await publishInline(svc, hrn, "data", { a: "first" })
    const at = (version: number) => listPath(hrn, "data", `partitions?version=${version}`)
    expect(await status(at(0), auth)).toBe(200)
    expect(await status(at(1), auth)).toBe(400)
    await publishInline(svc, hrn, "data", { a: "second" })
    expect(await status(at(1), auth)).toBe(200)
    const handle =
      (JSON.parse((await rawRequest(`${svc.url}${at(1)}`, auth)).body.toString()).partitions as ReadonlyArray<Entry>)[
        0
      ]!.dataHandle
    expect(await status(blobPath(hrn, "data", handle), auth)).toBe(200)

    await expectStatus(
      await svc.get(`/metadata/v1/catalogs/${hrn}/versions/minimum`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ version: 1 })
      }),
      204
    )
    expect(await status(at(0), auth)).toBe(400)
    expect(await status(at(1), auth)).toBe(200)

    const deletion = await expectJson<StatusLinkBody>(await del(svc, `/config/v1/catalogs/${hrn}/layers/data`), 202)
    await pollStatus(svc, deletion.href)
    expect(await status(at(1), auth)).toBe(400)
    expect(await status(blobPath(hrn, "data", handle), auth)).toBe(400)
  })
})
