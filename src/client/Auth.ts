import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import { randomBytes } from "node:crypto"
import * as OAuth1 from "../domain/OAuth1.ts"
import { readText } from "./Bodies.ts"
import { Credentials, type CredentialsShape } from "./Credentials.ts"
import { parseHttpDate } from "./ErrorMapping.ts"
import {
  ApiError,
  AuthError,
  redactUrl,
  type RegionUnavailable,
  type RetryBudgetExhausted,
  type TransportError
} from "./Errors.ts"
import { Http } from "./Http.ts"

/**
 * Access tokens from HERE Account (OAuth 1.0a signed client-credentials grant). One token serves all
 * requests; it is refreshed ahead of expiry by a single request however many callers need it.
 */

export type TokenFailure = AuthError | TransportError | RetryBudgetExhausted | RegionUnavailable

export interface AuthShape {
  readonly token: Effect.Effect<Redacted.Redacted<string>, TokenFailure>
  /** Drops `token` if it is still the current one (after a 401), so the next `token` fetches a new one. */
  readonly invalidate: (token: Redacted.Redacted<string>) => Effect.Effect<void>
  /**
   * The token service's clock minus ours in ms, from the `Date` of its last answer (so to about a
   * second); undefined before one arrived or when it sent no date.
   */
  readonly clockSkew: Effect.Effect<number | undefined>
}

export interface AuthOptions {
  /** Requested token lifetime in seconds (the service may grant less). */
  readonly expiresIn?: number
}

interface Token {
  readonly value: Redacted.Redacted<string>
  readonly expiresAt: number
  readonly refreshAt: number
}

/** Refresh when less than 5 minutes or 10% of the lifetime is left, whichever is shorter. */
export const refreshMargin = (lifetimeMs: number) => Math.min(5 * 60_000, lifetimeMs * 0.1)

const TIMESTAMP_OUT_OF_WINDOW = "401204"

export class Auth extends Context.Tag("catalog-export/client/Auth")<Auth, AuthShape>() {
  static readonly layer = (options: AuthOptions = {}): Layer.Layer<Auth, never, Http | Credentials> =>
    Layer.scoped(Auth, make(options))
}

const make = (options: AuthOptions) =>
  Effect.gen(function*() {
    const http = yield* Http
    const credentials = yield* Credentials
    const scope = yield* Effect.scope
    const expiresIn = options.expiresIn ?? 3600
    const current = yield* Ref.make<Token | undefined>(undefined)
    const inFlight = yield* Ref.make<Deferred.Deferred<Token, TokenFailure> | undefined>(undefined)
    /** Server clock minus ours, learnt from a 401204 answer. */
    const clockOffset = yield* Ref.make(0)
    const skew = yield* Ref.make<number | undefined>(undefined)

    const requestOnce = Effect.gen(function*() {
      const offset = yield* Ref.get(clockOffset)
      const startedAt = yield* Clock.currentTimeMillis
      const authorization = signTokenRequest(
        credentials,
        Math.floor((startedAt + offset) / 1000),
        randomBytes(16).toString("hex")
      )
      const body: Record<string, unknown> = { grantType: "client_credentials", expiresIn }
      if (credentials.scope !== undefined) body.scope = credentials.scope
      const request = HttpClientRequest.post(credentials.tokenEndpointUrl).pipe(
        HttpClientRequest.setHeader("authorization", authorization),
        HttpClientRequest.acceptJson,
        HttpClientRequest.bodyUnsafeJson(body)
      )
      const response = yield* http.send(request)
      const serverTime = parseHttpDate(response.headers["date"])
      // The Date header counts whole seconds: compare it with the middle of that second.
      if (serverTime !== undefined) {
        yield* Ref.set(skew, serverTime + 500 - Math.round((startedAt + (yield* Clock.currentTimeMillis)) / 2))
      }
      const text = yield* readText(response)
      return yield* parseTokenResponse(text, credentials.tokenEndpointUrl, startedAt, expiresIn)
    })

    // A fresh nonce and timestamp per attempt: retrying a signed request as-is would reuse the nonce.
    const requestToken = http.retrying(requestOnce).pipe(
      Effect.catchIf(isClockSkew, (error) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          yield* Ref.set(clockOffset, error.serverTime - now)
          yield* Effect.logWarning("token request timestamp rejected; signing with the token service's clock").pipe(
            Effect.annotateLogs({ clockOffsetMs: error.serverTime - now })
          )
          return yield* http.retrying(requestOnce)
        })),
      Effect.catchIf(
        (e): e is ApiError => e instanceof ApiError,
        (e) =>
          Effect.fail(
            new AuthError({
              endpoint: redactUrl(credentials.tokenEndpointUrl),
              status: e.status,
              code: e.code,
              reason: [e.title, e.detail].filter((s) => s !== undefined).join(": ") || "no reason given",
              credentials: credentials.source
            })
          )
      )
    )

    /** Joins the token request under way, or starts one that outlives an interrupted caller. */
    const fetchShared = Effect.gen(function*() {
      const mine = yield* Deferred.make<Token, TokenFailure>()
      const flight = yield* Ref.modify(
        inFlight,
        (existing) => (existing === undefined ? [mine, mine] : [existing, existing])
      )
      if (flight === mine) {
        yield* requestToken.pipe(
          Effect.tap((token) => Ref.set(current, token)),
          Effect.exit,
          Effect.flatMap((exit) => Deferred.done(mine, exit)),
          Effect.ensuring(Ref.set(inFlight, undefined)),
          Effect.forkIn(scope)
        )
      }
      return yield* Deferred.await(flight)
    })

    const token = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const held = yield* Ref.get(current)
      if (held !== undefined && now < held.refreshAt) return held.value
      return (yield* fetchShared).value
    })

    const invalidate = (stale: Redacted.Redacted<string>) =>
      Ref.update(current, (held) => (held !== undefined && held.value === stale ? undefined : held))

    return Auth.of({ token, invalidate, clockSkew: Ref.get(skew) })
  })

const isClockSkew = (e: unknown): e is ApiError & { serverTime: number } =>
  e instanceof ApiError && e.status === 401 && e.code === TIMESTAMP_OUT_OF_WINDOW && e.serverTime !== undefined

/** OAuth 1.0a header for a token request; the JSON body is not part of the signature. */
export const signTokenRequest = (
  credentials: Pick<CredentialsShape, "accessKeyId" | "accessKeySecret" | "tokenEndpointUrl">,
  timestamp: number,
  nonce: string
): string =>
  OAuth1.signRequest({
    url: credentials.tokenEndpointUrl,
    keyId: credentials.accessKeyId,
    secret: Redacted.value(credentials.accessKeySecret),
    timestamp,
    nonce
  })

const parseTokenResponse = (text: string, endpoint: string, requestedAt: number, requestedExpiresIn: number) =>
  Effect.gen(function*() {
    const fail = (reason: string) => new AuthError({ endpoint: redactUrl(endpoint), status: 200, reason })
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return yield* fail("the token response is not JSON")
    }
    if (typeof body !== "object" || body === null) return yield* fail("the token response is not a JSON object")
    const fields = body as Record<string, unknown>
    const accessToken = fields.accessToken ?? fields.access_token
    if (typeof accessToken !== "string" || accessToken === "") {
      return yield* fail("the token response has no access token")
    }
    const rawExpiresIn = fields.expiresIn ?? fields.expires_in
    const expiresIn = typeof rawExpiresIn === "string" ? Number(rawExpiresIn) : rawExpiresIn
    const lifetimeMs =
      (typeof expiresIn === "number" && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : requestedExpiresIn) *
      1000
    const expiresAt = requestedAt + lifetimeMs
    return {
      value: Redacted.make(accessToken),
      expiresAt,
      refreshAt: expiresAt - refreshMargin(lifetimeMs)
    } satisfies Token
  })
