import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { createHmac } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as DataClient from "../../src/client/DataClient.ts"
import * as OAuth1 from "../../src/domain/OAuth1.ts"

export interface Recorded {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage["headers"]
  readonly body: string
}

export interface TestServer {
  readonly origin: string
  readonly port: number
  readonly requests: Array<Recorded>
}

export type Handler = (
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
  recorded: Recorded
) => void | Promise<void>

/** A node:http server on 127.0.0.1:0 for the life of the scope; records every request. */
export const testServer = (handler: Handler) =>
  Effect.acquireRelease(
    Effect.async<{ server: ReturnType<typeof createServer>; info: TestServer }>((resume) => {
      const requests: Array<Recorded> = []
      const server = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", () => {
          const recorded: Recorded = {
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            body: Buffer.concat(chunks).toString("utf8")
          }
          requests.push(recorded)
          Promise.resolve(handler(req, res, recorded.body, recorded)).catch((e) => {
            res.statusCode = 500
            res.end(String(e))
          })
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as AddressInfo).port
        resume(Effect.succeed({ server, info: { origin: `http://127.0.0.1:${port}`, port, requests } }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ info }) => info))

export const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

export const KEY_ID = "test-key-id"
export const SECRET = "s3cr+t/with=special&chars~"

/** Verifies an OAuth 1.0a HMAC-SHA256 token request the way HERE Account does (key `secret&`, raw). */
export const verifySignature = (
  req: Recorded,
  tokenUrl: string,
  secret = SECRET
): { ok: boolean; timestamp: number; reason: string | undefined } => {
  const header = req.headers["authorization"]
  if (typeof header !== "string") return { ok: false, timestamp: 0, reason: "no header" }
  const params = OAuth1.parseAuthorizationHeader(header)
  if (params === undefined) return { ok: false, timestamp: 0, reason: "malformed header" }
  const { oauth_signature: signature, ...rest } = params
  if (params.oauth_consumer_key !== KEY_ID) return { ok: false, timestamp: 0, reason: "consumer key" }
  if (params.oauth_signature_method !== "HMAC-SHA256" || params.oauth_version !== "1.0") {
    return { ok: false, timestamp: 0, reason: "method" }
  }
  const base = OAuth1.baseString("POST", tokenUrl, Object.entries(rest))
  const expected = createHmac("sha256", `${secret}&`).update(base).digest("base64")
  return {
    ok: expected === signature,
    timestamp: Number(params.oauth_timestamp),
    reason: expected === signature ? undefined : "signature"
  }
}

export interface TokenServerOptions {
  /** Seconds the issued tokens live. */
  readonly expiresIn?: number
  readonly snakeCase?: boolean
  /** Delay before answering, ms. */
  readonly delayMs?: number
  /** Server clock offset from the real one, ms (for 401204 tests). */
  readonly clockOffsetMs?: number
  /** Reject timestamps further than this from the server clock (seconds). */
  readonly windowSeconds?: number
}

/** A HERE Account token endpoint at /oauth2/token issuing tokens "token-1", "token-2", ... */
export const tokenServer = (options: TokenServerOptions = {}) =>
  Effect.gen(function*() {
    let issued = 0
    const server: TestServer = yield* testServer((_req, res, body, recorded) => {
      const tokenUrl = `${server.origin}/oauth2/token`
      const now = Date.now() + (options.clockOffsetMs ?? 0)
      const headers = { date: new Date(now).toUTCString() }
      const check = verifySignature(recorded, tokenUrl)
      if (!check.ok) {
        return json(res, 401, {
          errorId: "ERROR-1",
          httpStatus: 401,
          errorCode: 401300,
          message: `Signature mismatch (${check.reason})`
        }, headers)
      }
      if (options.windowSeconds !== undefined && Math.abs(check.timestamp - now / 1000) > options.windowSeconds) {
        return json(res, 401, {
          errorId: "ERROR-2",
          httpStatus: 401,
          errorCode: 401204,
          message: "Time stamp is outside the valid period."
        }, headers)
      }
      const request = JSON.parse(body) as { grantType: string; expiresIn: number }
      if (request.grantType !== "client_credentials") return json(res, 400, { error: "invalid_request" })
      const token = `token-${++issued}`
      const expiresIn = options.expiresIn ?? request.expiresIn
      const answer = options.snakeCase
        ? { access_token: token, token_type: "bearer", expires_in: expiresIn }
        : { accessToken: token, tokenType: "bearer", expiresIn }
      if (options.delayMs) setTimeout(() => json(res, 200, answer, headers), options.delayMs)
      else json(res, 200, answer, headers)
    })
    return { ...server, tokenUrl: `${server.origin}/oauth2/token`, issued: () => issued }
  })

export const credentialsFor = (tokenUrl: string) => ({
  accessKeyId: KEY_ID,
  accessKeySecret: Redacted.make(SECRET),
  tokenEndpointUrl: tokenUrl
})

/** The whole client against test servers, with fast retries. */
export const clientLayer = (
  tokenUrl: string,
  lookupUrl: string,
  overrides: Partial<DataClient.DataClientOptions> = {}
) =>
  DataClient.layer({
    lookupUrl,
    credentials: credentialsFor(tokenUrl),
    retry: { baseDelay: 1, maxDelay: 50, maxRetries: 5, maxElapsed: "20 seconds" },
    timeouts: { connect: "2 seconds", firstByte: "10 seconds", idle: "10 seconds" },
    ...overrides
  })

/** The metadata-style listing document for the given partitions. */
export const listingDocument = (partitions: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ ...extra, partitions })

export const CATALOG_ID = "my-catalog"
export const CATALOG = `hrn:here:data::org:${CATALOG_ID}`

/** Handles a request of the fake platform; return false to answer 404. */
export type Route = (url: URL, req: IncomingMessage, res: ServerResponse, recorded: Recorded) => boolean | void

export interface PlatformOptions {
  /** How the catalog appears in base URLs: bare id (default) or full HRN. */
  readonly catalogInBaseUrl?: "id" | "hrn"
  readonly lookupHeaders?: Record<string, string>
  readonly client?: Partial<DataClient.DataClientOptions>
}

/**
 * A fake platform on one port: lookup (resource + platform) and whatever `route` serves. Base URLs:
 * /metadata/v1/catalogs/<c>, /query/v1/..., /blobstore/v1/... (blob), /volatile-blobstore/v1/...
 * (volatile-blob), /publish/v2/..., platform config at /config/v1.
 */
export const platformServer = (route: Route, options: PlatformOptions = {}) =>
  Effect.gen(function*() {
    const server: TestServer = yield* testServer((req, res, _body, recorded) => {
      const url = new URL(req.url ?? "/", server.origin)
      const catalog = options.catalogInBaseUrl === "hrn" ? CATALOG : CATALOG_ID
      if (url.pathname === `/lookup/v1/resources/${CATALOG}/apis`) {
        const entry = (api: string, version: string, path: string) => ({
          api,
          version,
          baseURL: `${server.origin}/${path}/catalogs/${catalog}`,
          parameters: {}
        })
        return json(
          res,
          200,
          [
            entry("metadata", "v1", "metadata/v1"),
            entry("query", "v1", "query/v1"),
            entry("blob", "v1", "blobstore/v1"),
            entry("volatile-blob", "v1", "volatile-blobstore/v1"),
            entry("publish", "v2", "publish/v2"),
            { api: "stream", version: "v2", baseURL: `${server.origin}/stream/v2/catalogs/${catalog}` }
          ],
          options.lookupHeaders ?? {}
        )
      }
      if (url.pathname === "/lookup/v1/platform/apis") {
        return json(
          res,
          200,
          [{ api: "config", version: "v1", baseURL: `${server.origin}/config/v1` }],
          options.lookupHeaders ?? {}
        )
      }
      if (url.pathname.startsWith("/lookup/v1/resources/")) {
        return json(res, 404, {
          title: "Not Found",
          status: 404,
          detail: [{ name: "hrn", error: "Catalog not found" }]
        })
      }
      if (route(url, req, res, recorded) === false) json(res, 404, { title: "Not Found", status: 404 })
    })
    return server
  })

/** Runs `use` with the whole client against a fake platform served by `route`. */
export const withPlatform = <A, E, R>(
  route: Route,
  use: (server: TestServer) => Effect.Effect<A, E, R>,
  options: PlatformOptions = {}
) =>
  Effect.gen(function*() {
    const tokens = yield* tokenServer()
    const server = yield* platformServer(route, options)
    return yield* use(server).pipe(
      Effect.provide(clientLayer(tokens.tokenUrl, `${server.origin}/lookup/v1`, options.client))
    )
  })
