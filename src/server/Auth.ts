import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as OAuth1 from "../domain/OAuth1.ts"
import { AppsRepo } from "./db/AppsRepo.ts"
import { MAX_TOKEN_SECONDS } from "./Defaults.ts"
import { Reads, type ReadsShape } from "./Reads.ts"
import { accountFailure, json, orFail, type Reply, type Result, unauthorized } from "./Reply.ts"

export interface AuthOptions {
  /** The longest token the service issues, in seconds (24 h like the platform; tests shorten it). */
  readonly maxTokenSeconds: number
  /** Accepted clock difference for `oauth_timestamp`, in seconds. */
  readonly timestampWindowSeconds: number
}

export const defaultAuthOptions: AuthOptions = { maxTokenSeconds: MAX_TOKEN_SECONDS, timestampWindowSeconds: 600 }

export class AuthConfig extends Context.Tag("catalog-export/server/AuthConfig")<AuthConfig, AuthOptions>() {
  static readonly defaults = defaultAuthOptions
  static readonly layer = (options: Partial<AuthOptions> = {}) =>
    Layer.succeed(AuthConfig, { ...defaultAuthOptions, ...options })
}

export const hashToken = (token: string): string => createHash("sha256").update(token).digest("hex")

const safeEqual = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** Per-service memory of the token endpoint and the bearer check. */
export class AuthState extends Context.Tag("catalog-export/server/AuthState")<AuthState, {
  /** Nonces seen inside the timestamp window, per consumer key. */
  readonly seenNonces: Map<string, number>
  /**
   * Issued tokens never change, so a token seen once is neither hashed nor looked up in SQLite again
   * (bounded). Keyed by the token itself: hashing it on every request cost more than the rest of the
   * check; the map is memory of this process only, never logged.
   */
  readonly knownTokens: Map<string, { readonly app_id: string; readonly expires_at: number }>
}>() {
  static readonly layer = Layer.sync(AuthState, () => ({ seenNonces: new Map(), knownTokens: new Map() }))
}

const rememberNonce = (
  seenNonces: Map<string, number>,
  key: string,
  nonce: string,
  now: number,
  windowMs: number
): boolean => {
  if (seenNonces.size > 100_000) {
    for (const [k, at] of seenNonces) if (at < now - 2 * windowMs) seenNonces.delete(k)
  }
  const id = `${key}\u0000${nonce}`
  if (seenNonces.has(id)) return false
  seenNonces.set(id, now)
  return true
}

const requestUrl = (request: HttpServerRequest.HttpServerRequest): string => {
  const host = request.headers["host"] ?? "127.0.0.1"
  const proto = request.headers["x-forwarded-proto"] ?? "http"
  return `${proto}://${host}${request.url}`
}

interface TokenBody {
  readonly grantType: string | undefined
  readonly expiresIn: number | undefined
  readonly scope: string | undefined
  readonly formParams: ReadonlyArray<readonly [string, string]>
  readonly form: boolean
}

const readTokenBody = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const contentType = (request.headers["content-type"] ?? "").toLowerCase()
  const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
  if (contentType.startsWith("application/x-www-form-urlencoded")) {
    const params = new URLSearchParams(text)
    const expires = params.get("expires_in")
    return {
      grantType: params.get("grant_type") ?? undefined,
      expiresIn: expires === null ? undefined : Number(expires),
      scope: params.get("scope") ?? undefined,
      formParams: [...params.entries()],
      form: true
    } satisfies TokenBody
  }
  let body: Record<string, unknown> = {}
  if (text.trim() !== "") {
    try {
      body = JSON.parse(text)
    } catch {
      return yield* accountFailure(400, 400200, "Invalid JSON in the request body.")
    }
  }
  const expires = body.expiresIn ?? body.expires_in
  return {
    grantType: (body.grantType ?? body.grant_type) as string | undefined,
    expiresIn: expires === undefined ? undefined : Number(expires),
    scope: body.scope as string | undefined,
    formParams: [],
    form: false
  } satisfies TokenBody
})

/** `POST /oauth2/token`: verifies the OAuth 1.0a HMAC-SHA256 signed request and issues a bearer token. */
export const tokenEndpoint = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const apps = yield* AppsRepo
  const options = yield* AuthConfig
  const now = Date.now()
  const header = request.headers["authorization"]
  const oauth = header === undefined ? undefined : OAuth1.parseAuthorizationHeader(header)
  if (
    oauth === undefined || !oauth.oauth_consumer_key || !oauth.oauth_signature || !oauth.oauth_nonce ||
    !oauth.oauth_timestamp
  ) {
    return yield* accountFailure(401, 401202, "Invalid Client Authorization header, expecting signed request format.")
  }
  if (oauth.oauth_signature_method !== "HMAC-SHA256") {
    return yield* accountFailure(
      401,
      401205,
      "Unsupported signature method in the Authorization header; use HMAC-SHA256."
    )
  }
  if (oauth.oauth_version !== undefined && oauth.oauth_version !== "1.0") {
    return yield* accountFailure(401, 401206, "Invalid oauth_version in the Authorization header; use 1.0.")
  }
  const timestamp = Number(oauth.oauth_timestamp)
  if (!Number.isFinite(timestamp) || Math.abs(now / 1000 - timestamp) > options.timestampWindowSeconds) {
    return yield* accountFailure(401, 401204, "Time stamp is outside the valid period.")
  }
  const body = yield* readTokenBody
  const app = yield* apps.byKeyId(oauth.oauth_consumer_key)
  const signed = Object.entries(oauth).filter(([k]) => k !== "oauth_signature" && k !== "realm")
  const base = OAuth1.baseString("POST", requestUrl(request), [...signed, ...body.formParams])
  // The HERE SDKs sign with `<secret>&` unencoded; RFC 5849 encodes the secret first. Accept both.
  const valid = app !== undefined &&
    [OAuth1.sign(base, app.key_secret), OAuth1.signWithKey(base, `${app.key_secret}&`)].some((s) =>
      safeEqual(s, oauth.oauth_signature!)
    )
  if (!valid) {
    return yield* accountFailure(401, 401300, "Invalid Credentials for user: the signature does not match.")
  }
  if (
    !rememberNonce(
      (yield* AuthState).seenNonces,
      oauth.oauth_consumer_key,
      oauth.oauth_nonce,
      now,
      options.timestampWindowSeconds * 1000
    )
  ) {
    return yield* accountFailure(401, 401207, "Nonce already used. Send a fresh oauth_nonce with every request.")
  }
  if (body.grantType !== "client_credentials") {
    return yield* accountFailure(400, 400200, "Invalid grantType: only client_credentials is supported.")
  }
  const requested = body.expiresIn
  if (requested !== undefined && (!Number.isInteger(requested) || requested <= 0)) {
    return yield* accountFailure(400, 400200, "Invalid expiresIn: a positive number of seconds is expected.")
  }
  const expiresIn = Math.min(requested ?? options.maxTokenSeconds, options.maxTokenSeconds)
  const token = `lcs.${randomBytes(32).toString("base64url")}`
  yield* apps.insertToken(hashToken(token), app!.id, now + expiresIn * 1000)
  const scope = body.scope === undefined ? {} : { scope: body.scope }
  return body.form
    ? json(200, { access_token: token, token_type: "bearer", expires_in: expiresIn, ...scope })
    : json(200, { accessToken: token, tokenType: "bearer", expiresIn, ...scope })
})

/** The application behind the request's bearer token. */
export class Caller extends Context.Tag("catalog-export/server/Caller")<Caller, { readonly appId: string }>() {}

const KNOWN_TOKENS_MAX = 10_000

/** The caller named by an `Authorization` header, or the 401 that answers it. */
export const bearerCaller = (
  header: string | undefined,
  knownTokens: Context.Tag.Service<AuthState>["knownTokens"],
  reads: ReadsShape
): Result<{ readonly appId: string }> => {
  if (header === undefined) return unauthorized("Token Validation Failure - missing Authorization header")
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  if (!match) {
    return unauthorized("Token Validation Failure - malformed Authorization header, expected 'Bearer <token>'")
  }
  const token = match[1]!
  let found = knownTokens.get(token)
  if (found === undefined) {
    found = reads.tokenByHash(hashToken(token))
    if (found !== undefined) {
      if (knownTokens.size >= KNOWN_TOKENS_MAX) knownTokens.clear()
      knownTokens.set(token, found)
    }
  }
  if (found === undefined) return unauthorized("Token Validation Failure - invalid token")
  if (found.expires_at <= Date.now()) return unauthorized("Token Validation Failure - invalid time in token")
  return { appId: found.app_id }
}

export const authenticate = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  return yield* orFail(bearerCaller(request.headers["authorization"], (yield* AuthState).knownTokens, yield* Reads))
})

/** Runs a handler as the authenticated caller. */
export const withCaller = <E, R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  E | Reply,
  Exclude<R, Caller> | Reads | AuthState | HttpServerRequest.HttpServerRequest
> => Effect.flatMap(authenticate, (caller) => Effect.provideService(handler, Caller, caller))
