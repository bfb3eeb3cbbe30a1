/**
 * The blob hot path has two implementations: BlobFetcher (undici's dispatcher driven directly, no
 * Effect per blob) and the general stack under BlobApi.get (Http, Redirects, ErrorMapping, Retry,
 * ApiClient's token refresh, Bodies). Every case below is one scripted service (a node:http server
 * answering the blob path, plus a second origin to redirect to) and is run through both, each against
 * a fresh service, token endpoint and client. They must end alike: the same bytes or the same error,
 * the same requests on the wire (with the same Authorization), the same retries (reason and wait) and
 * the same number of tokens. Each case also pins what the outcome is, so both cannot drift together.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { createHash } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { BlobApi } from "../../src/client/BlobApi.ts"
import { ConcurrencyLimit } from "../../src/client/Concurrency.ts"
import {
  ApiError,
  AuthError,
  RegionUnavailable,
  RetryBudgetExhausted,
  TransportError
} from "../../src/client/Errors.ts"
import { outageLimit } from "../../src/client/Retry.ts"
import { CATALOG, CATALOG_ID, clientLayer, json, platformServer, testServer, tokenServer } from "./support.ts"

const BLOB = `/blobstore/v1/catalogs/${CATALOG_ID}/layers/roads/data`
const HANDLE = "h-1"
const CONTENT = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256))
const MAX_REDIRECTS = 3
const MAX_RETRIES = 3
/** Every wait is capped here: a Retry-After that was read waits exactly this long, a backoff (base 0) none. */
const MAX_DELAY_MS = 40

interface Exchange {
  /** How many requests this origin has had in this run, this one included. */
  readonly n: number
  /** The origins of the run, for Location headers. */
  readonly api: string
  readonly other: string
  readonly dead: string
}

type Script = (req: IncomingMessage, res: ServerResponse, exchange: Exchange) => void

interface Case {
  readonly name: string
  /** Answers the requests for the blob path (and any other path on the service's origin but lookup). */
  readonly api: Script
  /** Answers every request to the second origin. */
  readonly other?: Script
  /** The outage limit of a multi-region export around the fetch. */
  readonly outageLimit?: number
  /** What both must end with (a subset of the outcome). */
  readonly expected: Partial<Outcome>
}

interface Outcome {
  readonly result: { readonly bytes: string } | { readonly error: unknown }
  /** `<origin> <method> <path> <authorization>` per request, in order. */
  readonly requests: ReadonlyArray<string>
  /** `<reason> after <ms>` per retry. */
  readonly retries: ReadonlyArray<string>
  readonly tokens: number
}

// --- scripted answers --------------------------------------------------------------------------

const blob = (res: ServerResponse, headers: Record<string, string | number> = {}) =>
  void res.writeHead(200, { "content-type": "application/octet-stream", "content-length": CONTENT.length, ...headers })
    .end(CONTENT)

const redirect = (status: number, location: (e: Exchange) => string): Script => (_req, res, e) =>
  void res.writeHead(status, { location: location(e) }).end()

/** A failure `times` times, then the blob. */
const failing = (times: number, fail: Script): Script => (req, res, e) => e.n <= times ? fail(req, res, e) : blob(res)

const status =
  (code: number, body: unknown = { title: `status ${code}`, status: code }, headers = {}): Script => (_req, res) => {
    if (typeof body === "string") {
      return void res.writeHead(code, { "content-type": "text/plain", ...headers }).end(body)
    }
    json(res, code, body, headers)
  }

/** Headers promise the whole blob; half of it arrives, then the connection closes. */
const truncated: Script = (_req, res) => {
  res.writeHead(200, { "content-length": CONTENT.length })
  res.write(CONTENT.subarray(0, CONTENT.length / 2))
  setTimeout(() => res.socket?.destroy(), 20)
}

/** Chunked, without a length: part of the body, then the connection breaks before the last chunk. */
const cutChunked: Script = (_req, res) => {
  res.writeHead(200, { "content-type": "application/octet-stream" })
  res.write(CONTENT.subarray(0, 1000))
  setTimeout(() => res.socket?.destroy(), 20)
}

/** An error answer whose body is cut off (its headers promise more than arrives). */
const cutError = (code: number, headers: Record<string, string> = {}): Script => (_req, res) => {
  res.writeHead(code, { "content-type": "application/json", "content-length": 200, ...headers })
  res.write(`{"title":"cut`)
  setTimeout(() => res.socket?.destroy(), 20)
}

const reset: Script = (req) => void req.socket.destroy()

const SERVER_NOW = Date.UTC(2031, 4, 6, 7, 8, 9)
const httpDate = (ms: number) => new Date(ms).toUTCString()

// --- the cases ---------------------------------------------------------------------------------

/** Bytes as a short comparable text. */
const bytesOf = (bytes: Uint8Array) => `${bytes.length} bytes, sha1 ${createHash("sha1").update(bytes).digest("hex")}`

const ok = { result: { bytes: bytesOf(CONTENT) } }
const empty = { result: { bytes: bytesOf(new Uint8Array(0)) } }
const apiError = (code: number, fields: Record<string, unknown> = {}) => ({
  result: { error: expect.objectContaining({ _tag: "ApiError", status: code, ...fields }) }
})
const exhausted = (lastError: Record<string, unknown>) => ({
  result: {
    error: expect.objectContaining({
      _tag: "RetryBudgetExhausted",
      retries: MAX_RETRIES,
      lastError: expect.objectContaining(lastError)
    })
  }
})
const GET = (path: string, auth = "token-1", origin = "api") => `${origin} GET ${path} ${auth}`
const blobGet = (auth = "token-1") => GET(`${BLOB}/${HANDLE}`, auth)

const cases: ReadonlyArray<Case> = [
  // 2xx
  { name: "200 with Content-Length", api: (_req, res) => blob(res), expected: { ...ok, requests: [blobGet()] } },
  {
    name: "200 chunked, in several writes",
    api: (_req, res) => {
      res.writeHead(200)
      for (let i = 0; i < CONTENT.length; i += 700) res.write(CONTENT.subarray(i, i + 700))
      res.end()
    },
    expected: ok
  },
  { name: "200 with an empty body", api: (_req, res) => void res.writeHead(200).end(), expected: empty },
  { name: "204", api: (_req, res) => void res.writeHead(204).end(), expected: empty },
  {
    name: "206 (taken as the blob)",
    api: (_req, res) => blob(res, { "content-range": `bytes 0-${CONTENT.length - 1}/${CONTENT.length}` }),
    expected: ok
  },
  {
    name: "200 gzip-encoded: the bytes as stored, not decompressed",
    api: (_req, res) => blob(res, { "content-encoding": "gzip", "x-unknown-header": "tolerated" }),
    expected: ok
  },

  // redirects
  ...[301, 302, 303, 307, 308].map((code): Case => ({
    name: `${code} to the same origin keeps Authorization`,
    api: (req, res, e) =>
      req.url!.endsWith("/moved") ? blob(res) : redirect(code, (e) => `${e.api}${BLOB}/moved`)(req, res, e),
    expected: { ...ok, requests: [blobGet(), GET(`${BLOB}/moved`)] }
  })),
  ...[["absolute path", `${BLOB}/moved`, `${BLOB}/moved`], ["relative path", "moved", `${BLOB}/moved`], [
    "dot segments",
    "../data/moved?x=1",
    `${BLOB}/moved?x=1`
  ], ["query only", "?copy=2", `${BLOB}/${HANDLE}?copy=2`]].map(([what, location, path]): Case => ({
    name: `a relative Location (${what}) resolves against the request`,
    api: (req, res) => req.url === `${BLOB}/${HANDLE}` ? void res.writeHead(302, { location }).end() : blob(res),
    expected: { ...ok, requests: [blobGet(), GET(path!)] }
  })),
  {
    name: "307 to another origin drops Authorization there",
    api: redirect(307, (e) => `${e.other}/presigned/blob?sig=abc`),
    other: (_req, res) => blob(res),
    expected: { ...ok, requests: [blobGet(), GET("/presigned/blob?sig=abc", "none", "other")] }
  },
  {
    name: "a protocol-relative Location to another origin drops Authorization",
    api: redirect(302, (e) => `//${new URL(e.other).host}/elsewhere`),
    other: (_req, res) => blob(res),
    expected: { ...ok, requests: [blobGet(), GET("/elsewhere", "none", "other")] }
  },
  {
    name: "back to the service's origin after a detour elsewhere: still no Authorization",
    api: (req, res, e) =>
      req.url === `${BLOB}/${HANDLE}` ? redirect(302, (e) => `${e.other}/hop`)(req, res, e) : blob(res),
    other: redirect(302, (e) => `${e.api}${BLOB}/back`),
    expected: { ...ok, requests: [blobGet(), GET("/hop", "none", "other"), GET(`${BLOB}/back`, "none")] }
  },
  {
    name: "a redirect loop stops after maxRedirects",
    api: redirect(302, (e) => `${e.api}${BLOB}/${HANDLE}`),
    expected: {
      ...apiError(302, { title: "Too many redirects", detail: `more than ${MAX_REDIRECTS} redirects` }),
      requests: Array.from({ length: MAX_REDIRECTS + 1 }, () => blobGet())
    }
  },
  {
    name: "a loop across origins stops after maxRedirects",
    api: redirect(307, (e) => `${e.other}/loop`),
    other: redirect(307, (e) => `${e.api}${BLOB}/${HANDLE}`),
    expected: { ...apiError(307, { title: "Too many redirects" }), retries: [] }
  },
  {
    name: "a Location that is no URL",
    api: (_req, res) => void res.writeHead(302, { location: "http://[::1" }).end(),
    expected: { ...apiError(302, { title: "Invalid redirect" }), requests: [blobGet()] }
  },
  { name: "302 without Location is an error answer", api: status(302, ""), expected: apiError(302) },
  { name: "300 is not followed", api: redirect(300, (e) => `${e.api}/x`), expected: apiError(300) },
  {
    name: "304 is an error answer",
    api: (_req, res) => void res.writeHead(304, { etag: `"e"` }).end(),
    expected: apiError(304)
  },
  {
    name: "a redirect to an origin that refuses connections: retried from the start",
    api: redirect(307, (e) => `${e.dead}/gone`),
    expected: exhausted({ _tag: "TransportError", code: "ECONNREFUSED", retriable: true })
  },
  {
    name: "a redirect target that answers 503 once: retried from the start, with Authorization",
    api: redirect(307, (e) => `${e.other}/storage`),
    other: failing(1, status(503)),
    expected: {
      ...ok,
      requests: [blobGet(), GET("/storage", "none", "other"), blobGet(), GET("/storage", "none", "other")],
      retries: ["503 after 0"]
    }
  },
  {
    name: "a redirect target that answers 403 (an expired presigned URL)",
    api: redirect(307, (e) => `${e.other}/storage?X-Amz-Signature=s3cr3t`),
    other: status(403, "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"),
    expected: apiError(403)
  },
  {
    name: "a redirect target that answers 401 (it was sent no token)",
    api: redirect(307, (e) => `${e.other}/storage`),
    other: status(401, { error: "Unauthorized", error_description: "no credentials" }),
    expected: { ...apiError(401), requests: [blobGet(), GET("/storage", "none", "other")], tokens: 1 }
  },
  {
    name: "a 401 from the service's origin after a detour elsewhere renews the token (once)",
    api: (req, res, e) =>
      req.url === `${BLOB}/${HANDLE}` ? redirect(302, (e) => `${e.other}/hop`)(req, res, e) : status(401)(req, res, e),
    other: redirect(302, (e) => `${e.api}${BLOB}/back`),
    expected: {
      ...apiError(401),
      requests: [
        blobGet("token-1"),
        GET("/hop", "none", "other"),
        GET(`${BLOB}/back`, "none"),
        blobGet("token-2"),
        GET("/hop", "none", "other"),
        GET(`${BLOB}/back`, "none")
      ],
      tokens: 2
    }
  },

  // error answers
  {
    name: "400 in the metadata shape",
    api: status(400, {
      title: "Bad Request",
      status: 400,
      detail: [{ name: "dataHandle", error: "malformed data handle" }]
    }),
    expected: { ...apiError(400, { detail: "dataHandle: malformed data handle" }), retries: [] }
  },
  {
    name: "401 once: a new token, then the blob",
    api: (req, res, e) =>
      req.headers.authorization === "Bearer token-1"
        ? status(401, { error: "Unauthorized", error_description: "invalid time in token" })(req, res, e)
        : blob(res),
    expected: { ...ok, requests: [blobGet("token-1"), blobGet("token-2")], tokens: 2 }
  },
  {
    name: "401 always: one new token, then the 401",
    api: status(401, { error: "Unauthorized", error_description: "Token Validation Failure" }),
    expected: {
      ...apiError(401, { title: "Unauthorized", detail: "Token Validation Failure" }),
      requests: [blobGet("token-1"), blobGet("token-2")],
      tokens: 2
    }
  },
  {
    name: "401, then 503, then 401 with the new token: a retry may renew the token again",
    api: (req, res, e) =>
      e.n === 2
        ? status(503)(req, res, e)
        : e.n <= 3
        ? status(401, { error: "Unauthorized", error_description: "Token Validation Failure" })(req, res, e)
        : blob(res),
    expected: {
      ...ok,
      requests: [blobGet("token-1"), blobGet("token-2"), blobGet("token-2"), blobGet("token-3")],
      tokens: 3
    }
  },
  {
    name: "403: a token without access to the layer",
    api: status(403, {
      error: "Forbidden",
      error_description: "These credentials do not authorize access",
      newField: { tolerated: true }
    }),
    expected: { ...apiError(403, { title: "Forbidden" }), requests: [blobGet()], tokens: 1 }
  },
  {
    name: "404 with a correlation id in a header",
    api: status(404, { title: "Not Found", status: 404 }, { "x-correlation-id": "corr-9" }),
    expected: apiError(404, { correlationId: "corr-9" })
  },
  ...[409, 410, 418].map((code): Case => ({
    name: `${code} is final`,
    api: status(code),
    expected: { ...apiError(code), requests: [blobGet()] }
  })),
  {
    name: "416 with Content-Range",
    api: status(416, { title: "Range Not Satisfiable", status: 416 }, { "content-range": "bytes */3000" }),
    expected: apiError(416, { title: "Range Not Satisfiable" })
  },
  {
    name: "an error body that is plain text",
    api: status(403, "Forbidden - access to this catalog is forbidden"),
    expected: apiError(403, { title: "Forbidden - access to this catalog is forbidden" })
  },
  {
    name: "an error body that is broken JSON",
    api: (_req, res) => void res.writeHead(404, { "content-type": "application/json" }).end(`{"title": "Not Fo`),
    expected: apiError(404, { title: `{"title": "Not Fo` })
  },
  {
    name: "an error body of an unexpected shape",
    api: status(404, { errors: [{ message: "gone" }], code: 40401, extra: [1, 2] }),
    expected: apiError(404, { code: "40401" })
  },

  // transient statuses and Retry-After
  ...[408, 500, 502, 503, 504].map((code): Case => ({
    name: `${code} once, then the blob`,
    api: failing(1, code === 502 ? status(502, "<html><body>Bad Gateway</body></html>") : status(code)),
    expected: { ...ok, requests: [blobGet(), blobGet()], retries: [`${code} after 0`] }
  })),
  {
    name: "429 without Retry-After: backoff",
    api: failing(2, status(429, { title: "Too Many Requests", status: 429 })),
    expected: { ...ok, retries: ["429 after 0", "429 after 0"] }
  },
  {
    name: "429 with Retry-After in seconds",
    api: failing(1, status(429, { title: "Too Many Requests", status: 429 }, { "retry-after": "7" })),
    expected: { ...ok, retries: [`429 after ${MAX_DELAY_MS}`] }
  },
  {
    name: "429 with Retry-After as an HTTP date, measured on the server's Date",
    api: failing(
      1,
      status(429, { title: "Too Many Requests" }, {
        date: httpDate(SERVER_NOW),
        "retry-after": httpDate(SERVER_NOW + 30_000)
      })
    ),
    expected: { ...ok, retries: [`429 after ${MAX_DELAY_MS}`] }
  },
  {
    name: "503 with Retry-After as an HTTP date already past",
    api: failing(
      1,
      status(503, { title: "Service Unavailable" }, {
        date: httpDate(SERVER_NOW),
        "retry-after": httpDate(SERVER_NOW - 5_000)
      })
    ),
    expected: { ...ok, retries: ["503 after 0"] }
  },
  {
    name: "503 with a Retry-After that is neither",
    api: failing(1, status(503, { title: "Service Unavailable" }, { "retry-after": "soon" })),
    expected: { ...ok, retries: ["503 after 0"] }
  },
  {
    name: "the error of the last retry when the budget runs out (Retry-After kept)",
    api: status(503, { title: "Service Unavailable", status: 503 }, { "retry-after": "2" }),
    expected: {
      ...exhausted({ _tag: "ApiError", status: 503, retryAfterMs: 2000 }),
      requests: Array.from({ length: MAX_RETRIES + 1 }, () => blobGet())
    }
  },
  {
    name: "an outage limit gives up with RegionUnavailable after that many 5xx or resets in a row",
    outageLimit: 3,
    api: (req, res, e) => (e.n === 2 ? reset(req, res, e) : status(503)(req, res, e)),
    expected: {
      result: { error: expect.objectContaining({ _tag: "RegionUnavailable", failures: 3 }) },
      requests: [blobGet(), blobGet(), blobGet()]
    }
  },

  // no (complete) answer
  {
    name: "a reset before the answer, then the blob",
    api: failing(1, reset),
    expected: { ...ok, requests: [blobGet(), blobGet()] }
  },
  {
    name: "a body shorter than its Content-Length, then the blob",
    api: failing(1, truncated),
    expected: { ...ok, requests: [blobGet(), blobGet()] }
  },
  {
    name: "a chunked body cut mid-way, then the blob",
    api: failing(1, cutChunked),
    expected: { ...ok, requests: [blobGet(), blobGet()] }
  },
  {
    name: "a body cut every time",
    api: truncated,
    expected: exhausted({ _tag: "TransportError", retriable: true })
  },
  {
    name: "a 404 whose body is cut: the status decides",
    api: cutError(404),
    expected: { ...apiError(404), requests: [blobGet()] }
  },
  {
    name: "a 503 whose body is cut, then the blob",
    api: failing(1, cutError(503)),
    expected: { ...ok, requests: [blobGet(), blobGet()] }
  },
  {
    name: "a redirect whose body is cut is still followed",
    api: (req, res, e) =>
      req.url!.endsWith("/moved") ? blob(res) : cutError(302, { location: `${e.api}${BLOB}/moved` })(req, res, e),
    expected: { ...ok, requests: [blobGet(), GET(`${BLOB}/moved`)] }
  }
]

// --- running a case both ways ------------------------------------------------------------------

type Way = "general" | "fetcher"

const viaGeneral = Effect.flatMap(BlobApi, (api) => api.get(CATALOG, "roads", HANDLE))

const viaFetcher = Effect.scoped(Effect.gen(function*() {
  const done = yield* Deferred.make<Uint8Array, unknown>()
  const { fetcher } = yield* (yield* BlobApi).fetcher<{ readonly dataHandle: string }>(CATALOG, "roads", {
    limit: ConcurrencyLimit.fixed(1),
    onBlob: (_item, bytes) => Deferred.unsafeDone(done, Exit.succeed(Uint8Array.from(bytes))),
    onFailure: (error) => Deferred.unsafeDone(done, Exit.fail(error))
  })
  fetcher.push([{ dataHandle: HANDLE }], 0)
  return yield* Deferred.await(done)
}))

/** An error as the user and the retry policy see it, with the run's origins named. */
const described = (error: unknown, name: (text: string) => string): unknown => {
  if (error instanceof ApiError) {
    return {
      _tag: error._tag,
      status: error.status,
      method: error.method,
      url: name(error.url),
      title: error.title,
      detail: error.detail,
      code: error.code,
      correlationId: error.correlationId,
      retryAfterMs: error.retryAfterMs,
      message: name(error.message)
    }
  }
  if (error instanceof TransportError) {
    return {
      _tag: error._tag,
      method: error.method,
      url: name(error.url),
      code: error.code,
      retriable: error.retriable
    }
  }
  if (error instanceof RetryBudgetExhausted) {
    return {
      _tag: error._tag,
      url: name(error.url),
      retries: error.retries,
      lastError: described(error.lastError, name)
    }
  }
  if (error instanceof RegionUnavailable) {
    return {
      _tag: error._tag,
      url: name(error.url),
      failures: error.failures,
      lastError: described(error.lastError, name)
    }
  }
  if (error instanceof AuthError) return { _tag: error._tag, status: error.status, reason: error.reason }
  return { unexpected: String(error) }
}

/** Runs one case one way, against its own service, second origin, token endpoint and client. */
const run = (c: Case, way: Way) =>
  Effect.gen(function*() {
    const requests: Array<string> = []
    const retries: Array<string> = []
    const counts = { api: 0, other: 0 }
    const origins = { api: "", other: "", dead: "" }
    const record = (origin: "api" | "other", req: IncomingMessage) =>
      requests.push(
        `${origin} ${req.method} ${req.url} ${req.headers.authorization?.replace(/^Bearer /, "") ?? "none"}`
      )
    const exchange = (origin: "api" | "other"): Exchange => ({ n: ++counts[origin], ...origins })

    const dead = yield* Effect.scoped(testServer(() => {}))
    const other = yield* testServer((req, res) => {
      record("other", req)
      ;(c.other ?? status(500, "unexpected"))(req, res, exchange("other"))
    })
    // The platform answers lookup itself; everything else on its origin is the case's.
    const api = yield* platformServer((_url, req, res) => {
      record("api", req)
      c.api(req, res, exchange("api"))
    })
    Object.assign(origins, { api: api.origin, other: other.origin, dead: dead.origin })
    const tokens = yield* tokenServer()

    // Every retry's line (the first of its kind at info level, the others at debug) carries its fields.
    const retryLog = Logger.make(({ annotations }) => {
      const value = (key: string) => Option.getOrUndefined(HashMap.get(annotations, key))
      if (value("delayMs") === undefined) return
      retries.push(`${String(value("failure")).replace(/ \(.*\)$/, "")} after ${String(value("delayMs"))}`)
    })
    const client = clientLayer(tokens.tokenUrl, `${api.origin}/lookup/v1`, {
      retry: { baseDelay: 0, maxDelay: MAX_DELAY_MS, maxRetries: MAX_RETRIES, maxElapsed: "20 seconds" },
      maxRedirects: MAX_REDIRECTS
    })
    const fetch = way === "general" ? viaGeneral : viaFetcher
    const exit = yield* Effect.exit(
      (c.outageLimit === undefined ? fetch : Effect.locally(fetch, outageLimit, c.outageLimit)).pipe(
        Effect.provide(client),
        // Locally, not as a layer: the fetcher logs through the runtime it captured, which must hold
        // this run's logger only (a Logger layer provided here was still installed in the next run).
        Effect.locallyWith(FiberRef.currentLoggers, HashSet.add(retryLog)),
        Logger.withMinimumLogLevel(LogLevel.Debug)
      )
    )
    const name = (text: string) =>
      text.replaceAll(api.origin, "<api>").replaceAll(other.origin, "<other>").replaceAll(dead.origin, "<dead>")
    const outcome: Outcome = {
      result: Exit.isSuccess(exit)
        ? { bytes: bytesOf(exit.value) }
        : { error: exit.cause._tag === "Fail" ? described(exit.cause.error, name) : String(exit.cause) },
      requests: requests.map(name),
      retries: retries.map((r) => r.replace(/127\.0\.0\.1:\d+/g, "<port>")),
      tokens: tokens.issued()
    }
    return outcome
  }).pipe(Effect.scoped)

describe("BlobFetcher and the general client (BlobApi.get) conform", () => {
  it.live("the cases have distinct names", () =>
    Effect.sync(() => expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length)))

  for (const c of cases) {
    it.live(c.name, () =>
      Effect.gen(function*() {
        const [general, fetcher] = yield* Effect.all([run(c, "general"), run(c, "fetcher")], { concurrency: 2 })
        expect(fetcher, "BlobFetcher vs the general client").toEqual(general)
        expect(general).toMatchObject(c.expected)
      }))
  }
})
