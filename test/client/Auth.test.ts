import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, it } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { inspect } from "node:util"
import { ApiClient } from "../../src/client/ApiClient.ts"
import { Auth } from "../../src/client/Auth.ts"
import * as DataClient from "../../src/client/DataClient.ts"
import { ApiError, AuthError } from "../../src/client/Errors.ts"
import { clientLayer, credentialsFor, json, SECRET, testServer, tokenServer, verifySignature } from "./support.ts"

const Ok = Schema.Struct({ ok: Schema.Boolean })

/** A data endpoint answering {ok:true} to the given bearer tokens and 401 to others. */
const dataServer = (accepted: (token: string) => boolean = () => true) =>
  testServer((req, res) => {
    const token = /^Bearer (.+)$/.exec(req.headers["authorization"] ?? "")?.[1] ?? ""
    if (!accepted(token)) {
      return json(res, 401, {
        error: "Unauthorized",
        error_description: "Token Validation Failure - invalid time in token"
      })
    }
    json(res, 200, { ok: true })
  })

const getOk = (url: string) => Effect.flatMap(ApiClient, (api) => api.json(HttpClientRequest.get(url), Ok))

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

describe("Auth", () => {
  it.scopedLive("signs the token request with HMAC-SHA256 over the OAuth base string and key `secret&`", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer()
      const data = yield* dataServer((t) => t === "token-1")
      const result = yield* getOk(`${data.origin}/x`).pipe(
        Effect.provide(
          DataClient.layer({
            lookupUrl: `${data.origin}/lookup/v1`,
            credentials: { ...credentialsFor(tokens.tokenUrl), scope: "hrn:here:authorization::org:project/p" }
          })
        )
      )
      expect(result).toEqual({ ok: true })
      expect(tokens.requests).toHaveLength(1)
      const request = tokens.requests[0]!
      expect(verifySignature(request, tokens.tokenUrl).ok).toBe(true)
      // the same header does not verify under the percent-encoded secret
      expect(verifySignature(request, tokens.tokenUrl, encodeURIComponent(SECRET)).ok).toBe(false)
      expect(request.headers["content-type"]).toBe("application/json")
      expect(JSON.parse(request.body)).toEqual({
        grantType: "client_credentials",
        expiresIn: 3600,
        scope: "hrn:here:authorization::org:project/p"
      })
      expect(request.headers["authorization"]).toMatch(
        /^OAuth oauth_consumer_key="test-key-id",oauth_nonce="[0-9a-f]{32}",oauth_signature_method="HMAC-SHA256",oauth_timestamp="\d+",oauth_version="1.0",oauth_signature="[^"]+"$/
      )
      expect(data.requests[0]!.headers["authorization"]).toBe("Bearer token-1")
    }))

  it.scopedLive("accepts snake_case token responses", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer({ snakeCase: true })
      const data = yield* dataServer((t) => t === "token-1")
      expect(yield* getOk(`${data.origin}/x`).pipe(Effect.provide(clientLayer(tokens.tokenUrl, data.origin)))).toEqual({
        ok: true
      })
    }))

  it.scopedLive("20 concurrent requests share one token request", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer({ delayMs: 100 })
      const data = yield* dataServer()
      const results = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => getOk(`${data.origin}/x/${i}`)),
        { concurrency: "unbounded" }
      ).pipe(Effect.provide(clientLayer(tokens.tokenUrl, data.origin, { concurrency: 20 })))
      expect(results).toHaveLength(20)
      expect(tokens.requests).toHaveLength(1)
      expect(new Set(data.requests.map((r) => r.headers["authorization"]))).toEqual(new Set(["Bearer token-1"]))
    }))

  it.scopedLive("a 401 from a data endpoint refreshes the token once and retries the request once", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer()
      const data = yield* dataServer((t) => t !== "token-1")
      expect(yield* getOk(`${data.origin}/x`).pipe(Effect.provide(clientLayer(tokens.tokenUrl, data.origin)))).toEqual({
        ok: true
      })
      expect(tokens.requests).toHaveLength(2)
      expect(data.requests.map((r) => r.headers["authorization"])).toEqual(["Bearer token-1", "Bearer token-2"])
    }))

  it.scopedLive("a second 401 is final", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer()
      const data = yield* dataServer(() => false)
      const error = failureOf(
        yield* Effect.exit(getOk(`${data.origin}/x`).pipe(Effect.provide(clientLayer(tokens.tokenUrl, data.origin))))
      )
      expect(error).toBeInstanceOf(ApiError)
      expect((error as ApiError).status).toBe(401)
      expect((error as ApiError).detail).toBe("Token Validation Failure - invalid time in token")
      expect(data.requests).toHaveLength(2)
      expect(tokens.requests).toHaveLength(2)
      for (const shown of [String(error), JSON.stringify(error), inspect(error)]) expect(shown).not.toContain("token-")
    }))

  it.scopedLive("401204 (timestamp outside the window) re-signs with the server's Date and succeeds", () =>
    Effect.gen(function*() {
      const offset = 2 * 3600_000
      const tokens = yield* tokenServer({ clockOffsetMs: offset, windowSeconds: 600 })
      const data = yield* dataServer((t) => t === "token-1")
      expect(yield* getOk(`${data.origin}/x`).pipe(Effect.provide(clientLayer(tokens.tokenUrl, data.origin)))).toEqual({
        ok: true
      })
      expect(tokens.requests).toHaveLength(2)
      const [first, second] = tokens.requests.map((r) => verifySignature(r, tokens.tokenUrl))
      expect(first!.ok && second!.ok).toBe(true)
      const serverSeconds = (Date.now() + offset) / 1000
      expect(Math.abs(first!.timestamp - serverSeconds)).toBeGreaterThan(3600)
      expect(Math.abs(second!.timestamp - serverSeconds)).toBeLessThan(60)
    }))

  it.scopedLive("refused credentials fail with AuthError at once, without the secret", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer()
      const data = yield* dataServer()
      const layer = DataClient.layer({
        lookupUrl: data.origin,
        credentials: { ...credentialsFor(tokens.tokenUrl), accessKeySecret: Redacted.make("wrong-secret") }
      })
      const error = failureOf(yield* Effect.exit(getOk(`${data.origin}/x`).pipe(Effect.provide(layer))))
      expect(error).toBeInstanceOf(AuthError)
      const auth = error as AuthError
      expect(auth.status).toBe(401)
      expect(auth.code).toBe("401300")
      expect(auth.message).toContain(tokens.tokenUrl)
      expect(auth.message).toContain("here.access.key.secret")
      for (const shown of [auth.message, String(auth), JSON.stringify(auth), inspect(auth)]) {
        expect(shown).not.toContain("wrong-secret")
      }
      expect(tokens.requests).toHaveLength(1)
      expect(data.requests).toHaveLength(0)
    }))

  it.scopedLive("a token endpoint 503 is retried with a fresh nonce", () =>
    Effect.gen(function*() {
      const flaky = yield* testServer((_req, res, _body, recorded) => {
        if (flaky.requests.length === 1) return json(res, 503, { title: "Service Unavailable" })
        const check = verifySignature(recorded, `${flaky.origin}/oauth2/token`)
        if (!check.ok) {
          return json(res, 401, { errorId: "E", httpStatus: 401, errorCode: 401300, message: "bad signature" })
        }
        json(res, 200, { accessToken: "token-x", tokenType: "bearer", expiresIn: 3600 })
      })
      const data = yield* dataServer((t) => t === "token-x")
      expect(
        yield* getOk(`${data.origin}/x`).pipe(Effect.provide(clientLayer(`${flaky.origin}/oauth2/token`, data.origin)))
      ).toEqual({ ok: true })
      const nonces = flaky.requests.map((r) => /oauth_nonce="([^"]+)"/.exec(String(r.headers["authorization"]))?.[1])
      expect(nonces).toHaveLength(2)
      expect(nonces[0]).not.toBe(nonces[1])
    }))

  const tokenAt = (expiresIn: number, checks: ReadonlyArray<readonly [Duration.DurationInput, string]>) =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer({ expiresIn })
      yield* Effect.gen(function*() {
        const auth = yield* Auth
        expect(Redacted.value(yield* auth.token)).toBe("token-1")
        for (const [advance, expected] of checks) {
          yield* TestClock.adjust(advance)
          expect(Redacted.value(yield* auth.token), `after ${String(advance)}`).toBe(expected)
        }
      }).pipe(Effect.provide(clientLayer(tokens.tokenUrl, tokens.origin)))
      return tokens.requests.length
    })

  it.scoped("reuses the token and refreshes it 5 minutes before expiry", () =>
    Effect.gen(function*() {
      const requests = yield* tokenAt(3600, [
        ["54 minutes", "token-1"],
        ["59 seconds", "token-1"],
        ["2 seconds", "token-2"],
        ["30 minutes", "token-2"]
      ])
      expect(requests).toBe(2)
    }))

  it.scoped("a short-lived token is refreshed when 10% of its lifetime is left", () =>
    Effect.gen(function*() {
      const requests = yield* tokenAt(100, [
        ["89 seconds", "token-1"],
        ["2 seconds", "token-2"]
      ])
      expect(requests).toBe(2)
    }))

  it.scopedLive("invalidate drops only the token it was given", () =>
    Effect.gen(function*() {
      const tokens = yield* tokenServer()
      yield* Effect.gen(function*() {
        const auth = yield* Auth
        const first = yield* auth.token
        yield* auth.invalidate(Redacted.make("some-other-token"))
        expect(yield* auth.token).toBe(first)
        yield* auth.invalidate(first)
        const second = yield* auth.token
        expect(Redacted.value(second)).toBe("token-2")
        yield* auth.invalidate(first)
        expect(yield* auth.token).toBe(second)
      }).pipe(Effect.provide(clientLayer(tokens.tokenUrl, tokens.origin)))
      expect(tokens.requests).toHaveLength(2)
    }))
})
