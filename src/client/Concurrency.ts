/**
 * How many blob requests an export keeps in flight: a number the user pins (`--concurrency N`), or,
 * by default, a limit that finds what the service and this process can take. Plain code that the
 * blob fetcher calls per request (BlobFetcher.ts): a few numbers, no allocation.
 *
 * The adaptive limit works in rounds of one round trip (a round ends when a request sent during it
 * is answered) and looks at two signals:
 * - **Throttling.** A 429 or 503 answer cuts the limit to four fifths of what the service answered
 *   in the last round (or of the limit, if less), once per round (the answers of requests sent before
 *   the cut are the same event): a limit far above the service's is corrected in one step, not one
 *   fifth per round trip; the request itself waits out its Retry-After
 *   as the retry policy says. Afterwards the limit grows by one request per round, and by one per
 *   four rounds near where it was throttled, so it settles just under the service's limit with few
 *   429s (additive increase, multiplicative decrease, as TCP and Netflix's concurrency-limits do).
 * - **Latency.** Each round's fastest answer against the fastest of the last seconds: while it stays
 *   flat, more requests in flight mean more throughput, and a round whose window was full doubles the
 *   limit (slow start: from 32, 256 are in flight after three round trips) until the first throttle,
 *   then grows additively. When the fastest answer takes twice as long, requests are queueing (in
 *   the service, or in this process when it is the CPU that limits), and more in flight would only
 *   add memory: the limit shrinks by a tenth per round, never below where it started.
 * A round whose window was not full (the listing or the byte budget held requests back) says
 * nothing about more requests, so the limit does not grow on it.
 */

/** Where the adaptive limit starts, and its floor for latency (throttling may take it lower). */
export const INITIAL_CONCURRENCY = 32
/** The cap of the adaptive limit unless `--max-concurrency` says otherwise. */
export const DEFAULT_MAX_CONCURRENCY = 1024

/** The cut on a throttled answer. */
const THROTTLE_BACKOFF = 0.8
/** The cut on a round that shows queueing. */
const LATENCY_BACKOFF = 0.9
/** A round's fastest answer this many times the baseline (plus NOISE_MS): requests are queueing. */
const QUEUEING = 2
/** Up to this many times the baseline (plus NOISE_MS) the latency is flat: the limit may grow. */
const FLAT = 1.25
/** Timer and event-loop jitter that says nothing about the service. */
const NOISE_MS = 1
/** The baseline is the fastest answer of the current and the previous epoch of this length. */
const EPOCH_MS = 10_000
/** Within this fraction of the last throttled limit, growth slows to one request per SETTLE_ROUNDS. */
const NEAR_CEILING = 0.9
const SETTLE_ROUNDS = 4
/** Rounds without a throttle after which the last throttled limit is forgotten (the service may take more now). */
const FORGET_CEILING_ROUNDS = 256

export class ConcurrencyLimit {
  /** Requests in flight. */
  inFlight = 0
  /** Answers that said the service throttles (429, 503). */
  throttled = 0
  /** The highest limit so far. */
  highest: number

  private limit: number
  private slowStart = true
  private roundStart = Number.NEGATIVE_INFINITY
  private roundFastest = Number.POSITIVE_INFINITY
  private roundPeak = 0
  /** Successful answers in this round and the last: what the service takes per round trip. */
  private roundAnswered = 0
  private lastRoundAnswered = 0
  private epochStart = 0
  private epochFastest = Number.POSITIVE_INFINITY
  private previousEpochFastest = Number.POSITIVE_INFINITY
  /** When the limit was last cut for a throttle: throttled answers to requests sent before it are that same event. */
  private cutAt = Number.NEGATIVE_INFINITY
  /** The limit at the last throttle, while remembered. */
  private ceiling = Number.POSITIVE_INFINITY
  private roundsSinceThrottle = 0

  private constructor(
    /** False: the limit is the pinned number. */
    readonly adaptive: boolean,
    initial: number,
    private readonly max: number,
    private readonly floor: number
  ) {
    this.limit = initial
    this.highest = initial
  }

  /** `--concurrency N`: N in flight, whatever happens (throttled answers are still counted). */
  static fixed(concurrency: number): ConcurrencyLimit {
    return new ConcurrencyLimit(false, concurrency, concurrency, concurrency)
  }

  /** The default: found as the export runs, between 1 and `max`. */
  static adaptive(max: number = DEFAULT_MAX_CONCURRENCY, initial: number = INITIAL_CONCURRENCY): ConcurrencyLimit {
    const start = Math.min(initial, max)
    return new ConcurrencyLimit(true, start, max, start)
  }

  /** Requests that may be in flight now. */
  get current(): number {
    return Math.floor(this.limit)
  }

  /** A request leaves. */
  sent(): void {
    if (++this.inFlight > this.roundPeak) this.roundPeak = this.inFlight
  }

  /** The request sent at `sentAt` (performance.now()) got its whole answer at `now`. */
  answered(sentAt: number, now: number): void {
    this.inFlight--
    if (!this.adaptive) return
    const took = now - sentAt
    this.roundAnswered++
    if (took < this.roundFastest) this.roundFastest = took
    if (sentAt >= this.roundStart) this.endRound(now)
  }

  /** The request sent at `sentAt` was answered 429 or 503 at `now`. */
  throttle(sentAt: number, now: number): void {
    this.inFlight--
    this.throttled++
    if (!this.adaptive || sentAt < this.cutAt) return
    const served = Math.max(this.lastRoundAnswered, this.roundAnswered)
    this.ceiling = this.limit
    this.limit = Math.max(1, (served > 0 ? Math.min(this.limit, served) : this.limit) * THROTTLE_BACKOFF)
    this.slowStart = false
    this.cutAt = now
    this.roundsSinceThrottle = 0
  }

  /** The request ended otherwise (a failure, a redirect to follow): it says nothing about the limit. */
  ended(): void {
    this.inFlight--
  }

  private endRound(now: number): void {
    const fastest = this.roundFastest
    if (now - this.epochStart >= EPOCH_MS) {
      this.previousEpochFastest = this.epochFastest
      this.epochFastest = Number.POSITIVE_INFINITY
      this.epochStart = now
    }
    if (fastest < this.epochFastest) this.epochFastest = fastest
    const baseline = Math.min(this.epochFastest, this.previousEpochFastest)
    const full = this.roundPeak >= this.current
    if (++this.roundsSinceThrottle >= FORGET_CEILING_ROUNDS) this.ceiling = Number.POSITIVE_INFINITY
    if (fastest > baseline * QUEUEING + NOISE_MS) {
      this.slowStart = false
      this.limit = Math.max(this.floor, this.limit * LATENCY_BACKOFF)
    } else if (full && fastest <= baseline * FLAT + NOISE_MS) {
      this.limit = Math.min(this.max, this.slowStart ? this.limit * 2 : this.limit + this.step())
      if (this.limit > this.highest) this.highest = Math.floor(this.limit)
    }
    this.roundStart = now
    this.roundFastest = Number.POSITIVE_INFINITY
    this.roundPeak = this.inFlight
    this.lastRoundAnswered = this.roundAnswered
    this.roundAnswered = 0
  }

  /** The additive increase of one round after slow start. */
  private step(): number {
    if (this.limit < this.ceiling * NEAR_CEILING) return 1
    return this.roundsSinceThrottle % SETTLE_ROUNDS === 0 ? 1 : 0
  }
}
