import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { TOOL } from "../domain/Tool.ts"
import { defaultAgentOptions, makeAgent } from "../net/Agent.ts"
import * as Metrics from "./Metrics.ts"

/** What the exporters send where (Telemetry.fromEnv reads it from the standard variables). */
export interface SignalSettings {
  /** Where this signal's payloads are POSTed (…/v1/traces, …/v1/metrics). */
  readonly url: string
  readonly protocol: "protobuf" | "json"
  readonly headers: Readonly<Record<string, string>>
  readonly exportIntervalMs: number
}

export interface OtlpSettings {
  readonly serviceName: string
  readonly traces: SignalSettings | undefined
  readonly metrics: SignalSettings | undefined
  /** How long the last export may take when the process ends. */
  readonly shutdownTimeoutMs: number
}

/**
 * The OTLP/HTTP exporters of @effect/opentelemetry (no OpenTelemetry SDK): Effect's spans and its
 * metric registry, batched and POSTed in the background, flushed when the run ends. Loaded only when
 * telemetry is configured (Telemetry.ts). Requests go through the same agent as the client's (so
 * HTTPS_PROXY and NO_PROXY apply: net/Agent.ts), untraced.
 */
export const layer = (settings: OtlpSettings): Layer.Layer<never> => {
  const resource = { serviceName: settings.serviceName, serviceVersion: TOOL.version }
  const shutdownTimeout = Duration.millis(settings.shutdownTimeoutMs)
  const serialization = (
    signal: SignalSettings
  ) => (signal.protocol === "json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf)
  const traces = settings.traces === undefined
    ? Layer.empty
    : OtlpTracer.layer({
      url: settings.traces.url,
      resource,
      headers: settings.traces.headers,
      exportInterval: Duration.millis(settings.traces.exportIntervalMs),
      shutdownTimeout
    }).pipe(Layer.provide(serialization(settings.traces)))
  const metrics = settings.metrics === undefined
    ? Layer.empty
    : Layer.merge(
      Layer.effectDiscard(Effect.sync(() => {
        Metrics.requestTiming.enabled = true
      })),
      OtlpMetrics.layer({
        url: settings.metrics.url,
        resource,
        headers: settings.metrics.headers,
        exportInterval: Duration.millis(settings.metrics.exportIntervalMs),
        shutdownTimeout
      }).pipe(Layer.provide(serialization(settings.metrics)))
    )
  return Layer.merge(traces, metrics).pipe(Layer.provide(httpClient))
}

const httpClient = NodeHttpClient.layerUndiciWithoutDispatcher.pipe(
  Layer.provide(
    Layer.scoped(
      NodeHttpClient.Dispatcher,
      Effect.acquireRelease(
        Effect.sync(() => makeAgent({ ...defaultAgentOptions, concurrency: 2 })),
        ({ agent }) => Effect.promise(() => agent.destroy())
      ).pipe(Effect.map(({ dispatcher }) => dispatcher))
    )
  )
)
