import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import { ApiNotFound, CatalogNotFound } from "../../src/client/Errors.ts"
import { Lookup } from "../../src/client/Lookup.ts"
import { CATALOG, CATALOG_ID, withPlatform } from "./support.ts"

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${String(exit)}`)
  return exit.cause.error
}

const lookups = (server: { requests: ReadonlyArray<{ url: string }> }) =>
  server.requests.filter((r) => r.url.startsWith("/lookup/")).length

describe("Lookup", () => {
  it.scopedLive("puts the HRN raw into the path and resolves every API to its base URL", () =>
    withPlatform(
      () => false,
      (server) =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          expect(yield* lookup.baseUrl({ api: "metadata", version: "v1", hrn: CATALOG })).toBe(
            `${server.origin}/metadata/v1/catalogs/${CATALOG_ID}`
          )
          expect(yield* lookup.baseUrl({ api: "blob", version: "v1", hrn: CATALOG })).toBe(
            `${server.origin}/blobstore/v1/catalogs/${CATALOG_ID}`
          )
          expect(yield* lookup.baseUrl({ api: "config", version: "v1", hrn: CATALOG })).toBe(
            `${server.origin}/config/v1`
          )
          expect(yield* lookup.baseUrl({ api: "config", version: "v1" })).toBe(`${server.origin}/config/v1`)
          expect(server.requests.map((r) => r.url)).toEqual([
            `/lookup/v1/resources/${CATALOG}/apis`,
            "/lookup/v1/platform/apis"
          ])
          expect(server.requests[0]!.headers["authorization"]).toBe("Bearer token-1")
        })
    ))

  it.scopedLive("sends the region when given", () =>
    withPlatform(
      () => false,
      (server) =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          yield* lookup.baseUrl({ api: "metadata", version: "v1", hrn: CATALOG, region: "eu-ireland" })
          expect(server.requests[0]!.url).toBe(`/lookup/v1/resources/${CATALOG}/apis?region=eu-ireland`)
        })
    ))

  it.scoped("caches for Cache-Control max-age", () =>
    withPlatform(
      () => false,
      (server) =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          const resolve = lookup.baseUrl({ api: "metadata", version: "v1", hrn: CATALOG })
          yield* Effect.all([resolve, resolve, resolve], { concurrency: "unbounded" })
          expect(lookups(server)).toBe(1)
          yield* TestClock.adjust("59 seconds")
          yield* resolve
          expect(lookups(server)).toBe(1)
          yield* TestClock.adjust("2 seconds")
          yield* resolve
          expect(lookups(server)).toBe(2)
        }),
      { lookupHeaders: { "cache-control": "public, max-age=60" } }
    ))

  it.scoped("caches for an hour when the service sends no max-age", () =>
    withPlatform(
      () => false,
      (server) =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          const resolve = lookup.baseUrl({ api: "query", version: "v1", hrn: CATALOG })
          yield* resolve
          yield* TestClock.adjust("59 minutes")
          yield* resolve
          expect(lookups(server)).toBe(1)
          yield* TestClock.adjust("2 minutes")
          yield* resolve
          expect(lookups(server)).toBe(2)
        })
    ))

  it.scopedLive("a missing API is an ApiNotFound that lists what exists", () =>
    withPlatform(
      () => false,
      () =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          const error = failureOf(yield* Effect.exit(lookup.baseUrl({ api: "blob", version: "v2", hrn: CATALOG })))
          expect(error).toBeInstanceOf(ApiNotFound)
          expect(error.message).toContain(`"blob" v2`)
          expect(error.message).toContain(CATALOG)
          expect(error.message).toContain("blob v1")
          expect(error.message).toContain("metadata v1")
        })
    ))

  it.scopedLive("an unknown catalog is a CatalogNotFound", () =>
    withPlatform(
      () => false,
      () =>
        Effect.gen(function*() {
          const lookup = yield* Lookup
          const error = failureOf(
            yield* Effect.exit(lookup.baseUrl({ api: "metadata", version: "v1", hrn: "hrn:here:data::org:other" }))
          )
          expect(error).toBeInstanceOf(CatalogNotFound)
          expect((error as CatalogNotFound).hrn).toBe("hrn:here:data::org:other")
          expect((error as CatalogNotFound).detail).toBe("hrn: Catalog not found")
        })
    ))
})
