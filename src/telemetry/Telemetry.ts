import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { OtlpSettings, SignalSettings } from "./Otlp.ts"

/**
 * OpenTelemetry export, configured by the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT and the
 * rest): traces of the export stages and the metrics of Metrics.ts, sent over OTLP/HTTP. When no
 * endpoint is set, nothing is loaded (the exporter is a chunk of its own) and nothing is sent.
 */

export type Signal = "traces" | "metrics"

type Env = Readonly<Record<string, string | undefined>>

const SIGNAL_PATH: Record<Signal, string> = { traces: "/v1/traces", metrics: "/v1/metrics" }

const value = (env: Env, name: string) => {
  const v = env[name]?.trim()
  return v === undefined || v === "" ? undefined : v
}

const milliseconds = (env: Env, name: string, fallback: number) => {
  const n = Number(value(env, name))
  return Number.isFinite(n) && n > 0 ? n : fallback
}

/** `key1=value1,key2=value2`, values percent-encoded (the OTLP exporter spec). */
export const parseHeaders = (raw: string | undefined): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const pair of (raw ?? "").split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    try {
      headers[decodeURIComponent(pair.slice(0, at).trim()).toLowerCase()] = decodeURIComponent(
        pair.slice(at + 1).trim()
      )
    } catch {
      continue
    }
  }
  return headers
}

/**
 * The settings the standard variables ask for, and why a signal is not exported when it was asked
 * for in a way this tool does not speak (gRPC, another exporter). Undefined settings: no telemetry.
 */
export const fromEnv = (
  env: Env = process.env
): { readonly settings: OtlpSettings | undefined; readonly warnings: ReadonlyArray<string> } => {
  const warnings: Array<string> = []
  if (value(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return { settings: undefined, warnings }
  const base = value(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
  const signal = (name: Signal): SignalSettings | undefined => {
    const upper = name.toUpperCase()
    const url = value(env, `OTEL_EXPORTER_OTLP_${upper}_ENDPOINT`) ??
      (base === undefined ? undefined : base.replace(/\/+$/, "") + SIGNAL_PATH[name])
    if (url === undefined) return undefined
    const exporter = value(env, `OTEL_${upper}_EXPORTER`)?.toLowerCase() ?? "otlp"
    if (exporter === "none") return undefined
    if (exporter !== "otlp") {
      warnings.push(`OTEL_${upper}_EXPORTER=${exporter} is not supported (only otlp): ${name} are not exported`)
      return undefined
    }
    const protocol = value(env, `OTEL_EXPORTER_OTLP_${upper}_PROTOCOL`) ?? value(env, "OTEL_EXPORTER_OTLP_PROTOCOL") ??
      "http/protobuf"
    if (protocol !== "http/protobuf" && protocol !== "http/json") {
      warnings.push(
        `OTEL_EXPORTER_OTLP_PROTOCOL ${protocol} is not supported (http/protobuf or http/json): ${name} are not exported`
      )
      return undefined
    }
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
      warnings.push(`the OTLP ${name} endpoint is not an http(s) URL: ${name} are not exported`)
      return undefined
    }
    return {
      url,
      protocol: protocol === "http/json" ? "json" : "protobuf",
      headers: {
        ...parseHeaders(value(env, "OTEL_EXPORTER_OTLP_HEADERS")),
        ...parseHeaders(value(env, `OTEL_EXPORTER_OTLP_${upper}_HEADERS`))
      },
      exportIntervalMs: name === "metrics"
        ? milliseconds(env, "OTEL_METRIC_EXPORT_INTERVAL", 60_000)
        : milliseconds(env, "OTEL_BSP_SCHEDULE_DELAY", 5_000)
    }
  }
  const traces = signal("traces")
  const metrics = signal("metrics")
  if (traces === undefined && metrics === undefined) return { settings: undefined, warnings }
  return {
    settings: {
      serviceName: value(env, "OTEL_SERVICE_NAME") ?? "catalog-export",
      traces,
      metrics,
      shutdownTimeoutMs: milliseconds(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)
    },
    warnings
  }
}

/** Telemetry for the whole run, as the environment asks; flushed when the run ends. */
export const layer: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.gen(function*() {
    const { settings, warnings } = fromEnv()
    for (const warning of warnings) yield* Effect.logWarning(`telemetry: ${warning}`)
    if (settings === undefined) return Layer.empty
    const otlp = yield* Effect.promise(() => import("./Otlp.ts"))
    return otlp.layer(settings)
  })
)
