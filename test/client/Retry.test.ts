import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { ApiError, RegionUnavailable, RetryBudgetExhausted, TransportError } from "../../src/client/Errors.ts"
import {
  gaveUp,
  nextRetry,
  type RetryCount,
  type RetryLimits,
  retrySchedule,
  type RetryStep
} from "../../src/client/Retry.ts"

const limits: RetryLimits = { maxRetries: 4, maxElapsedMs: 60_000, baseDelayMs: 100, maxDelayMs: 1_000 }
const status = (s: number, retryAfterMs?: number) =>
  new ApiError({ status: s, method: "GET", url: "http://x/y", ...(retryAfterMs === undefined ? {} : { retryAfterMs }) })
const reset = new TransportError({
  method: "GET",
  url: "http://x/y",
  reason: "socket hang up",
  code: "ECONNRESET",
  retriable: true
})
const fresh = (): RetryCount => ({ retries: 0, outages: 0, startedAt: 0 })

/** The steps the policy takes through `errors`, one at `now`, with the jitter at its maximum. */
const walk = (
  errors: ReadonlyArray<unknown>,
  options: { readonly maxOutages?: number; readonly at?: (i: number) => number } = {}
) => {
  const count = fresh()
  return errors.map((error, i) => nextRetry(limits, options.maxOutages, count, error, options.at?.(i) ?? 0, 0.999_999))
}

const delays = (steps: ReadonlyArray<RetryStep>) => steps.map((s) => (s._tag === "Retry" ? s.delayMs : s._tag))

describe("the retry policy (nextRetry), shared by the Schedule and the blob fetcher", () => {
  it("full-jitter exponential backoff capped at maxDelay, Retry-After as asked (capped too), then the retry budget", () => {
    expect(delays(walk([status(503), reset, status(429), status(500), status(503)]))).toEqual([
      99,
      199,
      399,
      799,
      "Exhausted"
    ])
    expect(delays(walk([status(429, 300), status(429, 5_000)]))).toEqual([300, 1_000])
    const overTime = walk([status(503), status(503)], { at: (i) => i * 59_950 })
    expect(overTime[1]).toMatchObject({ _tag: "Exhausted", retries: 1, elapsedMs: 59_950 })
  })

  it("does not retry what is not transient; gives an outage up after maxOutages 5xx or resets in a row (a 429 starts the count again)", () => {
    expect(walk([status(404)])).toEqual([{ _tag: "Permanent" }])
    expect(
      walk([
        new TransportError({ method: "GET", url: "http://x", reason: "DNS", code: "ENOTFOUND", retriable: false })
      ])[0]!._tag
    ).toBe("Permanent")
    expect(walk([status(503), status(429), reset, status(502)], { maxOutages: 2 }).map((s) => s._tag)).toEqual([
      "Retry",
      "Retry",
      "Retry",
      "Outage"
    ])
  })

  it("gives up with the error itself, RetryBudgetExhausted or RegionUnavailable", () => {
    const error = status(503)
    expect(gaveUp(error, { _tag: "Permanent" })).toBe(error)
    const exhausted = gaveUp(error, { _tag: "Exhausted", error, retries: 4, elapsedMs: 1234 })
    expect(exhausted).toBeInstanceOf(RetryBudgetExhausted)
    expect(exhausted).toMatchObject({ retries: 4, elapsedMs: 1234, lastError: error })
    expect(gaveUp(error, { _tag: "Outage", error, failures: 3 })).toBeInstanceOf(RegionUnavailable)
  })

  it.effect("the Schedule waits exactly what nextRetry says, for the same jitter", () =>
    Effect.gen(function*() {
      const failures = [status(503), reset, status(429, 250), status(500)]
      let attempts = 0
      const request = Effect.suspend(
        () => (attempts < failures.length ? Effect.fail(failures[attempts++]!) : Effect.succeed("done"))
      )
      const fiber = yield* Effect.fork(Effect.retry(request, retrySchedule(limits)).pipe(Effect.withRandomFixed([0.5])))
      const waited: Array<number> = []
      while (fiber.unsafePoll() === null) {
        const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
        if (sleeps.length === 0) {
          yield* Effect.yieldNow()
          continue
        }
        const now = yield* TestClock.currentTimeMillis
        waited.push(sleeps[0]! - now)
        yield* TestClock.adjust(sleeps[0]! - now)
      }
      expect(yield* Fiber.join(fiber)).toBe("done")
      const count = fresh()
      expect(waited).toEqual(failures.map((f, i) => {
        const step = nextRetry(limits, undefined, count, f, i, 0.5)
        return step._tag === "Retry" ? step.delayMs : step._tag
      }))
      expect(waited).toEqual([50, 100, 250, 400])
    }))
})
