import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type { ServerResponse } from "node:http"
import { Effect, Stream } from "effect"
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
    if (!(rate >= 0 && rate <= 1)) throw new Error(`fault rate for '${name}' must be a number within 0..1, got '${value}'`)
    out[key] = rate
  }
  return out as Partial<FaultOptions>
}

/** Parses `--latency 20` or `--latency 5-50` (milliseconds). */
export const parseLatency = (spec: string): readonly [number, number] => {
  const m = /^(\d+)(?:-(\d+))?$/.exec(spec.trim())
  if (!m) throw new Error(`--latency takes milliseconds as N or MIN-MAX, got '${spec}'`)
  const min = Number(m[1])
  const max = m[2] === undefined ? min : Number(m[2])
  if (max < min) throw new Error(`--latency range ${spec} has its maximum below its minimum`)
  return [min, max]
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

const spared = (url: string) => url.startsWith("/oauth2/") || url.startsWith("/lookup/")

export const isActive = (o: FaultOptions) =>
  o.throttle + o.unavailable + o.reset + o.truncate > 0 || o.latencyMs[1] > 0 || o.stormMs !== undefined

/**
 * Sends the head and `bytes`, then drops the connection. Node corks the socket until the next tick,
 * so destroying right after `write` would discard everything and look like a reset, not a short body.
 */
const sendThenDrop = (node: ServerResponse, bytes: Uint8Array) => {
  const drop = () => node.destroy()
  if (bytes.byteLength > 0) {
    node.write(bytes, drop)
  } else {
    node.flushHeaders()
    setImmediate(drop)
  }
}

/** Cuts the response body short and drops the connection, as a broken proxy or network would. */
const truncated = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  Effect.gen(function*() {
    const node = NodeHttpServerRequest.toServerResponse(request)
    const body = response.body
    const headers = { ...response.headers }
    if (body._tag === "Uint8Array") {
      node.writeHead(response.status, { ...headers, "content-type": body.contentType, "content-length": String(body.body.byteLength) })
      sendThenDrop(node, body.body.subarray(0, Math.floor(body.body.byteLength / 2)))
    } else if (body._tag === "Stream") {
      node.writeHead(response.status, { ...headers, "content-type": body.contentType })
      const first = yield* body.stream.pipe(Stream.take(1), Stream.runCollect, Effect.orDie)
      sendThenDrop(node, Buffer.concat([...first].map((chunk) => chunk.subarray(0, Math.floor(chunk.byteLength / 2)))))
    } else {
      node.writeHead(response.status, headers)
      sendThenDrop(node, new Uint8Array(0))
    }
    return yield* Effect.never
  })

export const middleware = (options: FaultOptions) => {
  const random = prng(options.seed)
  const startedAt = Date.now()
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!options.includeAuthAndLookup && spared(request.url)) return yield* app
      const [min, max] = options.latencyMs
      if (max > 0) yield* Effect.sleep(min + random() * (max - min))
      const retryAfter = { "retry-after": String(options.retryAfterSeconds) }
      const sinceStart = Date.now() - startedAt
      if (options.stormMs !== undefined && sinceStart >= options.stormMs[0] && sinceStart < options.stormMs[1]) {
        return json(429, { title: "Too Many Requests", status: 429 }, retryAfter)
      }
      const roll = random()
      let edge = options.throttle
      if (roll < edge) return json(429, { title: "Too Many Requests", status: 429 }, retryAfter)
      if (roll < (edge += options.unavailable)) return json(503, { title: "Service Unavailable", status: 503 }, retryAfter)
      if (roll < (edge += options.reset)) {
        NodeHttpServerRequest.toIncomingMessage(request).socket.destroy()
        return yield* Effect.never
      }
      const response = yield* app
      if (roll < edge + options.truncate && response.status < 300) return yield* truncated(request, response)
      return response
    })
}
