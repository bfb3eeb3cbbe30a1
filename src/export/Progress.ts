import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ConcurrencyLimit } from "../client/Concurrency.ts"
import { MetadataApi } from "../client/MetadataApi.ts"
import { type RetryObserver, RetryTally } from "../client/Retry.ts"
import * as Metrics from "../telemetry/Metrics.ts"
import type { ByteBudget } from "./Budget.ts"
import type { Plan } from "./Plan.ts"

/**
 * Counters of one export, shared by every stage: plain numbers, since the fibers share one thread,
 * and read on a timer by whoever shows them (a progress bar, JSON lines, metrics, the run report).
 * Nothing here runs per partition beyond the increments the export makes anyway.
 */
export class Counters implements RetryObserver {
  partitions = 0
  deleted = 0
  bytes = 0
  skippedParts = 0
  /** Partitions of parts an interrupted run finished: done, but not by this run (its rate leaves them out). */
  resumed = 0
  retries = 0
  readonly retriesByReason: Record<string, number> = {}
  /** The blob requests of the run in progress: in flight, the limit (fixed or found), throttled answers. */
  fetching: Pick<ConcurrencyLimit, "inFlight" | "current" | "highest" | "throttled" | "adaptive"> | undefined =
    undefined
  /** The byte budget of the blob downloads (Budget.ts): its limit and the most it held. */
  buffer: Pick<ByteBudget, "limit" | "peak"> | undefined = undefined
  /** Partitions expected, when known: from the versions answer (a pinned version), else once every part is listed. */
  total: number | undefined = undefined
  totalFrom: "versions" | "listing" | undefined = undefined
  readonly startedAt = Date.now()
  private listingsOpen = 0
  private listed = 0
  /** Recent (time, partitions, bytes) samples: the rate over the last seconds, not the whole run. */
  private readonly window: Array<readonly [number, number, number]> = []

  retried(reason: string): void {
    this.retries++
    this.retriesByReason[reason] = (this.retriesByReason[reason] ?? 0) + 1
  }

  /** The total from the service's count of the pinned version's partitions. */
  expect(total: number): void {
    this.total = total
    this.totalFrom = "versions"
  }

  /** `parts` listings start; the partitions counted so far come from parts finished earlier. */
  listingStarts(parts: number): void {
    this.listingsOpen = parts
    this.listed = this.partitions
    this.resumed = this.partitions
  }

  /** A part's listing ended with `count` partitions; when it was the last, the total is known. */
  listingEnded(count: number): void {
    this.listed += count
    if (--this.listingsOpen === 0 && this.total === undefined) {
      this.total = this.listed
      this.totalFrom = "listing"
    }
  }

  snapshot(now = Date.now()): Snapshot {
    const window = this.window
    window.push([now, this.partitions, this.bytes])
    while (window.length > 2 && now - window[1]![0] >= RATE_WINDOW_MS) window.shift()
    const [t0, p0, b0] = window[0]!
    const elapsedMs = now - this.startedAt
    // Over the window once it spans a second, else over the run so far.
    const [span, partitions, bytes] = now - t0 >= 1000
      ? [now - t0, this.partitions - p0, this.bytes - b0]
      : [elapsedMs, this.partitions - this.resumed, this.bytes]
    const perSecond = rate(partitions, span)
    const total = this.total ?? null
    return {
      partitions: this.partitions,
      total,
      totalFrom: this.totalFrom ?? null,
      percent: total === null ? null : total === 0 ? 100 : Math.min(100, (this.partitions * 100) / total),
      deleted: this.deleted,
      bytes: this.bytes,
      retries: this.retries,
      inFlight: this.fetching?.inFlight ?? 0,
      limit: this.fetching?.current ?? null,
      throttled: this.fetching?.throttled ?? 0,
      elapsedMs,
      rate: perSecond,
      bytesRate: rate(bytes, span),
      etaSeconds: total === null || perSecond <= 0
        ? null
        : Math.max(0, Math.ceil((total - this.partitions) / perSecond))
    }
  }
}

const RATE_WINDOW_MS = 10_000

/** What a progress bar and a JSON progress line show of one export. */
export interface Snapshot {
  readonly partitions: number
  readonly total: number | null
  readonly totalFrom: "versions" | "listing" | null
  readonly percent: number | null
  readonly deleted: number
  readonly bytes: number
  readonly retries: number
  /** Blob requests in flight now. */
  readonly inFlight: number
  /** How many may be in flight: pinned, or as found so far; null before fetching starts. */
  readonly limit: number | null
  /** Answers that said the service throttles (429, 503). */
  readonly throttled: number
  readonly elapsedMs: number
  /** Partitions per second, over the last 10 s. */
  readonly rate: number
  /** Bytes per second, over the last 10 s. */
  readonly bytesRate: number
  readonly etaSeconds: number | null
}

export const rate = (count: number, elapsedMs: number) => (elapsedMs <= 0 ? 0 : (count * 1000) / elapsedMs)

export type ProgressStyle = "tty" | "json" | "none"

/** One running export as a progress view sees it. */
export interface Tracked {
  readonly label: string
  readonly catalog: string
  readonly layer: string
  readonly counters: Counters
}

/**
 * Where the progress of running exports is shown; the CLI provides one (a bar per export on a
 * terminal, JSON lines otherwise). `track` shows an export until the scope closes. Without one,
 * nothing is shown.
 */
export interface ProgressView {
  readonly track: (tracked: Tracked) => Effect.Effect<void, never, Scope.Scope>
}

export class Progress extends Context.Reference<Progress>()("catalog-export/export/Progress", {
  defaultValue: (): ProgressView => ({ track: () => Effect.void })
}) {}

/**
 * Runs one export with its progress shown, its retries counted in `counters`, and its counters fed
 * to the metrics (`Metrics.observe`). The total is taken from the versions answer when the plan pins
 * a version whose partitions it counts (a full export of a versioned layer).
 */
export const tracking = <A, E, R>(
  plan: Plan,
  label: string,
  counters: Counters,
  effect: Effect.Effect<A, E, R>,
  /** False when `effect` exports a part of the layer (a shard): the versions answer counts all of it. */
  { wholeLayer = true }: { readonly wholeLayer?: boolean } = {}
) =>
  Effect.scoped(
    Effect.gen(function*() {
      // The total comes with the versions answer; the export does not wait for it (a round trip before the listing).
      if (wholeLayer) {
        yield* Effect.forkScoped(Effect.flatMap(expectedPartitions(plan), (total) =>
          Effect.sync(() => {
            if (total !== undefined) counters.expect(total)
          })))
      }
      const tracked: Tracked = { label, catalog: plan.catalogHrn, layer: plan.layerId, counters }
      yield* (yield* Progress).track(tracked)
      yield* Metrics.observe(tracked)
      return yield* Effect.provideService(effect, RetryTally, counters)
    })
  )

/**
 * How many partitions a full export of a pinned version lists: the versions answer's `partitionCounts`
 * (facts §3). Undefined for changes, volatile layers, or a service that does not count; progress is
 * never worth failing an export for.
 */
export const expectedPartitions = (plan: Plan): Effect.Effect<number | undefined, never, MetadataApi> =>
  plan.layerType !== "versioned" || plan.mode !== "full"
    ? Effect.succeed(undefined)
    : Effect.gen(function*() {
      const metadata = yield* MetadataApi
      const info = yield* Stream.runHead(
        metadata.versions(plan.catalogHrn, { startVersion: plan.version - 1, endVersion: plan.version })
      )
      return Option.getOrUndefined(info)?.partitionCounts?.[plan.layerId]
    }).pipe(Effect.orElseSucceed(() => undefined))
