/**
 * The crash points of an export, seen through an in-process probe (the CLI's SIGKILL probe is driven
 * by test/reliability/kills.test.ts): every point is passed, as often and in the order the kill
 * tests rely on.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runExport } from "../../src/export/Export.ts"
import { makePlan } from "../../src/export/Plan.ts"
import { type CrashPoint, CrashProbe } from "../../src/telemetry/CrashProbe.ts"
import { type ClientLayer, clientLayerFor, runWith } from "../support/client.ts"
import { startService, type TestService } from "../support/service.ts"

const DEMO = "hrn:local:data:::demo"

let svc: TestService
let client: ClientLayer
let out: string

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 120, versions: 1, blobBytes: 64 } })
  client = await clientLayerFor(svc)
  out = fs.mkdtempSync(path.join(os.tmpdir(), "crash-probe-"))
})
afterAll(async () => {
  await svc?.close()
  if (out !== undefined) fs.rmSync(out, { recursive: true, force: true })
})

describe("CrashProbe", () => {
  it("hears every crash point of an export: each partition listed and fetched, each file renamed before its part's checkpoint, the merges, then manifest and commit", async () => {
    const passed: Array<CrashPoint> = []
    const result = await runWith(
      client,
      Effect.flatMap(
        makePlan({ catalog: DEMO, layer: "places", version: 0, parts: 3 }),
        (plan) =>
          runExport(plan, {
            out,
            format: "both",
            compression: "zstd",
            concurrency: 4,
            listConcurrency: 2,
            force: false
          })
      ).pipe(
        Effect.provideService(CrashProbe, { reached: (point) => void passed.push(point) })
      )
    )
    if (result._tag !== "Exported") throw new Error(`expected an export, got ${result._tag}`)
    const { manifest } = result
    const count = (point: CrashPoint) => passed.filter((p) => p === point).length
    expect(count("listed")).toBe(manifest.partitions)
    expect(count("fetched")).toBe(manifest.partitions - manifest.deleted)
    expect(count("written")).toBeGreaterThanOrEqual(3)
    // Each part's file of each format, then the parts' small files merged into one per format.
    expect(count("renamed")).toBe(3 * 2)
    expect(count("checkpoint")).toBe(3)
    expect(count("merged")).toBe(manifest.files.length)
    expect(manifest.files.map((f) => f.format).sort()).toEqual(["arrow", "parquet"])
    expect(passed.slice(-4)).toEqual(["merged", "merged", "manifest", "committed"])
    // A part's files are renamed before its checkpoint, the first file of all after the first listing and fetch.
    const firstRenamed = passed.indexOf("renamed")
    expect(passed.indexOf("listed")).toBeLessThan(passed.indexOf("fetched"))
    expect(passed.indexOf("fetched")).toBeLessThan(firstRenamed)
    expect(passed.indexOf("checkpoint")).toBeGreaterThan(firstRenamed)
    expect(passed.lastIndexOf("checkpoint")).toBeLessThan(passed.indexOf("manifest"))
  })
})
