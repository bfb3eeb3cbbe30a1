import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleInterval from "effect/ScheduleInterval"
import * as Stream from "effect/Stream"
import * as Metrics from "../telemetry/Metrics.ts"
import { describeFailure, type HttpFailure } from "./ErrorMapping.ts"
import { ApiError, RegionUnavailable, RetryBudgetExhausted, TransportError } from "./Errors.ts"

/**
 * The retry policy of every request, in one place: which failures are transient, how long to wait
 * before the next attempt (full-jitter exponential backoff, or the server's Retry-After), and when
 * to give up (retries, time spent retrying, an outage in a multi-region export). `nextRetry` is the
 * policy; `retrySchedule` applies it to effects and streams (Http.ts) and the blob fetcher, which
 * runs no Effect per blob, calls it directly (BlobFetcher.ts).
 */

export interface RetryPolicyShape {
  /** Retries per request (attempts = retries + 1). */
  readonly maxRetries: number
  /** Total time a request may spend retrying; a wait that would pass it fails at once. */
  readonly maxElapsed: Duration.DurationInput
  /** Backoff before retry n is uniform in [0, min(maxDelay, baseDelay * 2^n)]. */
  readonly baseDelay: Duration.DurationInput
  /** Cap of any single wait, Retry-After included. */
  readonly maxDelay: Duration.DurationInput
}

export class RetryPolicy extends Context.Tag("catalog-export/client/RetryPolicy")<RetryPolicy, RetryPolicyShape>() {
  static readonly defaults: RetryPolicyShape = {
    maxRetries: 20,
    maxElapsed: "10 minutes",
    baseDelay: "250 millis",
    maxDelay: "60 seconds"
  }
  static readonly layer = (options: Partial<RetryPolicyShape> = {}) =>
    Layer.succeed(RetryPolicy, { ...RetryPolicy.defaults, ...options })
}

/** The policy in milliseconds, decoded once. */
export interface RetryLimits {
  readonly maxRetries: number
  readonly maxElapsedMs: number
  readonly baseDelayMs: number
  readonly maxDelayMs: number
}

export const retryLimits = (policy: RetryPolicyShape): RetryLimits => ({
  maxRetries: policy.maxRetries,
  maxElapsedMs: Duration.toMillis(policy.maxElapsed),
  baseDelayMs: Duration.toMillis(policy.baseDelay),
  maxDelayMs: Duration.toMillis(policy.maxDelay)
})

export const isRetriableStatus = (status: number) =>
  status === 408 || status === 429 || (status >= 500 && status <= 599)

/** 408, 429, 5xx, and transport failures other than DNS, TLS and invalid requests. */
export const isTransient = (error: unknown): error is HttpFailure =>
  (error instanceof ApiError && isRetriableStatus(error.status)) || (error instanceof TransportError && error.retriable)

/** A failure that looks like the serving region is down: 5xx, or no (complete) answer at all. Not 408 or 429. */
export const isOutage = (error: unknown): boolean =>
  (error instanceof ApiError && error.status >= 500) || (error instanceof TransportError && error.retriable)

/**
 * Outage failures in a row after which a request gives up with RegionUnavailable instead of retrying
 * on, for code that has another region to turn to (an export of a multi-region catalog sets it
 * around its run); undefined everywhere else. Read once per failure, never per success.
 */
export const outageLimit: FiberRef.FiberRef<number | undefined> = FiberRef.unsafeMake<number | undefined>(undefined)

/**
 * Milliseconds to wait before retry number `retries + 1` of a request that has spent `elapsedMs`
 * retrying: full-jitter exponential backoff, or the server's Retry-After, capped by `maxDelayMs`.
 * Undefined when the budget (retries or elapsed time) does not allow another attempt.
 */
export const retryDelay = (
  limits: RetryLimits,
  retries: number,
  elapsedMs: number,
  retryAfterMs: number | undefined,
  random: number
): number | undefined => {
  const ceiling = Math.min(limits.maxDelayMs, limits.baseDelayMs * 2 ** retries)
  const delay = Math.min(limits.maxDelayMs, retryAfterMs ?? Math.floor(random * ceiling))
  return retries >= limits.maxRetries || elapsedMs + delay > limits.maxElapsedMs ? undefined : delay
}

/** The failures of one request so far (since its budget last started afresh). */
export interface RetryCount {
  retries: number
  /** Outage failures in a row. */
  outages: number
  /** When the first failure came, in epoch milliseconds. */
  startedAt: number
}

/** What the policy says after a failure: wait `delayMs` and try again, or stop (and why). */
export type RetryStep =
  | {
    readonly _tag: "Retry"
    readonly error: HttpFailure
    readonly attempt: number
    readonly delayMs: number
    /** When the request's retry budget ends (epoch milliseconds): it gives up then at the latest. */
    readonly until: number
  }
  | { readonly _tag: "Permanent" }
  | { readonly _tag: "Exhausted"; readonly error: HttpFailure; readonly retries: number; readonly elapsedMs: number }
  | { readonly _tag: "Outage"; readonly error: HttpFailure; readonly failures: number }

export type Retrying = Extract<RetryStep, { readonly _tag: "Retry" }>

const PERMANENT: RetryStep = { _tag: "Permanent" }

/**
 * The policy's answer to `error` at `now`, counting it into `count` (updated in place): `Retry` after
 * `retryDelay`, or why not. `maxOutages`: the failing request's `outageLimit`.
 */
export const nextRetry = (
  limits: RetryLimits,
  maxOutages: number | undefined,
  count: RetryCount,
  error: unknown,
  now: number,
  random: number
): RetryStep => {
  if (!isTransient(error)) return PERMANENT
  count.outages = isOutage(error) ? count.outages + 1 : 0
  if (maxOutages !== undefined && count.outages >= maxOutages) return { _tag: "Outage", error, failures: count.outages }
  if (count.retries === 0) count.startedAt = now
  const elapsedMs = now - count.startedAt
  const delayMs = retryDelay(
    limits,
    count.retries,
    elapsedMs,
    error._tag === "ApiError" ? error.retryAfterMs : undefined,
    random
  )
  if (delayMs === undefined) return { _tag: "Exhausted", error, retries: count.retries, elapsedMs }
  count.retries++
  return { _tag: "Retry", error, attempt: count.retries, delayMs, until: count.startedAt + limits.maxElapsedMs }
}

/** What a request that stopped retrying after `step` fails with: the error itself, or why the policy gave up on it. */
export const gaveUp = <E>(error: E, step: RetryStep): E | RetryBudgetExhausted | RegionUnavailable => {
  switch (step._tag) {
    case "Exhausted":
      return new RetryBudgetExhausted({
        method: step.error.method,
        url: step.error.url,
        retries: step.retries,
        elapsedMs: step.elapsedMs,
        lastError: step.error
      })
    case "Outage":
      return new RegionUnavailable({
        method: step.error.method,
        url: step.error.url,
        failures: step.failures,
        lastError: step.error
      })
    default:
      return error
  }
}

/** A low-cardinality name of a transient failure, for counting retries: the status, or the transport error's code. */
export const retryReason = (error: HttpFailure): string =>
  error._tag === "ApiError" ? String(error.status) : error.code ?? "transport"

export interface RetryObserver {
  readonly retried: (reason: string) => void
}

/**
 * Where the retries of the requests a fiber makes are counted besides the run's metric: one
 * export's counters (its progress bar and run report), provided around that export.
 */
export class RetryTally extends Context.Reference<RetryTally>()("catalog-export/client/RetryTally", {
  defaultValue: (): RetryObserver => ({ retried: () => {} })
}) {}

/** Counts a retry: the run's metric (by reason) and the export's tally. */
export const recordRetry = (tally: RetryObserver, step: Retrying): void => {
  const reason = retryReason(step.error)
  Metrics.retried(reason)
  tally.retried(reason)
}

/** The fields of every retry's log line, the first of its kind or not. */
const retryFields = (step: Retrying) =>
  Effect.annotateLogs({
    method: step.error.method,
    url: step.error.url,
    failure: describeFailure(step.error),
    attempt: step.attempt,
    delayMs: step.delayMs
  })

/** How a retry is logged (`retryLogger`). */
export type RetryLog = (step: Retrying) => Effect.Effect<void>

/**
 * The log of one client's retries: the first retry of each kind (its reason: a status, or a transport
 * error's code) says on stderr what is retried and until when, so that a run that waits is never
 * silent; the others are debug lines. Nothing is done per request that is not retried.
 */
export const retryLogger = (limits: RetryLimits): RetryLog => {
  const said = new Set<string>()
  return (step) => {
    const reason = retryReason(step.error)
    if (said.has(reason)) return Effect.logDebug("retrying request").pipe(retryFields(step))
    said.add(reason)
    return Effect.logInfo(
      `retrying ${step.error.method} ${step.error.url} (${describeFailure(step.error)}): transient failures are ` +
        `retried for up to ${Duration.format(Duration.millis(limits.maxElapsedMs))} or ${limits.maxRetries} retries ` +
        `per request (this one until ${new Date(step.until).toISOString().slice(11, 19)} UTC at the latest); ` +
        `further retries after ${reason} are logged at debug level only`
    ).pipe(retryFields(step))
  }
}

const observe = (log: RetryLog) => (step: RetryStep) =>
  step._tag === "Retry"
    ? Effect.zipRight(Effect.map(RetryTally, (tally) => recordRetry(tally, step)), log(step))
    : Effect.void

/**
 * The policy as a Schedule over failures: it continues after `delayMs` while `nextRetry` says Retry
 * (counting each retry and logging it with `log`), and its last output says why it stopped (`gaveUp`).
 * The outage limit is the failing fiber's; the jitter comes from Effect's Random.
 */
export const retrySchedule = (
  limits: RetryLimits,
  log: RetryLog = retryLogger(limits)
): Schedule.Schedule<RetryStep, unknown> =>
  Schedule.makeWithState<RetryCount, unknown, RetryStep>(
    { retries: 0, outages: 0, startedAt: 0 },
    (now, error, state) =>
      Effect.zipWith(FiberRef.get(outageLimit), Random.next, (maxOutages, random) => {
        const count = { ...state }
        const step = nextRetry(limits, maxOutages, count, error, now, random)
        const decision = step._tag === "Retry"
          ? ScheduleDecision.continueWith(ScheduleInterval.after(now + step.delayMs))
          : ScheduleDecision.done
        return [count, step, decision] as const
      })
  ).pipe(Schedule.tapOutput(observe(log)))

/** Runs `effect` again on transient failures under `schedule`; gives up as `gaveUp` says. */
export const retryEffect =
  (schedule: Schedule.Schedule<RetryStep, unknown>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | RetryBudgetExhausted | RegionUnavailable, R> =>
    Effect.retryOrElse(effect, schedule, (error, step) => Effect.fail(gaveUp(error, step)))

/**
 * Runs `stream` again from its start on transient failures under `schedule`; the budget starts
 * afresh whenever an element comes through (Stream.retry), so progress is what the elements are.
 */
export const retryStream =
  (schedule: Schedule.Schedule<RetryStep, unknown>) =>
  <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E | RetryBudgetExhausted | RegionUnavailable, R> =>
    Stream.suspend(() => {
      let last: RetryStep = PERMANENT
      const remembered = Schedule.tapOutput(schedule, (step) => Effect.sync(() => void (last = step)))
      return stream.pipe(
        Stream.pipeThroughChannel(nonEmptyChunks<A, E>()),
        Stream.retry(remembered),
        Stream.mapError((error) => gaveUp(error, last))
      )
    })

// Stream.retry starts its schedule afresh on every chunk that passes, and most operators pass
// empty ones on (a filter that kept nothing, bytes that completed no element): those are no progress.
const nonEmptyChunks = <A, E>(): Channel.Channel<Chunk.Chunk<A>, Chunk.Chunk<A>, E, E, unknown, unknown> => {
  const loop: Channel.Channel<Chunk.Chunk<A>, Chunk.Chunk<A>, E, E, unknown, unknown> = Channel.readWithCause({
    onInput: (chunk: Chunk.Chunk<A>) => (Chunk.isEmpty(chunk) ? loop : Channel.zipRight(Channel.write(chunk), loop)),
    onFailure: Channel.failCause,
    onDone: Channel.succeed
  })
  return loop
}
