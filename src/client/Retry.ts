import { Context, Duration, FiberRef, Layer } from "effect"
import { ApiError, TransportError } from "./Errors.ts"

/**
 * The retry policy of every request, in one place: which failures are transient, and how long to
 * wait before the next attempt. The general client (Http.ts) and the blob fetcher (BlobFetcher.ts)
 * both decide with `retryDelay`.
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

export const isRetriableStatus = (status: number) => status === 408 || status === 429 || (status >= 500 && status <= 599)

/** 408, 429, 5xx, and transport failures other than DNS, TLS and invalid requests. */
export const isTransient = (error: unknown): error is ApiError | TransportError =>
  (error instanceof ApiError && isRetriableStatus(error.status)) || (error instanceof TransportError && error.retriable)

/** A failure that looks like the serving region is down: 5xx, or no (complete) answer at all. Not 408 or 429. */
export const isOutage = (error: unknown): boolean =>
  (error instanceof ApiError && error.status >= 500) || (error instanceof TransportError && error.retriable)

/**
 * Outage failures in a row after which a request gives up with RegionUnavailable instead of retrying
 * on, for code that has another region to turn to (an export of a multi-region catalog sets it
 * around its run); undefined everywhere else. Read once per failing request, never per success.
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

/** A low-cardinality name of a transient failure, for counting retries: the status, or the transport error's code. */
export const retryReason = (error: ApiError | TransportError): string =>
  error._tag === "ApiError" ? String(error.status) : error.code ?? "transport"

export interface RetryObserver {
  readonly retried: (reason: string) => void
}

/**
 * Where the retries of the requests a fiber makes are counted besides the client's total: one
 * export's counters (its progress bar and run report), provided around that export.
 */
export class RetryTally extends Context.Reference<RetryTally>()("catalog-export/client/RetryTally", {
  defaultValue: (): RetryObserver => ({ retried: () => {} })
}) {}
