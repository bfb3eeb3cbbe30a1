import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import * as QueryString from "find-my-way-ts/QueryString"
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http"
import { SELECTABLE_REGIONS } from "../domain/Region.ts"
import { type Addressed, layerAccess } from "./Access.ts"
import { AuthState, bearerCaller } from "./Auth.ts"
import { BlobFiles } from "./BlobFiles.ts"
import type * as Faults from "./Faults.ts"
import { refusal, sendTruncated } from "./Faults.ts"
import { Reads } from "./Reads.ts"
import { regionPrefix, regionUnavailable } from "./Regions.ts"
import { Replicas } from "./Replicas.ts"
import { type PlainResponse, Reply, unexpectedFailure } from "./Reply.ts"
import { blobRead } from "./routes/Blob.ts"
import { listing, type ListingKind, type ListingResponse } from "./routes/Metadata.ts"

/**
 * The lean path: blob GET and HEAD and partitions/changes listings answered from node:http ahead of
 * the Effect router, which costs several hundred µs of CPU per request in fibers alone. It decides
 * nothing itself: it calls the plain functions the routes call (bearerCaller, blobRead, layerAccess,
 * listing) and writes what they return the way @effect/platform-node would, with the same fault
 * injector. It takes only requests whose handling is certain to match the router's: GET/HEAD without
 * a body, a path without `%`, `;` or `#` (so find-my-way's decoding is the identity), parameters
 * within the router's length limit. Anything else returns false and goes to the Effect app.
 */

/** find-my-way answers longer path parameters with "no route"; Server.ts configures the router with it. */
export const MAX_PARAM_LENGTH = 2048

const SEGMENT = "([^/%;#]+)"
const REGION = `(${SELECTABLE_REGIONS.map((r) => regionPrefix(r)).join("|")})?`
const BLOB = new RegExp(`^${REGION}/(?:blobstore|blob)/v1/catalogs/${SEGMENT}/layers/${SEGMENT}/data/${SEGMENT}$`)
const LISTING = new RegExp(`^${REGION}/metadata/v1/catalogs/${SEGMENT}/layers/${SEGMENT}/(partitions|changes)$`)

/** A request the lean path serves: what it asks for, with its path parameters as the router would decode them. */
export interface LeanRoute {
  readonly kind: "blob" | ListingKind
  /** `/regions/<id>` when the URL carries it; the router strips it from the URL the route sees. */
  readonly prefix: string | undefined
  readonly catalog: string
  readonly layer: string
  /** The data handle of a blob read. */
  readonly handle: string
}

/** The route of a request the lean path serves exactly as the router would, or undefined. */
export const recognize = (
  method: string | undefined,
  url: string,
  headers: IncomingHttpHeaders
): LeanRoute | undefined => {
  if (method !== "GET" && method !== "HEAD") return undefined
  const length = headers["content-length"]
  if ((length !== undefined && length !== "0") || headers["transfer-encoding"] !== undefined) return undefined
  const query = url.indexOf("?")
  const path = query === -1 ? url : url.slice(0, query)
  const blob = BLOB.exec(path)
  const match = blob ?? (method === "GET" ? LISTING.exec(path) : null)
  if (
    match === null || match[2]!.length > MAX_PARAM_LENGTH || match[3]!.length > MAX_PARAM_LENGTH ||
    match[4]!.length > MAX_PARAM_LENGTH
  ) {
    return undefined
  }
  return {
    kind: blob !== null ? "blob" : (match[4] as ListingKind),
    prefix: match[1],
    catalog: match[2]!,
    layer: match[3]!,
    handle: blob !== null ? match[4]! : ""
  }
}

type Outcome =
  | { readonly _tag: "Reply"; readonly response: HttpServerResponse.HttpServerResponse }
  | { readonly _tag: "Plain"; readonly response: PlainResponse }
  | { readonly _tag: "Listing"; readonly response: ListingResponse }

type Headers = Readonly<Record<string, string | undefined>>

export const make = (faults: Faults.Injector | undefined) =>
  Effect.gen(function*() {
    const reads = yield* Reads
    const files = yield* BlobFiles
    const { knownTokens } = yield* AuthState
    const { down } = yield* Replicas
    // Per URL prefix, where its requests are addressed (the set of regions that are down is live).
    const addressed = new Map<string | undefined, Addressed>([
      [undefined, { region: undefined, down }],
      ...SELECTABLE_REGIONS.map((r) => [regionPrefix(r), { region: r, down }] as const)
    ])
    // Defects are logged through the service's runtime, with the logger the CLI configured.
    const unexpected = Runtime.runSync(yield* Effect.runtime<never>())
    // Once the service shuts down (SQLite closes after this), a listing still streaming is cut off quietly.
    let closed = false
    yield* Effect.addFinalizer(() => Effect.sync(() => void (closed = true)))

    /** What the router's handler would answer (a failure the app would turn into 500 included). */
    const outcome = (route: LeanRoute, method: string, url: string, headers: Headers): Outcome => {
      try {
        const { prefix } = route
        const at = addressed.get(prefix)!
        // A region that is down answers nothing else, as the router's app does (Server.ts).
        if (at.region !== undefined && down.has(at.region)) return regionUnavailable(at.region)
        const caller = bearerCaller(headers["authorization"], knownTokens, reads)
        if (caller instanceof Reply) return caller
        const routeUrl = prefix === undefined ? url : url.length <= prefix.length ? "/" : url.slice(prefix.length)
        if (route.kind === "blob") {
          const response = blobRead(reads, files, caller.appId, route, at, method === "GET", routeUrl, headers)
          return response instanceof Reply ? response : { _tag: "Plain", response }
        }
        const access = layerAccess(reads, route.catalog, route.layer, caller.appId, "read", at)
        if (access instanceof Reply) return access
        const query = url.indexOf("?")
        const params = QueryString.parse(query === -1 ? "" : url.slice(query + 1))
        const response = listing(reads, route.kind, access.catalog, access.layer, params, routeUrl, headers)
        return response instanceof Reply ? response : { _tag: "Listing", response }
      } catch (defect) {
        return { _tag: "Reply", response: unexpected(unexpectedFailure(defect)) }
      }
    }

    /** As @effect/platform-node writes a response with an empty or Uint8Array body. */
    const writeServerResponse = (
      req: IncomingMessage,
      res: ServerResponse,
      response: HttpServerResponse.HttpServerResponse
    ) => {
      res.writeHead(response.status, response.headers)
      if (req.method === "HEAD" || response.body._tag !== "Uint8Array") res.end()
      else res.end(response.body.body)
    }

    const stream = (res: ServerResponse, { chunks, headers, status }: ListingResponse) => {
      res.writeHead(status, headers)
      const pump = () => {
        try {
          while (!res.destroyed) {
            const next = chunks.next()
            if (next.done) return void res.end()
            if (!res.write(next.value)) return void res.once("drain", pump)
          }
        } catch (defect) {
          if (closed) return void res.destroy()
          unexpected(unexpectedFailure(defect))
          res.end()
        }
      }
      pump()
    }

    const deliver = (req: IncomingMessage, res: ServerResponse, result: Outcome, truncate: boolean) => {
      switch (result._tag) {
        case "Reply":
          return writeServerResponse(req, res, result.response)
        case "Plain": {
          const { body, headers, status } = result.response
          if (truncate && status < 300) return sendTruncated(res, status, headers, body)
          res.writeHead(status, headers)
          return void (body === undefined ? res.end() : res.end(body))
        }
        case "Listing": {
          const { chunks, headers, status } = result.response
          if (truncate) {
            const first = chunks.next()
            return sendTruncated(res, status, headers, first.done ? undefined : first.value)
          }
          return stream(res, result.response)
        }
      }
    }

    const serve = (req: IncomingMessage, res: ServerResponse, route: LeanRoute) => {
      const method = req.method!
      const url = req.url!
      const headers = req.headers as Headers
      if (faults === undefined || faults.spares(url)) {
        return deliver(req, res, outcome(route, method, url, headers), false)
      }
      const afterLatency = () => {
        const verdict = faults.verdict()
        if (verdict === "throttle" || verdict === "unavailable") {
          return writeServerResponse(req, res, refusal(faults.options, verdict))
        }
        if (verdict === "reset") {
          return void req.socket.destroy()
        }
        deliver(req, res, outcome(route, method, url, headers), verdict === "truncate")
      }
      const latency = faults.latency()
      if (latency === undefined) {
        return afterLatency()
      }
      // A client that leaves during the latency ends the request before its verdict, as a fiber interrupted in its sleep.
      const timer = setTimeout(afterLatency, latency)
      res.once("close", () => clearTimeout(timer))
    }

    /** Serves the request and returns true, or returns false having touched nothing. */
    return (req: IncomingMessage, res: ServerResponse): boolean => {
      const route = recognize(req.method, req.url!, req.headers)
      if (route === undefined) return false
      serve(req, res, route)
      return true
    }
  })
