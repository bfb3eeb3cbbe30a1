/**
 * OpenTelemetry through the real CLI: with OTEL_EXPORTER_OTLP_ENDPOINT set, an export sends traces
 * of its stages (not a span per partition) and its metrics to an OTLP/HTTP receiver on loopback
 * (test/support/otlp.ts decodes the protobuf or JSON payloads); no secret is in them; without it,
 * the exporter is not even loaded.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { noFaults } from "../../src/server/Faults.ts"
import { cli } from "../support/cli.ts"
import { cleanups, readJson } from "../support/files.ts"
import { lastPoints, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlp.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const { cleanup, tempDir } = cleanups()
let svc: TestService
let credentials: string

beforeAll(async () => {
  svc = await startService({
    seed: { partitions: 300, versions: 2, blobBytes: 256 },
    faults: { ...noFaults, throttle: 0.05, retryAfterSeconds: 0, seed: 11 }
  })
  credentials = await svc.credentialsFile()
  cleanup.push(() => svc.close())
})

const receiver = async () => {
  const r = await startOtlpReceiver()
  cleanup.push(() => r.close())
  return r
}

const exportPlaces = (env: Record<string, string | undefined>) => {
  const out = tempDir("telemetry-out-")
  return cli(
    [
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--out",
      out,
      "--parts",
      "2",
      "--concurrency",
      "8",
      "--json",
      "--lookup-url",
      svc.lookupUrl,
      "--credentials",
      credentials
    ],
    {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: undefined,
        OTEL_EXPORTER_OTLP_PROTOCOL: undefined,
        OTEL_EXPORTER_OTLP_HEADERS: undefined,
        OTEL_SERVICE_NAME: undefined,
        ...env
      }
    }
  ).then((run) => ({ run, out }))
}

const only = (spans: ReadonlyArray<ReceivedSpan>, name: string) => {
  const found = spans.filter((s) => s.name === name)
  expect(found, name).toHaveLength(1)
  return found[0]!
}

describe("telemetry", () => {
  it("sends the stages as spans and the run's metrics over OTLP/HTTP protobuf, with the configured headers and no secret", async () => {
    const otlp = await receiver()
    const { run } = await exportPlaces({
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_HEADERS: "x-collector-key=collector%20secret%201234"
    })
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout)
    const manifest = readJson(path.join(report.dir, "_manifest.json"))

    expect(new Set(otlp.requests.map((r) => r.path))).toEqual(new Set(["/v1/traces", "/v1/metrics"]))
    for (const r of otlp.requests) {
      expect(r.contentType).toBe("application/x-protobuf")
      expect(r.headers["x-collector-key"]).toBe("collector secret 1234")
    }

    // The stages, one trace: layer > plan, run > list, fetch and write per part, commit.
    const spans = otlp.spans
    expect(spans.length).toBeLessThan(50)
    const layer = only(spans, "Export.layer")
    const exportRun = only(spans, "Export.run")
    expect(layer.attributes).toMatchObject({ "catalog.hrn": DEMO, "layer.id": "places" })
    expect(layer.resource).toMatchObject({ "service.name": "catalog-export" })
    expect(only(spans, "Export.plan").parentSpanId).toBe(layer.spanId)
    expect(exportRun.parentSpanId).toBe(layer.spanId)
    expect(exportRun.attributes).toMatchObject({
      "export.version": manifest.version,
      "export.mode": "full",
      "export.parts": 2,
      "export.partitions": manifest.partitions,
      "export.bytes": manifest.bytes
    })
    for (const stage of ["Export.list", "Export.fetch", "Export.write"]) {
      const perPart = spans.filter((s) => s.name === stage)
      expect(perPart.map((s) => s.attributes["export.part"]).sort()).toEqual([0, 1])
      for (const s of perPart) expect(s.parentSpanId).toBe(exportRun.spanId)
    }
    const listed = spans.filter((s) => s.name === "Export.list").reduce(
      (n, s) => n + Number(s.attributes["export.partitions"]),
      0
    )
    expect(listed).toBe(manifest.partitions)
    expect(only(spans, "Export.commit").parentSpanId).toBe(exportRun.spanId)
    expect(new Set(spans.filter((s) => s.name.startsWith("Export.")).map((s) => s.traceId)).size).toBe(1)

    // Metrics: what the manifest says, every blob request timed, retries by what they answered.
    const tags = { catalog: DEMO, layer: "places" }
    expect(lastPoints(otlp, "catalog_export.partitions")).toEqual([{ attributes: tags, value: manifest.partitions }])
    expect(lastPoints(otlp, "catalog_export.bytes")).toEqual([{ attributes: tags, value: manifest.bytes }])
    const blobRequests = lastPoints(otlp, "catalog_export.request.duration").find((p) => p.attributes.api === "blob")!
    // Every blob request and every retry of one (the retries also count the metadata requests').
    expect(blobRequests.count).toBeGreaterThanOrEqual(manifest.partitions)
    expect(blobRequests.count).toBeLessThanOrEqual(manifest.partitions + report.retries)
    expect(blobRequests.count).toBeGreaterThan(manifest.partitions)
    expect(blobRequests.bucketCounts!.reduce((a, b) => a + b, 0)).toBe(blobRequests.count)
    expect(report.retries).toBeGreaterThan(0)
    expect(lastPoints(otlp, "catalog_export.retries")).toEqual([{
      attributes: { reason: "429" },
      value: report.retriesByReason["429"]
    }])
    const duration = lastPoints(otlp, "catalog_export.export.duration")
    expect(duration).toEqual([expect.objectContaining({ attributes: { ...tags, outcome: "done" }, count: 1 })])

    // No secret in any payload: the key secret, a token, the collector's own header.
    const secret = /here\.access\.key\.secret\s*=\s*(\S+)/.exec(fs.readFileSync(credentials, "utf8"))![1]!
    for (const r of otlp.requests) {
      const body = r.body.toString("latin1")
      expect(body).not.toContain(secret)
      expect(body).not.toMatch(/Bearer/i)
      expect(body).not.toContain("collector secret")
    }
  })

  it("speaks OTLP/JSON when OTEL_EXPORTER_OTLP_PROTOCOL says so, and uses OTEL_SERVICE_NAME", async () => {
    const otlp = await receiver()
    const { run } = await exportPlaces({
      OTEL_EXPORTER_OTLP_ENDPOINT: `${otlp.url}/`,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "nightly-exports"
    })
    expect(run.code, run.stderr).toBe(0)
    expect(otlp.requests.length).toBeGreaterThan(0)
    for (const r of otlp.requests) expect(r.contentType).toBe("application/json")
    expect(only(otlp.spans, "Export.run").resource).toMatchObject({ "service.name": "nightly-exports" })
    expect(lastPoints(otlp, "catalog_export.partitions")[0]!.value).toBe(JSON.parse(run.stdout).partitions)
  })

  it("loads and sends nothing when no endpoint is set", async () => {
    const dir = tempDir("telemetry-modules-")
    const log = path.join(dir, "loaded.txt")
    // Records every module the process resolves (Node's module hooks).
    fs.writeFileSync(
      path.join(dir, "hooks.mjs"),
      `import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(${JSON.stringify(log)}, resolved.url + "\\n")
  return resolved
}
`
    )
    fs.writeFileSync(
      path.join(dir, "register.mjs"),
      `import { register } from "node:module"\nregister(${
        JSON.stringify(new URL(`file://${path.join(dir, "hooks.mjs")}`).href)
      })\n`
    )
    const loaded = async (env: Record<string, string | undefined>) => {
      fs.rmSync(log, { force: true })
      const { run } = await exportPlaces({ ...env, NODE_OPTIONS: `--import=${path.join(dir, "register.mjs")}` })
      expect(run.code, run.stderr).toBe(0)
      return fs.readFileSync(log, "utf8").split("\n").filter((l) => l !== "")
    }
    const otlp = await receiver()
    const without = await loaded({})
    expect(without.some((url) => /\/dist\/catalog-export\.mjs$/.test(url))).toBe(true)
    expect(without.filter((url) => /Otlp/i.test(url))).toEqual([])
    const withEndpoint = await loaded({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url })
    expect(withEndpoint.filter((url) => /\/dist\/Otlp-\w+\.mjs$/.test(url))).toHaveLength(1)
    expect(otlp.requests.length).toBeGreaterThan(0)
  })

  it("warns, and exports nothing, for a protocol it does not speak", async () => {
    const otlp: OtlpReceiver = await receiver()
    const { run } = await exportPlaces({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toContain(
      "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL grpc is not supported (http/protobuf or http/json): traces are not exported"
    )
    expect(otlp.requests).toEqual([])
  })
})
