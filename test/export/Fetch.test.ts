import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { ConcurrencyLimit } from "../../src/client/Concurrency.ts"
import { RetryTally } from "../../src/client/Retry.ts"
import type { Partition } from "../../src/domain/Partition.ts"
import { ByteBudget } from "../../src/export/Budget.ts"
import * as Fetch from "../../src/export/Fetch.ts"
import { listPart } from "../../src/export/Listing.ts"
import { makePlan, type Plan } from "../../src/export/Plan.ts"
import { Counters } from "../../src/export/Progress.ts"
import { TEST_RETRY_LIMITS, TestCatalog } from "../support/catalog.ts"
import { sha1 } from "../support/files.ts"
import { HRN, stagesLayer } from "./support.ts"

/**
 * Fetch.ts in this process: the real fetch stage and the real BlobFetcher, whose requests the
 * blob API's test layer answers from memory (test/support/catalog.ts).
 */

interface Received {
  readonly part: number
  readonly partition: Partition
  readonly stored: number
  readonly data: Uint8Array
}

const planOf = (layer: string, version: number | "latest" = "latest") =>
  makePlan({ catalog: HRN, layer, version, parts: 1 })

const listed = (plan: Plan) => Effect.map(Stream.runCollect(listPart(plan, undefined)), Chunk.toArray)

/** Offers `partitions` (as `parts` consecutive slices) to a fetch stage and waits for all of them, or its failure. */
const fetchAll = (
  plan: Plan,
  partitions: ReadonlyArray<Partition>,
  options: { readonly integrityAttempts?: number; readonly parts?: number } = {}
) =>
  Effect.scoped(Effect.gen(function*() {
    const received: Array<Received> = []
    const done = yield* Deferred.make<void, Fetch.FetchFailure>()
    const stage = yield* Fetch.stage(plan, {
      limit: ConcurrencyLimit.fixed(4),
      budget: new ByteBudget(64 * 1024 * 1024),
      integrityAttempts: options.integrityAttempts ?? 3,
      onBlob: (part, partition, stored, data) => {
        received.push({ part, partition, stored, data })
        if (received.length === partitions.length) Deferred.unsafeDone(done, Exit.void)
      },
      onFailure: (error) => Deferred.unsafeDone(done, Exit.fail(error))
    })
    const parts = options.parts ?? 1
    const size = Math.ceil(partitions.length / parts)
    for (let part = 0; part < parts; part++) yield* stage.offer(part, partitions.slice(part * size, (part + 1) * size))
    yield* Deferred.await(done)
    return received
  }))

/** Log lines at warning level and above, with their annotations. */
const capturingWarnings = () => {
  const lines: Array<{ message: string; annotations: Record<string, unknown> }> = []
  const logger = Logger.make(({ annotations, logLevel, message }) => {
    if (logLevel._tag !== "Warning") return
    lines.push({
      message: [message].flat().join(" "),
      annotations: Object.fromEntries([...annotations])
    })
  })
  return { lines, layer: Logger.add(logger) }
}

describe("the fetch stage", () => {
  it.effect("hands over every blob once, tagged with its part: as stored, and unpacked for a gzip layer", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      for (const layer of ["places", "tiles"]) {
        const plan = yield* planOf(layer)
        const partitions = yield* listed(plan)
        const received = yield* fetchAll(plan, partitions, { parts: 3 })
        expect(received.map((r) => r.partition.partition).sort()).toEqual(partitions.map((p) => p.partition).sort())
        const size = Math.ceil(partitions.length / 3)
        for (const r of received) {
          const index = partitions.indexOf(r.partition)
          expect(r.part).toBe(Math.floor(index / size))
          expect(sha1(r.data)).toBe(sha1(catalog.blob(layer, r.partition.dataHandle)!))
          expect(r.stored).toBe(catalog.stored(layer, r.partition.dataHandle)!.byteLength)
        }
        if (layer === "tiles") expect(received.every((r) => r.stored < r.data.byteLength)).toBe(true)
      }
      expect(new Set(catalog.blobRequests).size).toBe(catalog.blobRequests.length)
    }).pipe(Effect.provide(stagesLayer())))

  it.effect.each([
    { layer: "places", digest: "SHA-256" },
    { layer: "tiles", digest: "MD5 (gzip: over the unpacked data)" },
    { layer: "plain", digest: "none: SHA-1 from the checksum's length" }
  ])("downloads a blob again when it does not match its checksum ($digest), and warns", ({ layer }) => {
    const warnings = capturingWarnings()
    return Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const plan = yield* planOf(layer)
      const partitions = yield* listed(plan)
      const target = partitions[1]!
      catalog.blobFaults.set(target.dataHandle, ["corrupt"])
      const received = yield* fetchAll(plan, partitions)
      expect(received).toHaveLength(partitions.length)
      const again = received.find((r) => r.partition === target)!
      expect(sha1(again.data)).toBe(sha1(catalog.blob(layer, target.dataHandle)!))
      expect(catalog.blobRequests.filter((h) => h === target.dataHandle)).toHaveLength(2)
      expect(warnings.lines).toEqual([
        {
          message: "checksum mismatch, downloading again",
          annotations: expect.objectContaining({ partition: target.partition, attempt: 2 })
        }
      ])
    }).pipe(Effect.provide(stagesLayer()), Effect.provide(warnings.layer))
  })

  it.effect("fails with IntegrityError, naming the partition and its data handle, after integrityAttempts mismatches", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const plan = yield* planOf("plain")
      const partitions = yield* listed(plan)
      const target = partitions[2]!
      catalog.blobFaults.set(target.dataHandle, ["corrupt", "corrupt", "corrupt"])
      const error = yield* Effect.flip(fetchAll(plan, partitions, { integrityAttempts: 3 }))
      expect(error._tag).toBe("IntegrityError")
      expect(error.message).toBe(
        `The blob of partition '${target.partition}' (data handle ${target.dataHandle}) in ${HRN} layer plain ` +
          `does not match its sha1 checksum after 3 downloads. The data in the catalog is inconsistent; report it to the catalog's owner.`
      )
      expect(catalog.blobRequests.filter((h) => h === target.dataHandle)).toHaveLength(3)
    }).pipe(Effect.provide(stagesLayer())))

  it.effect("a blob the metadata names but the service lacks: IntegrityError in a versioned layer, the 404 in a volatile one", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const versioned = yield* planOf("places", 1)
      const partitions = yield* listed(versioned)
      catalog.deleteBlob("places", partitions[5]!.dataHandle)
      const missing = yield* Effect.flip(fetchAll(versioned, partitions))
      expect(missing._tag).toBe("IntegrityError")
      expect(missing.message).toContain(
        `The blob of partition '${partitions[5]!.partition}' (data handle ${
          partitions[5]!.dataHandle
        }) in ${HRN} layer places version 1 does not exist (404 from the blob API).`
      )
      expect(missing.message).toContain("(data handle rule 3)")

      const volatile = yield* planOf("traffic")
      const current = yield* listed(volatile)
      catalog.deleteBlob("traffic", current[0]!.dataHandle)
      expect(yield* Effect.flip(fetchAll(volatile, current))).toMatchObject({ _tag: "ApiError", status: 404 })
    }).pipe(Effect.provide(stagesLayer())))

  it.effect("retries 503, 429 and a cut body by the retry policy, counting each retry once", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const counters = new Counters()
      const plan = yield* planOf("places")
      const partitions = yield* listed(plan)
      catalog.blobFaults.set(partitions[0]!.dataHandle, [503, 429, "cut"])
      catalog.blobFaults.set(partitions[7]!.dataHandle, [500])
      const received = yield* fetchAll(plan, partitions).pipe(Effect.provideService(RetryTally, counters))
      expect(received).toHaveLength(partitions.length)
      for (const r of received) expect(sha1(r.data)).toBe(sha1(catalog.blob("places", r.partition.dataHandle)!))
      expect(counters.retries).toBe(4)
      expect(Object.values(counters.retriesByReason).reduce((a, b) => a + b, 0)).toBe(4)
      expect(catalog.blobRequests).toHaveLength(partitions.length + 4)
    }).pipe(Effect.provide(stagesLayer())))

  it.effect("stops at the first failure that outlasts the retry budget: nothing more is offered", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const plan = yield* planOf("places")
      const partitions = yield* listed(plan)
      // One answer more than the policy retries.
      catalog.blobFaults.set(
        partitions[0]!.dataHandle,
        Array.from({ length: TEST_RETRY_LIMITS.maxRetries + 1 }, () => 503)
      )
      yield* Effect.scoped(Effect.gen(function*() {
        const failed = yield* Deferred.make<Fetch.FetchFailure>()
        const stage = yield* Fetch.stage(plan, {
          limit: ConcurrencyLimit.fixed(1),
          budget: new ByteBudget(64 * 1024 * 1024),
          integrityAttempts: 3,
          onBlob: () => {},
          onFailure: (error) => Deferred.unsafeDone(failed, Exit.succeed(error))
        })
        yield* stage.offer(0, partitions.slice(0, 1))
        const error = yield* Deferred.await(failed)
        expect(error).toMatchObject({
          _tag: "RetryBudgetExhausted",
          retries: TEST_RETRY_LIMITS.maxRetries,
          lastError: { status: 503 }
        })
        const requests = catalog.blobRequests.length
        expect(yield* Effect.flip(stage.offer(0, partitions.slice(1)))).toBe(error)
        expect(catalog.blobRequests.length).toBe(requests)
      }))
    }).pipe(Effect.provide(stagesLayer())))

  it.effect("starts no download while the budget is full of rows waiting for the encoder, and holds offer back while too many blobs wait", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const plan = yield* planOf("places", 0)
      const partitions = yield* listed(plan)
      // Over the high-water mark of max(8 x concurrency, 1024) queued blobs.
      const many = Array.from({ length: 10 }, () => partitions).flat()
      expect(many.length).toBeGreaterThan(1024)
      // 8 MiB of rows of 1 MiB arrived and wait for the encoder: more than the budget lets wait.
      const budget = new ByteBudget(64 * 1024 * 1024)
      for (let i = 0; i < 8; i++) budget.arrived(0, 1024 * 1024)
      budget.enqueued(8 * 1024 * 1024)
      let arrived = 0
      let failure: unknown
      yield* Effect.scoped(Effect.gen(function*() {
        const stage = yield* Fetch.stage(plan, {
          limit: ConcurrencyLimit.fixed(2),
          budget,
          integrityAttempts: 3,
          onBlob: () => void arrived++,
          onFailure: (error) => void (failure = error)
        })
        const offer = yield* Effect.fork(stage.offer(0, many))
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))
        expect(catalog.blobRequests).toEqual([])
        expect(Option.isNone(yield* Fiber.poll(offer))).toBe(true)
        budget.taken(8 * 1024 * 1024)
        stage.resume()
        yield* Fiber.join(offer)
        // offer returns once the queue is down to the low-water mark (2 x concurrency)...
        expect(arrived).toBeGreaterThanOrEqual(many.length - 4)
        // ...and the rest still arrives.
        while (arrived < many.length && failure === undefined) {
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        expect(failure).toBeUndefined()
        expect(catalog.blobRequests).toHaveLength(many.length)
      }))
    }).pipe(Effect.provide(stagesLayer())))
})
