import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { inspect } from "node:util"
import { readText } from "../../src/client/Bodies.ts"
import { ApiError, RegionUnavailable, RetryBudgetExhausted, TransportError } from "../../src/client/Errors.ts"
import { Http } from "../../src/client/Http.ts"
import type { HttpOptionsShape } from "../../src/client/HttpOptions.ts"
import { outageLimit, type RetryPolicyShape, RetryTally } from "../../src/client/Retry.ts"
import * as Metrics from "../../src/telemetry/Metrics.ts"
import { json, testServer } from "./support.ts"

const stack = (retry: Partial<RetryPolicyShape> = {}, http: Partial<HttpOptionsShape> = {}) =>
  Http.layerUndici({
    retry: { baseDelay: 1, maxDelay: 60_000, maxRetries: 5, maxElapsed: "5 minutes", ...retry },
    http: { connectTimeout: "2 seconds", firstByteTimeout: "10 seconds", idleTimeout: "10 seconds", ...http }
  })

const getText = (url: string) =>
  Effect.gen(function*() {
    const http = yield* Http
    return yield* http.retrying(Effect.flatMap(http.send(HttpClientRequest.get(url)), readText))
  })

/** Counts the retries of the requests `effect` makes, by reason, as an export's counters do. */
const tallied = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  const byReason: Record<string, number> = {}
  return {
    byReason,
    effect: Effect.provideService(effect, RetryTally, {
      retried: (reason) => void (byReason[reason] = (byReason[reason] ?? 0) + 1)
    })
  }
}

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a failure, got ${String(exit.value)}`)
  if (exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit.cause)}`)
  return exit.cause.error
}

/** Real time passes while the forked request reaches its first sleep on the TestClock. */
const untilSleeping = Effect.gen(function*() {
  for (let i = 0; i < 500; i++) {
    const sleeps = yield* TestClock.sleeps()
    if (Chunk.size(sleeps) > 0) return Chunk.toReadonlyArray(sleeps)
    yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
  }
  throw new Error("the request never slept")
})

describe("Http retries", () => {
  it.scoped("retries 429, 503 and a reset connection, then succeeds; counts the retries in the metric and the export's tally", () =>
    Effect.gen(function*() {
      let n = 0
      const server = yield* testServer((req, res) => {
        n++
        if (n === 1) return json(res, 429, { title: "Too Many Requests", status: 429 })
        if (n === 2) return json(res, 503, { title: "Service Unavailable", status: 503 })
        if (n === 3) {
          req.socket.destroy()
          return
        }
        json(res, 200, { ok: true })
      })
      const before = yield* Metrics.retriesSoFar
      const tally = tallied(getText(`${server.origin}/x`))
      const fiber = yield* Effect.fork(tally.effect)
      // jittered waits of at most 1, 2 and 4 ms on the TestClock
      while (fiber.unsafePoll() === null) {
        yield* TestClock.adjust("10 millis")
        yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
      }
      expect(yield* Fiber.join(fiber)).toBe(`{"ok":true}`)
      expect(server.requests).toHaveLength(4)
      expect((yield* Metrics.retriesSoFar) - before).toBe(3)
      expect(tally.byReason).toMatchObject({ "429": 1, "503": 1 })
      expect(Object.values(tally.byReason).reduce((a, b) => a + b)).toBe(3)
    }).pipe(Effect.provide(stack())))

  it.scopedLive("with an outage limit (a multi-region export), gives up after that many 5xx or resets in a row; a 429 starts the count again", () =>
    Effect.gen(function*() {
      // 503, reset, 429, reset, 503, reset, ...
      const server = yield* testServer((req, res) => {
        const n = server.requests.length
        if (n === 3) return json(res, 429, { title: "Too Many Requests", status: 429 })
        if (n % 2 === 0) return void req.socket.destroy()
        json(res, 503, { title: "Service Unavailable", status: 503 })
      })
      const limited = failureOf(yield* Effect.exit(Effect.locally(getText(`${server.origin}/x`), outageLimit, 3)))
      expect(limited).toBeInstanceOf(RegionUnavailable)
      expect((limited as RegionUnavailable).failures).toBe(3)
      expect((limited as RegionUnavailable).lastError).toBeInstanceOf(TransportError)
      expect((limited as RegionUnavailable).message).toMatch(/failed 3 times in a row .*looks unavailable/)
      expect(server.requests).toHaveLength(6)
      // Without it, the retry budget decides.
      server.requests.length = 0
      expect(failureOf(yield* Effect.exit(getText(`${server.origin}/x`)))).toBeInstanceOf(RetryBudgetExhausted)
      expect(server.requests).toHaveLength(6)
    }).pipe(Effect.provide(stack({ maxRetries: 5 }))))

  it.scopedLive("does not retry 400, 401, 403 or 404", () =>
    Effect.gen(function*() {
      const before = yield* Metrics.retriesSoFar
      for (const status of [400, 401, 403, 404]) {
        const server = yield* testServer((_req, res) => json(res, status, { title: "No", status }))
        const error = failureOf(yield* Effect.exit(getText(`${server.origin}/x`)))
        expect(error).toBeInstanceOf(ApiError)
        expect((error as ApiError).status).toBe(status)
        expect(server.requests).toHaveLength(1)
      }
      expect((yield* Metrics.retriesSoFar) - before).toBe(0)
    }).pipe(Effect.provide(stack())))

  it.scoped("waits the seconds of Retry-After", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => {
        if (server.requests.length === 1) return json(res, 429, { title: "slow down" }, { "retry-after": "30" })
        json(res, 200, "done")
      })
      const fiber = yield* Effect.fork(getText(`${server.origin}/x`))
      expect(yield* untilSleeping).toEqual([30_000])
      yield* TestClock.adjust("29 seconds")
      expect(server.requests).toHaveLength(1)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(fiber)).toBe(`"done"`)
      expect(server.requests).toHaveLength(2)
    }).pipe(Effect.provide(stack())))

  it.scoped("waits until the HTTP date of Retry-After, measured on the server's Date", () =>
    Effect.gen(function*() {
      const serverNow = Date.UTC(2030, 0, 1, 12, 0, 0)
      const server = yield* testServer((_req, res) => {
        if (server.requests.length === 1) {
          return json(res, 503, { title: "busy" }, {
            date: new Date(serverNow).toUTCString(),
            "retry-after": new Date(serverNow + 45_000).toUTCString()
          })
        }
        json(res, 200, "done")
      })
      const fiber = yield* Effect.fork(getText(`${server.origin}/x`))
      expect(yield* untilSleeping).toEqual([45_000])
      yield* TestClock.adjust("45 seconds")
      expect(yield* Fiber.join(fiber)).toBe(`"done"`)
    }).pipe(Effect.provide(stack())))

  it.scoped("caps a long Retry-After at maxDelay", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => {
        if (server.requests.length === 1) return json(res, 429, {}, { "retry-after": "86400" })
        json(res, 200, "done")
      })
      const fiber = yield* Effect.fork(getText(`${server.origin}/x`))
      expect(yield* untilSleeping).toEqual([60_000])
      yield* TestClock.adjust("60 seconds")
      expect(yield* Fiber.join(fiber)).toBe(`"done"`)
    }).pipe(Effect.provide(stack())))

  it.scopedLive("fails with RetryBudgetExhausted after maxRetries", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => json(res, 503, { title: "Service Unavailable", status: 503 }))
      const error = failureOf(yield* Effect.exit(getText(`${server.origin}/always-503`)))
      expect(error).toBeInstanceOf(RetryBudgetExhausted)
      const exhausted = error as RetryBudgetExhausted
      expect(exhausted.retries).toBe(3)
      expect(exhausted.lastError).toBeInstanceOf(ApiError)
      expect(exhausted.message).toContain("/always-503")
      expect(exhausted.message).toContain("after 3 retries")
      expect(server.requests).toHaveLength(4)
    }).pipe(Effect.provide(stack({ maxRetries: 3 }))))

  it.scopedLive("fails at once when the wait would pass maxElapsed", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => json(res, 429, {}, { "retry-after": "5" }))
      const error = failureOf(yield* Effect.exit(getText(`${server.origin}/x`)))
      expect(error).toBeInstanceOf(RetryBudgetExhausted)
      expect((error as RetryBudgetExhausted).retries).toBe(0)
      expect(server.requests).toHaveLength(1)
    }).pipe(Effect.provide(stack({ maxElapsed: "1 second" }))))

  it.scopedLive("a refused connection is a retriable TransportError", () =>
    Effect.gen(function*() {
      // a port that was just in use and is free now
      const gone = yield* Effect.scoped(testServer((_req, res) => json(res, 200, {})))
      const error = failureOf(yield* Effect.exit(getText(`${gone.origin}/x`)))
      expect(error).toBeInstanceOf(RetryBudgetExhausted)
      expect((error as RetryBudgetExhausted).retries).toBe(2)
      const last = (error as RetryBudgetExhausted).lastError
      expect(last).toBeInstanceOf(TransportError)
      expect((last as TransportError).code).toBe("ECONNREFUSED")
      expect(last.message).toContain(`${gone.origin}/x`)
    }).pipe(Effect.provide(stack({ maxRetries: 2 }))))

  it.scopedLive("a server that never answers hits the first-byte timeout", () =>
    Effect.gen(function*() {
      const server = yield* testServer(() => {
        /* never answers */
      })
      const error = failureOf(yield* Effect.exit(getText(`${server.origin}/x`)))
      expect(error).toBeInstanceOf(RetryBudgetExhausted)
      expect(((error as RetryBudgetExhausted).lastError as TransportError).code).toBe("UND_ERR_HEADERS_TIMEOUT")
      expect(server.requests).toHaveLength(2)
    }).pipe(Effect.provide(stack({ maxRetries: 1 }, { firstByteTimeout: "300 millis" }))))

  it.scopedLive("a body that stalls hits the idle timeout as a retriable TransportError", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => {
        res.writeHead(200, { "content-length": "100" })
        res.write("partial")
      })
      const error = failureOf(yield* Effect.exit(getText(`${server.origin}/x`)))
      expect(error).toBeInstanceOf(RetryBudgetExhausted)
      expect(((error as RetryBudgetExhausted).lastError as TransportError).code).toBe("UND_ERR_BODY_TIMEOUT")
      expect(server.requests).toHaveLength(2)
    }).pipe(Effect.provide(stack({ maxRetries: 1 }, { idleTimeout: "300 millis" }))))

  it.scopedLive("keeps connections alive across requests", () =>
    Effect.gen(function*() {
      const ports = new Set<number>()
      const server = yield* testServer((req, res) => {
        ports.add(req.socket.remotePort!)
        json(res, 200, {})
      })
      for (let i = 0; i < 10; i++) yield* getText(`${server.origin}/x`)
      // undici may open a second socket while the first is being released; never one per request
      expect(ports.size).toBeLessThanOrEqual(2)
    }).pipe(Effect.provide(stack())))
})

describe("Http redirects", () => {
  const send = (request: HttpClientRequest.HttpClientRequest) =>
    Effect.gen(function*() {
      const http = yield* Http
      return yield* Effect.flatMap(http.send(request), readText)
    })

  it.scopedLive("same origin keeps Authorization; another origin drops it", () =>
    Effect.gen(function*() {
      const other = yield* testServer((req, res) => json(res, 200, { auth: req.headers["authorization"] ?? null }))
      const server = yield* testServer((req, res) => {
        if (req.url === "/start") return void res.writeHead(302, { location: "/same" }).end()
        if (req.url === "/same") return void res.writeHead(307, { location: `${other.origin}/elsewhere` }).end()
        json(res, 500, {})
      })
      const body = yield* send(
        HttpClientRequest.get(`${server.origin}/start`).pipe(HttpClientRequest.bearerToken("tok-secret"))
      )
      expect(JSON.parse(body)).toEqual({ auth: null })
      expect(server.requests.map((r) => [r.url, r.headers["authorization"]])).toEqual([
        ["/start", "Bearer tok-secret"],
        ["/same", "Bearer tok-secret"]
      ])
      expect(other.requests[0]!.headers["authorization"]).toBeUndefined()
    }).pipe(Effect.provide(stack())))

  it.scopedLive("303 turns POST into GET without a body; 307 and 308 keep method and body; 301/302 POST become GET", () =>
    Effect.gen(function*() {
      const server = yield* testServer((req, res, body) => {
        const code = /^\/r(\d+)$/.exec(req.url ?? "")
        if (code) return void res.writeHead(Number(code[1]), { location: "/target" }).end()
        json(res, 200, { method: req.method, body, type: req.headers["content-type"] ?? null })
      })
      const post = (path: string) =>
        send(HttpClientRequest.post(`${server.origin}${path}`).pipe(HttpClientRequest.bodyUnsafeJson({ a: 1 }))).pipe(
          Effect.map((text) => JSON.parse(text))
        )
      expect(yield* post("/r303")).toEqual({ method: "GET", body: "", type: null })
      expect(yield* post("/r301")).toEqual({ method: "GET", body: "", type: null })
      expect(yield* post("/r302")).toEqual({ method: "GET", body: "", type: null })
      expect(yield* post("/r307")).toEqual({ method: "POST", body: `{"a":1}`, type: "application/json" })
      expect(yield* post("/r308")).toEqual({ method: "POST", body: `{"a":1}`, type: "application/json" })
    }).pipe(Effect.provide(stack())))

  it.scopedLive("stops after maxRedirects", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) => void res.writeHead(302, { location: "/again" }).end())
      const error = failureOf(yield* Effect.exit(send(HttpClientRequest.get(`${server.origin}/again`))))
      expect(error).toBeInstanceOf(ApiError)
      expect((error as ApiError).title).toBe("Too many redirects")
      expect(server.requests).toHaveLength(4)
    }).pipe(Effect.provide(Http.layerUndici({ http: { maxRedirects: 3 } }))))
})

describe("Http errors", () => {
  const shapes: ReadonlyArray<[string, string, Record<string, string | undefined>]> = [
    [
      "metadata/query/lookup",
      JSON.stringify({
        title: "Bad Request",
        status: 400,
        detail: [{ name: "version", error: "Invalid version: latest known version is 4" }]
      }),
      { title: "Bad Request", detail: "version: Invalid version: latest known version is 4" }
    ],
    [
      "stream",
      JSON.stringify({
        title: "Bad Request",
        status: 400,
        code: "E213016",
        cause: "bad offset",
        action: "fix it",
        correlationId: "corr-1"
      }),
      { title: "Bad Request", detail: "bad offset", code: "E213016", correlationId: "corr-1" }
    ],
    [
      "gateway",
      JSON.stringify({ error: "Unauthorized", error_description: "Token Validation Failure - invalid time in token" }),
      { title: "Unauthorized", detail: "Token Validation Failure - invalid time in token" }
    ],
    [
      "account",
      JSON.stringify({
        errorId: "ERROR-abc",
        httpStatus: 400,
        errorCode: 400200,
        message: "Invalid data",
        errorFields: [{ name: "grantType", errorCode: 1, message: "missing" }]
      }),
      { title: "Invalid data", code: "400200", correlationId: "ERROR-abc" }
    ],
    [
      "lookup OAS",
      JSON.stringify({ code: 404, message: "Resource not Found", description: "Requested resource not found" }),
      { title: "Resource not Found", detail: "Requested resource not found", code: "404" }
    ],
    [
      "plain text",
      "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden",
      {
        title: "Forbidden - A catalog with the specified HRN doesn't exist or access to this catalog is forbidden",
        detail: undefined
      }
    ],
    ["empty", "", { title: undefined, detail: undefined }]
  ]

  it.scopedLive("every error body shape parses to title/detail/code", () =>
    Effect.gen(function*() {
      for (const [name, body, expected] of shapes) {
        const server = yield* testServer((_req, res) => {
          res.writeHead(400, { "content-type": "application/json" })
          res.end(body)
        })
        const error = failureOf(yield* Effect.exit(getText(`${server.origin}/layers/x`)))
        expect(error, name).toBeInstanceOf(ApiError)
        const apiError = error as ApiError
        expect(apiError.status, name).toBe(400)
        expect(apiError.method).toBe("GET")
        expect(apiError.url).toBe(`${server.origin}/layers/x`)
        for (const [key, value] of Object.entries(expected)) {
          expect(apiError[key as keyof ApiError], `${name}.${key}`).toBe(value)
        }
        if (expected.title !== undefined) expect(apiError.message).toContain(expected.title)
      }
    }).pipe(Effect.provide(stack())))

  it.scopedLive("takes the correlation id from X-Correlation-Id when the body has none", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) =>
        json(res, 404, { title: "Not Found", status: 404 }, { "x-correlation-id": "hdr-42" })
      )
      const error = failureOf(yield* Effect.exit(getText(`${server.origin}/x`))) as ApiError
      expect(error.correlationId).toBe("hdr-42")
      expect(error.message).toContain("hdr-42")
    }).pipe(Effect.provide(stack())))

  it.scopedLive("errors carry no token and no secret query values", () =>
    Effect.gen(function*() {
      const server = yield* testServer((_req, res) =>
        json(res, 403, { error: "Forbidden", error_description: "no access" })
      )
      const http = yield* Http
      const request = HttpClientRequest.get(`${server.origin}/data/h`).pipe(
        HttpClientRequest.setUrlParams({ partition: "p1", apiKey: "KEY-123", "X-Amz-Signature": "SIG-456" }),
        HttpClientRequest.bearerToken("TOKEN-789")
      )
      const error = failureOf(yield* Effect.exit(http.send(request))) as ApiError
      for (const shown of [error.message, String(error), JSON.stringify(error), inspect(error)]) {
        expect(shown).not.toContain("KEY-123")
        expect(shown).not.toContain("SIG-456")
        expect(shown).not.toContain("TOKEN-789")
      }
      expect(error.url).toContain("partition=p1")
    }).pipe(Effect.provide(stack())))
})
