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

/**
 * One request both ways and what both must answer. The service, tokens and the data the rows refer to
 * are set up once (`Setup`); each row is a request the lean path takes (and its percent-encoded twin
 * does not), the status both must answer, and optionally more to check in the (identical) answer.
 */
interface Row {
  readonly name: string
  readonly method?: "GET" | "HEAD"
  readonly url: (s: Setup) => string
  /** Default: the demo application's bearer token. */
  readonly headers?: (s: Setup) => Record<string, string>
  readonly status: number
  readonly check?: (answer: Answer, s: Setup) => void
}

interface Setup {
  readonly auth: Record<string, string>
  /** A token of an application that may not read the demo catalog. */
  readonly stranger: Record<string, string>
  /** A token of the demo application that has expired. */
  readonly expired: Record<string, string>
  readonly latest: number
  readonly places: ReadonlyArray<Entry>
  readonly tiles: ReadonlyArray<Entry>
  readonly traffic: ReadonlyArray<Entry>
  /** A places blob: its URL, size and ETag. */
  readonly blob: { readonly url: string; readonly size: number; readonly etag: string }
  /** Bytes of the full places listing with every additional field. */
  readonly listingLength: number
  readonly parts: ReadonlyArray<string>
}

const FIELDS = "additionalFields=dataSize,checksum,crc,compressedDataSize"
const places = (s: Setup, query: string) => listPath(DEMO, "places", `partitions?version=${s.latest}${query}`)
const withAuth = (extra: Record<string, string>) => (s: Setup) => ({ ...s.auth, ...extra })

/** Authorization headers, good and bad, for blobs and listings alike. */
const authorizations: ReadonlyArray<Pick<Row, "name" | "status"> & Required<Pick<Row, "headers">>> = [
  { name: "no Authorization", headers: () => ({}), status: 401 },
  { name: "Basic credentials", headers: () => ({ authorization: "Basic abc" }), status: 401 },
  { name: "an unknown token", headers: () => bearer("lcs.not-a-token"), status: 401 },
  { name: "Bearer without a token", headers: () => ({ authorization: "Bearer" }), status: 401 },
  { name: "Bearer and a space", headers: () => ({ authorization: "Bearer " }), status: 401 },
  {
    name: "the scheme in lower case",
    headers: (s) => ({ authorization: s.auth.authorization!.replace("Bearer", "bearer") }),
    status: 200
  },
  {
    name: "two spaces after Bearer",
    headers: (s) => ({ authorization: s.auth.authorization!.replace("Bearer ", "Bearer  ") }),
    status: 200
  },
  { name: "a space after the token", headers: (s) => ({ authorization: `${s.auth.authorization!} ` }), status: 200 },
  { name: "an expired token", headers: (s) => s.expired, status: 401 }
]

const blobRows: ReadonlyArray<Row> = [
  {
    name: "a blob",
    url: (s) => s.blob.url,
    status: 200,
    check: (a, s) => {
      expect(a.body.length).toBe(s.blob.size)
      expect(a.headers).toMatchObject({
        "content-type": "application/json",
        "accept-ranges": "bytes",
        "content-length": String(s.blob.size),
        etag: s.blob.etag
      })
    }
  },
  ...["bytes=10-99", "bytes=-50", "bytes=100-", "bytes=0-999999", "bytes=0-0", "bytes=-1", " bytes=1-2 "].map((
    range
  ): Row => ({
    name: `Range ${JSON.stringify(range)}`,
    url: (s) => s.blob.url,
    headers: withAuth({ range }),
    status: 206,
    check: (a) => expect(a.headers["content-range"]).toMatch(/^bytes \d+-\d+\/\d+$/)
  })),
  {
    name: "a range as a query parameter",
    url: (s) => `${s.blob.url}?range=${encodeURIComponent("bytes=20-29")}`,
    status: 206,
    check: (a) => expect(a.body.length).toBe(10)
  },
  {
    name: "the Range header wins over the query parameter",
    url: (s) => `${s.blob.url}?range=${encodeURIComponent("bytes=20-29")}`,
    headers: withAuth({ range: "bytes=0-4" }),
    status: 206,
    check: (a) => expect(a.body.length).toBe(5)
  },
  ...["bytes=999999-", "bytes=abc", "bytes=9-3", "bytes=-", "items=0-3", "bytes=0-1,5-6", "bytes = 1-2"].map((
    range
  ): Row => ({
    name: `Range ${JSON.stringify(range)} is not satisfiable`,
    url: (s) => s.blob.url,
    headers: withAuth({ range }),
    status: 416
  })),
  {
    name: "If-None-Match with the ETag",
    url: (s) => s.blob.url,
    headers: (s) => ({ ...s.auth, "if-none-match": s.blob.etag }),
    status: 304,
    check: (a) => expect(a.body).toBe("")
  },
  ...[`"other"`, "*", "W/"].map((tag): Row => ({
    name: `If-None-Match ${tag}${tag === "W/" ? "<the ETag>" : ""}`,
    url: (s) => s.blob.url,
    headers: (s) => ({ ...s.auth, "if-none-match": tag === "W/" ? `W/${s.blob.etag}` : tag }),
    status: 200
  })),
  {
    name: "If-None-Match with the ETag and a Range",
    url: (s) => s.blob.url,
    headers: (s) => ({ ...s.auth, "if-none-match": s.blob.etag, range: "bytes=0-9" }),
    status: 304
  },
  { name: "HEAD of a blob", method: "HEAD", url: (s) => s.blob.url, status: 200 },
  {
    name: "HEAD with a Range",
    method: "HEAD",
    url: (s) => s.blob.url,
    headers: withAuth({ range: "bytes=0-9" }),
    status: 206
  },
  { name: "an empty blob", url: () => blobPath(DEMO, "places", "empty-blob"), status: 204 },
  { name: "HEAD of an empty blob", method: "HEAD", url: () => blobPath(DEMO, "places", "empty-blob"), status: 204 },
  {
    name: "an empty blob with a Range",
    url: () => blobPath(DEMO, "places", "empty-blob"),
    headers: withAuth({ range: "bytes=0-9" }),
    status: 204
  },
  ...[{}, { "accept-encoding": "identity" }].map((asked): Row => ({
    name: `a gzip blob, ${Object.keys(asked).length === 0 ? "no Accept-Encoding" : "Accept-Encoding identity"}`,
    url: (s) => blobPath(DEMO, "tiles", s.tiles[0]!.dataHandle),
    headers: withAuth(asked),
    status: 200,
    check: (a) => expect(a.headers["content-encoding"]).toBe("gzip")
  })),
  {
    name: "a volatile blob",
    url: (s) => blobPath(DEMO, "traffic", s.traffic[0]!.dataHandle),
    status: 200
  },
  { name: "the legacy /blob/v1 path", url: (s) => s.blob.url.replace("/blobstore/", "/blob/"), status: 200 },
  { name: "the catalog's bare id", url: (s) => s.blob.url.replace(DEMO, "demo"), status: 200 },
  { name: "a region prefix", url: (s) => `/regions/eu-ireland${s.blob.url}`, status: 200 },
  {
    name: "unknown query parameters (an SDK's sentWith, a billing tag)",
    url: (s) => `${s.blob.url}?sentWith=OLP-TS-SDK-1.0&billingTag=team-a`,
    status: 200
  },
  // The demo catalog lives in eu-ireland only: in us-oregon it answers like a missing catalog.
  {
    name: "a region the catalog is not in",
    method: "HEAD",
    url: (s) => `/regions/us-oregon${s.blob.url.replace("/blobstore/", "/blob/")}`,
    status: 403
  }
]

const blobRefusals: ReadonlyArray<Row> = [
  { name: "an unknown handle", url: () => blobPath(DEMO, "places", "no-such-handle"), status: 404 },
  {
    name: "HEAD of an unknown handle",
    method: "HEAD",
    url: () => blobPath(DEMO, "places", "no-such-handle"),
    status: 404
  },
  { name: "a handle of another layer", url: (s) => blobPath(DEMO, "tiles", s.places[0]!.dataHandle), status: 404 },
  { name: "a malformed handle", url: () => blobPath(DEMO, "places", "bad_handle"), status: 400 },
  { name: "a handle over 600 characters", url: () => blobPath(DEMO, "places", "x".repeat(601)), status: 400 },
  { name: "an unknown layer", url: (s) => blobPath(DEMO, "nowhere", s.places[0]!.dataHandle), status: 400 },
  {
    name: "a catalog the application may not read",
    url: () => blobPath(RESTRICTED, "private", "restricted-1"),
    status: 403
  },
  {
    name: "a catalog that does not exist",
    url: (s) => blobPath("hrn:local:data:::missing", "places", s.places[0]!.dataHandle),
    status: 403
  },
  { name: "a token without access to the layer", url: (s) => s.blob.url, headers: (s) => s.stranger, status: 403 },
  {
    name: "HEAD with a token without access to the layer",
    method: "HEAD",
    url: (s) => s.blob.url,
    headers: (s) => s.stranger,
    status: 403
  },
  ...authorizations.map(({ name, headers, status }): Row => ({
    name: `${name} (blob)`,
    url: (s) => s.blob.url,
    headers,
    status
  })),
  {
    name: "HEAD with an unknown token",
    method: "HEAD",
    url: (s) => s.blob.url,
    headers: () => bearer("lcs.not-a-token"),
    status: 401
  }
]

const listingRows: ReadonlyArray<Row> = [
  {
    name: "the latest version with every additional field",
    url: (s) => places(s, `&${FIELDS}`),
    status: 200,
    check: (a, s) => {
      expect(JSON.parse(a.body).partitions).toHaveLength(s.places.length)
      expect(a.headers["content-type"]).toBe("application/json")
    }
  },
  { name: "version 0", url: () => listPath(DEMO, "places", "partitions?version=0"), status: 200 },
  {
    name: "a heretile layer",
    url: (s) => listPath(DEMO, "tiles", `partitions?version=${s.latest}&additionalFields=compressedDataSize`),
    status: 200
  },
  { name: "a region prefix", url: (s) => `/regions/eu-ireland${places(s, "")}`, status: 200 },
  ...[0, 1, 2].map((i): Row => ({
    name: `part ${i + 1} of those /partitions/parts gives`,
    url: (s) => places(s, `&part=${s.parts[i]!}&${FIELDS}`),
    status: 200
  })),
  {
    name: "the rest from a Range offset",
    url: (s) => places(s, `&${FIELDS}`),
    headers: (s) => ({ ...s.auth, range: `bytes=${Math.floor(s.listingLength / 3)}-` }),
    status: 206
  },
  {
    name: "the rest from a range query parameter",
    url: (s) => places(s, `&range=bytes%3D${Math.floor(s.listingLength / 3)}-&${FIELDS}`),
    status: 206
  },
  {
    name: "a Range offset at the end of the listing",
    url: (s) => places(s, `&${FIELDS}`),
    headers: (s) => ({ ...s.auth, range: `bytes=${s.listingLength}-` }),
    status: 416
  },
  { name: "a closed Range", url: (s) => places(s, ""), headers: withAuth({ range: "bytes=0-10" }), status: 416 },
  {
    name: "a volatile layer",
    url: () => listPath(DEMO, "traffic", "partitions?additionalFields=checksum"),
    status: 200
  },
  {
    name: "a volatile layer given a version",
    url: () => listPath(DEMO, "traffic", "partitions?version=3"),
    status: 200
  },
  { name: "a volatile layer's changes", url: () => listPath(DEMO, "traffic", "changes?sinceTime=0"), status: 200 },
  {
    name: "a volatile layer's changes without sinceTime",
    url: () => listPath(DEMO, "traffic", "changes"),
    status: 200
  },
  {
    name: "changes over every version",
    url: (s) => listPath(DEMO, "places", `changes?startVersion=0&endVersion=${s.latest}&additionalFields=dataSize`),
    status: 200
  },
  { name: "changes from version 1 on", url: () => listPath(DEMO, "places", "changes?startVersion=1"), status: 200 },
  {
    name: "changes from before the first version",
    url: () => listPath(DEMO, "places", "changes?startVersion=-1"),
    status: 200
  },
  {
    name: "changes from a Range offset",
    url: () => listPath(DEMO, "places", "changes?startVersion=0"),
    headers: withAuth({ range: "bytes=100-" }),
    status: 206
  },
  // query strings as SDKs and people write them
  ...[
    ["%31", 200],
    ["01", 200],
    ["-0", 200],
    ["1&version=2", 200],
    ["+1", 400],
    ["%201", 400],
    ["1.0", 400],
    ["1e0", 400],
    ["0x1", 400],
    ["99999999999999999999", 400],
    ["", 400],
    ["%ZZ", 400]
  ].map(([version, status]): Row => ({
    name: `version=${String(version)}`,
    url: () => listPath(DEMO, "places", `partitions?version=${String(version)}`),
    status: Number(status)
  })),
  { name: "VERSION=1 is not version", url: () => listPath(DEMO, "places", "partitions?VERSION=1"), status: 400 },
  { name: "version without a value", url: () => listPath(DEMO, "places", "partitions?version"), status: 400 },
  ...[
    ["dataSize%2Cchecksum", 200],
    ["dataSize&additionalFields=crc", 200],
    ["%20dataSize%20,%20crc", 200],
    ["", 200],
    ["dataSize,,checksum", 200],
    ["DataSize", 400],
    ["colour", 400],
    ["%E0%A4%A", 400]
  ].map(([fields, status]): Row => ({
    name: `additionalFields=${String(fields)}`,
    url: (s) => places(s, `&additionalFields=${String(fields)}`),
    status: Number(status)
  })),
  {
    name: "unknown query parameters (an SDK's sentWith, a billing tag, a context)",
    url: (s) => places(s, "&sentWith=OLP-TS-SDK-1.0&billingTag=team-a&context=default"),
    status: 200
  }
]

const listingRefusals: ReadonlyArray<Row> = [
  { name: "changes without startVersion", url: () => listPath(DEMO, "places", "changes"), status: 400 },
  { name: "changes with startVersion=x", url: () => listPath(DEMO, "places", "changes?startVersion=x"), status: 400 },
  {
    name: "changes beyond the latest version",
    url: (s) => listPath(DEMO, "places", `changes?startVersion=0&endVersion=${s.latest + 1}`),
    status: 400
  },
  {
    name: "changes ending before they start",
    url: () => listPath(DEMO, "places", "changes?startVersion=2&endVersion=1"),
    status: 400
  },
  {
    name: "a volatile layer's changes with sinceTime=x",
    url: () => listPath(DEMO, "traffic", "changes?sinceTime=x"),
    status: 400
  },
  { name: "a versioned layer without version", url: () => listPath(DEMO, "places", "partitions"), status: 400 },
  {
    name: "a version after the latest",
    url: (s) => listPath(DEMO, "places", `partitions?version=${s.latest + 1}`),
    status: 400
  },
  { name: "version=x", url: () => listPath(DEMO, "places", "partitions?version=x"), status: 400 },
  { name: "a part id from nowhere", url: (s) => places(s, "&part=bm90LWEtcGFydA"), status: 400 },
  { name: "a stream layer", url: () => listPath(DEMO, "events", "partitions"), status: 400 },
  { name: "an unknown layer", url: () => listPath(DEMO, "nowhere", "partitions?version=0"), status: 400 },
  {
    name: "a catalog the application may not read",
    url: () => listPath(RESTRICTED, "private", "partitions?version=0"),
    status: 403
  },
  {
    name: "a catalog that does not exist",
    url: () => listPath("hrn:local:data:::missing", "places", "partitions?version=0"),
    status: 403
  },
  { name: "a token without access to the layer", url: (s) => places(s, ""), headers: (s) => s.stranger, status: 403 },
  ...authorizations.map(({ name, headers, status }): Row => ({
    name: `${name} (listing)`,
    url: (s) => places(s, ""),
    headers,
    status
  }))
]

describe("lean path and router answer alike", () => {
  let svc: TestService
  let setup: Setup

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 60, versions: 4 } })
    const auth = bearer(await svc.token())
    const expired = bearer(await svc.token(undefined, 1))
    const latest =
      (await expectJson<{ version: number }>(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest`), 200))
        .version
    const placesNow = (await listing(svc, "places", `version=${latest}&additionalFields=dataSize,checksum`)).partitions
    await expectStatus(
      await svc.get(blobPath(DEMO, "places", "empty-blob"), {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: new Uint8Array(0)
      }),
      200
    )
    const url = blobPath(DEMO, "places", placesNow[3]!.dataHandle)
    const full = await rawRequest(`${svc.url}${url}`, auth)
    const parts = await expectJson<{ parts: ReadonlyArray<string> }>(
      await svc.get(listPath(DEMO, "places", "partitions/parts?numRequestedParts=3")),
      200
    )
    expect(parts.parts).toHaveLength(3)
    const fullListing = await rawRequest(
      `${svc.url}${listPath(DEMO, "places", `partitions?version=${latest}&${FIELDS}`)}`,
      auth
    )
    setup = {
      auth,
      stranger: bearer(await svc.token(OTHER)),
      expired,
      latest,
      places: placesNow,
      tiles: (await listing(svc, "tiles", `version=${latest}`)).partitions,
      traffic: (await listing(svc, "traffic", "")).partitions,
      blob: { url, size: placesNow[3]!.dataSize!, etag: String(full.headers.etag) },
      listingLength: fullListing.body.length,
      parts: parts.parts
    }
    // The expired token's second has passed.
    await sleep(1100)
  })
  afterAll(() => svc?.close())

  const tables = {
    "blob reads": blobRows,
    "blob refusals": blobRefusals,
    listings: listingRows,
    "listing refusals": listingRefusals
  }
  for (const [group, rows] of Object.entries(tables)) {
    describe(group, () => {
      it("have distinct names", () => expect(new Set(rows.map((r) => r.name)).size).toBe(rows.length))
      for (const row of rows) {
        it(row.name, async () => {
          const method = row.method ?? "GET"
          const url = row.url(setup)
          const headers = row.headers?.(setup) ?? setup.auth
          expect(recognize(method, url, headers), "the lean path takes it").toBeDefined()
          expect(recognize(method, viaRouter(url), headers), "the router takes its twin").toBeUndefined()
          const lean = await observe(`${svc.url}${url}`, headers, method)
          const routed = await observe(`${svc.url}${viaRouter(url)}`, headers, method)
          expect(lean, "the lean path vs the router").toEqual(routed)
          expect(lean.status, lean.body.slice(0, 300)).toBe(row.status)
          row.check?.(lean, setup)
        })
      }
    })
  }
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
