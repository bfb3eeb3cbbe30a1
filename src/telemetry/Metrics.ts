import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import * as MetricState from "effect/MetricState"
import * as Schedule from "effect/Schedule"

/**
 * The metrics of a run, in Effect's metric registry, which the OTLP exporter (Otlp.ts) sends when
 * telemetry is on. Kept cheap enough to record always: counters are fed from an export's `Counters`
 * once a second, never per partition; a request's latency is one histogram update on a hook resolved
 * once (no Effect, no allocation).
 */

export const partitions = Metric.counter("catalog_export.partitions", {
  description: "Partitions exported (rows written), by catalog and layer",
  incremental: true
})

export const bytes = Metric.counter("catalog_export.bytes", {
  description: "Blob bytes exported, by catalog and layer",
  incremental: true
})

const RETRIES = "catalog_export.retries"

const retries = Metric.counter(RETRIES, {
  description: "Requests retried after a transient failure, by reason (the HTTP status, or the transport error code)",
  incremental: true
})

export const exportDuration = Metric.histogram(
  "catalog_export.export.duration",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 16 }),
  "Seconds one export took, by catalog, layer and outcome"
)

const requestBoundaries = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 18 })
const requestDuration = (api: "blob" | "api") =>
  Metric.fromMetricKey(
    MetricKey.histogram(
      "catalog_export.request.duration",
      requestBoundaries,
      "Seconds per HTTP request: blob downloads until the whole answer arrived, other API requests until the response headers"
    ).pipe(MetricKey.tagged("api", api))
  )
const blobRequests = requestDuration("blob")
const apiRequests = requestDuration("api")
const NO_TAGS: ReadonlyArray<MetricLabel.MetricLabel> = []

/** Requests are timed only while the metrics are exported (Otlp.ts turns it on): otherwise no clock is read. */
export const requestTiming = { enabled: false }

/** One blob request answered (or failed) after `ms`: called by the fetch loop for every request. */
export const blobAnswered = (ms: number): void => blobRequests.unsafeUpdate(ms / 1000, NO_TAGS)

/** One API request's response headers arrived after `ms`. */
export const apiAnswered = (ms: number): void => apiRequests.unsafeUpdate(ms / 1000, NO_TAGS)

/** One request retried, for `reason` (Retry.ts `retryReason`): a plain call, as the blob fetcher runs no Effect. */
export const retried = (reason: string): void => retries.unsafeUpdate(1, [MetricLabel.make("reason", reason)])

/** Retries this process counted so far, every reason: what a run retried is the difference over it. */
export const retriesSoFar: Effect.Effect<number> = Effect.map(
  Metric.snapshot,
  (pairs) =>
    pairs.reduce(
      (n, { metricKey, metricState }) =>
        metricKey.name === RETRIES && MetricState.isCounterState(metricState) ? n + Number(metricState.count) : n,
      0
    )
)

interface Observed {
  readonly catalog: string
  readonly layer: string
  readonly counters: { readonly partitions: number; readonly bytes: number; readonly startedAt: number }
}

/**
 * Feeds one export's counters to the metrics every second while the scope is open, and records its
 * duration and outcome when it closes.
 */
export const observe = (observed: Observed) =>
  Effect.gen(function*() {
    const tagged = <T, I, O>(metric: Metric.Metric<T, I, O>) =>
      metric.pipe(Metric.tagged("catalog", observed.catalog), Metric.tagged("layer", observed.layer))
    const partitionsOf = tagged(partitions)
    const bytesOf = tagged(bytes)
    let sent = { partitions: 0, bytes: 0 }
    const feed = Effect.sync(() => {
      const { counters } = observed
      partitionsOf.unsafeUpdate(counters.partitions - sent.partitions, NO_TAGS)
      bytesOf.unsafeUpdate(counters.bytes - sent.bytes, NO_TAGS)
      sent = { partitions: counters.partitions, bytes: counters.bytes }
    })
    yield* Effect.forkScoped(Effect.repeat(feed, Schedule.spaced("1 second")))
    yield* Effect.addFinalizer((exit) =>
      Effect.zipRight(
        feed,
        Effect.sync(() =>
          tagged(exportDuration).pipe(Metric.tagged("outcome", exit._tag === "Success" ? "done" : "failed"))
            .unsafeUpdate((Date.now() - observed.counters.startedAt) / 1000, NO_TAGS)
        )
      )
    )
  })
