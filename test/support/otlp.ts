/**
 * A small OTLP/HTTP receiver on loopback, as a collector would be: it accepts POST /v1/traces and
 * /v1/metrics in protobuf (decoded here with protobufjs from the OTLP schema below, written from the
 * opentelemetry-proto definitions, not from the exporter's code) or JSON, and keeps what it decoded.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import protobuf from "protobufjs"

const SCHEMA = `
syntax = "proto3";
package otlp;
message AnyValue { oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; } }
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; }
message Resource { repeated KeyValue attributes = 1; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message Span {
  bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4; string name = 5; int32 kind = 6;
  fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9;
  repeated Event events = 11; Status status = 15;
}
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
message Status { string message = 2; int32 code = 3; }
message ExportMetricsServiceRequest { repeated ResourceMetrics resource_metrics = 1; }
message ResourceMetrics { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
message ScopeMetrics { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
message Metric { string name = 1; string description = 2; string unit = 3; oneof data { Gauge gauge = 5; Sum sum = 7; Histogram histogram = 9; } }
message Gauge { repeated NumberDataPoint data_points = 1; }
message Sum { repeated NumberDataPoint data_points = 1; int32 aggregation_temporality = 2; bool is_monotonic = 3; }
message Histogram { repeated HistogramDataPoint data_points = 1; int32 aggregation_temporality = 2; }
message NumberDataPoint { repeated KeyValue attributes = 7; fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3; oneof value { double as_double = 4; sfixed64 as_int = 6; } }
message HistogramDataPoint {
  repeated KeyValue attributes = 9; fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3; fixed64 count = 4; double sum = 5;
  repeated fixed64 bucket_counts = 6; repeated double explicit_bounds = 7; double min = 11; double max = 12;
}
`

const root = protobuf.parse(SCHEMA, { keepCase: false }).root
const TraceRequest = root.lookupType("otlp.ExportTraceServiceRequest")
const MetricsRequest = root.lookupType("otlp.ExportMetricsServiceRequest")

export interface ReceivedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly attributes: Record<string, unknown>
  readonly statusCode: number
  readonly resource: Record<string, unknown>
}

export interface ReceivedPoint {
  readonly attributes: Record<string, unknown>
  /** Sums and gauges. */
  readonly value?: number
  /** Histograms. */
  readonly count?: number
  readonly sum?: number
  readonly bucketCounts?: ReadonlyArray<number>
}

export interface ReceivedMetric {
  readonly name: string
  readonly kind: "sum" | "gauge" | "histogram"
  readonly points: ReadonlyArray<ReceivedPoint>
}

export interface OtlpReceiver {
  readonly url: string
  readonly requests: Array<
    {
      readonly path: string
      readonly contentType: string
      readonly headers: http.IncomingHttpHeaders
      readonly body: Buffer
    }
  >
  readonly spans: Array<ReceivedSpan>
  /** Every metrics export as received (cumulative: the last one holds the totals). */
  readonly metricExports: Array<ReadonlyArray<ReceivedMetric>>
  readonly close: () => Promise<void>
}

const hex = (
  v: unknown
) => (typeof v === "string"
  ? (/^[0-9a-f]*$/i.test(v) && v.length % 2 === 0 ? v.toLowerCase() : Buffer.from(v, "base64").toString("hex"))
  : "")

const anyValue = (v: any): unknown => {
  if (v === undefined || v === null) return undefined
  if ("stringValue" in v) return v.stringValue
  if ("boolValue" in v) return v.boolValue
  if ("intValue" in v) return Number(v.intValue)
  if ("doubleValue" in v) return Number(v.doubleValue)
  if ("arrayValue" in v) return (v.arrayValue.values ?? []).map(anyValue)
  return v
}

const attributesOf = (list: ReadonlyArray<any> | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, anyValue(kv.value)]))

const num = (v: unknown) => (v === undefined || v === null ? undefined : Number(v))

const decode = (path: string, contentType: string, body: Buffer): any => {
  if (contentType.includes("json")) return JSON.parse(body.toString("utf8"))
  const type = path.endsWith("/v1/traces") ? TraceRequest : MetricsRequest
  return type.toObject(type.decode(body), { longs: String, bytes: String, defaults: false, oneofs: false })
}

export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const receiver: Omit<OtlpReceiver, "url" | "close"> = { requests: [], spans: [], metricExports: [] }
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks)
      const path = req.url ?? ""
      const contentType = req.headers["content-type"] ?? ""
      receiver.requests.push({ path, contentType, headers: req.headers, body })
      try {
        const message = decode(path, contentType, body)
        if (path.endsWith("/v1/traces")) {
          for (const rs of message.resourceSpans ?? []) {
            const resource = attributesOf(rs.resource?.attributes)
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                receiver.spans.push({
                  name: s.name,
                  traceId: hex(s.traceId),
                  spanId: hex(s.spanId),
                  parentSpanId: hex(s.parentSpanId),
                  attributes: attributesOf(s.attributes),
                  statusCode: s.status?.code ?? 0,
                  resource
                })
              }
            }
          }
        } else if (path.endsWith("/v1/metrics")) {
          const metrics: Array<ReceivedMetric> = []
          for (const rm of message.resourceMetrics ?? []) {
            for (const sm of rm.scopeMetrics ?? []) {
              for (const m of sm.metrics ?? []) {
                const kind = m.histogram !== undefined ? "histogram" : m.sum !== undefined ? "sum" : "gauge"
                const points = (m.histogram ?? m.sum ?? m.gauge)?.dataPoints ?? []
                metrics.push({
                  name: m.name,
                  kind,
                  points: points.map((p: any): ReceivedPoint =>
                    kind === "histogram"
                      ? {
                        attributes: attributesOf(p.attributes),
                        count: num(p.count)!,
                        sum: num(p.sum)!,
                        bucketCounts: (p.bucketCounts ?? []).map(Number)
                      }
                      : { attributes: attributesOf(p.attributes), value: num(p.asDouble ?? p.asInt)! }
                  )
                })
              }
            }
          }
          receiver.metricExports.push(metrics)
        }
        res.writeHead(200, {
          "content-type": contentType.includes("json") ? "application/json" : "application/x-protobuf"
        })
        res.end(contentType.includes("json") ? "{}" : "")
      } catch (e) {
        res.writeHead(400)
        res.end(String(e))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    ...receiver,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** The last value each (metric, attributes) had, from the latest export that carried it. */
export const lastPoints = (receiver: OtlpReceiver, name: string): ReadonlyArray<ReceivedPoint> => {
  for (let i = receiver.metricExports.length - 1; i >= 0; i--) {
    const metric = receiver.metricExports[i]!.find((m) => m.name === name)
    if (metric !== undefined) return metric.points
  }
  return []
}
