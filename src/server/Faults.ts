import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { OutgoingHttpHeaders, ServerResponse } from "node:http"
import { json } from "./Reply.ts"

/**
 * Reproducible misbehaviour for tests and benchmarks: throttling (429 with Retry-After), 503,
 * connection resets, bodies cut short, and latency. Rates are probabilities per request.
 */
export interface FaultOptions {
  readonly throttle: number
  readonly unavailable: number
  readonly reset: number
  readonly truncate: number
  /** Seconds announced in `Retry-After` on 429 and 503. */
  readonly retryAfterSeconds: number
  /** Added latency in milliseconds: fixed, or uniform within [min, max]. */
  readonly latencyMs: readonly [number, number]
  readonly seed: number
  /** Token and lookup requests are spared unless this is set. */
  readonly includeAuthAndLookup: boolean
  /** Every request answers 429 between these milliseconds after the service started. */
  readonly stormMs?: readonly [number, number] | undefined
}

export const noFaults: FaultOptions = {
  throttle: 0,
  unavailable: 0,
  reset: 0,
  truncate: 0,
  retryAfterSeconds: 1,
  latencyMs: [0, 0],
  seed: 1,
  includeAuthAndLookup: false
}

const KEYS: Record<string, keyof FaultOptions> = {
  "429": "throttle",
  throttle: "throttle",
  "503": "unavailable",
  unavailable: "unavailable",
  reset: "reset",
  truncate: "truncate"
}

/** Parses `--faults "429=0.1,503=0.03,reset=0.02,truncate=0.01"`. */
export const parseFaults = (spec: string): Partial<FaultOptions> => {
  const out: Record<string, number> = {}
  for (const item of spec.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const [name, value] = item.split("=")
    const key = KEYS[name?.trim() ?? ""]
    const rate = Number(value)
    if (key === undefined) throw new Error(`unknown fault '${name}' in --faults (known: 429, 503, reset, truncate)`)
    if (!(rate >= 0 && rate <= 1)) {
      throw new Error(`fault rate for '${name}' must be a number within 0..1, got '${value}'`)
    }
    out[key] = rate
  }
  return out as Partial<FaultOptions>
}

/** mulberry32: small, fast, and the same sequence for the same seed. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const spared = (url: string) => url.startsWith("/oauth2/") || url.startsWith("/lookup/") || url.startsWith("/local/")

export const isActive = (o: FaultOptions) =>
  o.throttle + o.unavailable + o.reset + o.truncate > 0 || o.latencyMs[1] > 0 || o.stormMs !== undefined

/** What happens to one request. */
export type Verdict = "throttle" | "unavailable" | "reset" | "truncate" | "pass"

/**
 * The fault decisions of one service, shared by the Effect middleware and the lean path (FastPath.ts)
 * so both draw from one generator in request order: a request's latency first (when configured),
 * then, after that latency, its verdict.
 */
export interface Injector {
  readonly options: FaultOptions
  /** Token, lookup and the local service's own admin requests are left alone unless `includeAuthAndLookup`. */
  readonly spares: (url: string) => boolean
  /** Milliseconds to hold the request, or undefined when no latency is configured. */
  readonly latency: () => number | undefined
  readonly verdict: () => Verdict
}

export const injector = (options: FaultOptions): Injector => {
  const random = prng(options.seed)
  const startedAt = Date.now()
  const [min, max] = options.latencyMs
  return {
    options,
    spares: (url) => !options.includeAuthAndLookup && spared(url),
    latency: () => (max > 0 ? min + random() * (max - min) : undefined),
    verdict: () => {
      const sinceStart = Date.now() - startedAt
      if (options.stormMs !== undefined && sinceStart >= options.stormMs[0] && sinceStart < options.stormMs[1]) {
        return "throttle"
      }
      const roll = random()
      let edge = options.throttle
      if (roll < edge) return "throttle"
      if (roll < (edge += options.unavailable)) return "unavailable"
      if (roll < (edge += options.reset)) return "reset"
      if (roll < edge + options.truncate) return "truncate"
      return "pass"
    }
  }
}

/** The answer to a throttled or unavailable verdict. */
export const refusal = (options: FaultOptions, verdict: "throttle" | "unavailable") => {
  const retryAfter = { "retry-after": String(options.retryAfterSeconds) }
  return verdict === "throttle"
    ? json(429, { title: "Too Many Requests", status: 429 }, retryAfter)
    : json(503, { title: "Service Unavailable", status: 503 }, retryAfter)
}

/**
 * Sends the head and the first half of `first` (the body, or its first chunk), then drops the
 * connection, as a broken proxy or network would. Node corks the socket until the next tick, so
 * destroying right after `write` would discard everything and look like a reset, not a short body.
 * Only a response below 300 is cut (the caller checks).
 */
export const sendTruncated = (
  node: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  first: Uint8Array | undefined
) => {
  node.writeHead(status, headers)
  const bytes = first === undefined ? new Uint8Array(0) : first.subarray(0, Math.floor(first.byteLength / 2))
  const drop = () => node.destroy()
  if (bytes.byteLength > 0) {
    node.write(bytes, drop)
  } else {
    node.flushHeaders()
    setImmediate(drop)
  }
}

const truncated = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  Effect.gen(function*() {
    const node = NodeHttpServerRequest.toServerResponse(request)
    const body = response.body
    const headers = { ...response.headers }
    if (body._tag === "Uint8Array") {
      sendTruncated(node, response.status, {
        ...headers,
        "content-type": body.contentType,
        "content-length": String(body.body.byteLength)
      }, body.body)
    } else if (body._tag === "Stream") {
      const first = yield* body.stream.pipe(Stream.take(1), Stream.runCollect, Effect.orDie)
      sendTruncated(
        node,
        response.status,
        { ...headers, "content-type": body.contentType },
        Chunk.get(first, 0).pipe(Option.getOrUndefined)
      )
    } else {
      sendTruncated(node, response.status, headers, undefined)
    }
    return yield* Effect.never
  })

export const middleware = (faults: Injector) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (faults.spares(request.url)) return yield* app
    const latency = faults.latency()
    if (latency !== undefined) yield* Effect.sleep(latency)
    const verdict = faults.verdict()
    if (verdict === "throttle" || verdict === "unavailable") return refusal(faults.options, verdict)
    if (verdict === "reset") {
      NodeHttpServerRequest.toIncomingMessage(request).socket.destroy()
      return yield* Effect.never
    }
    const response = yield* app
    if (verdict === "truncate" && response.status < 300) return yield* truncated(request, response)
    return response
  })
