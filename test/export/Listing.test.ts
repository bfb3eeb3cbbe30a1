import { describe, expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { listPart } from "../../src/export/Listing.ts"
import { makePlan, type Plan } from "../../src/export/Plan.ts"
import { TestCatalog } from "../support/catalog.ts"
import { HRN, stagesLayer } from "./support.ts"

/** Listing.ts in this process: what the export asks the metadata API for each part of a plan. */

const listAll = (plan: Plan) =>
  Effect.forEach(
    plan.parts.length === 0 ? [undefined] : plan.parts,
    (part) => Effect.map(Stream.runCollect(listPart(plan, part)), Chunk.toArray)
  )

describe("listPart", () => {
  layer(stagesLayer())((it) => {
    it.effect("lists each part of the pinned version with sizes and checksums: together, every partition once", () =>
      Effect.gen(function*() {
        const catalog = yield* TestCatalog
        const plan = yield* makePlan({ catalog: HRN, layer: "places", version: 1, parts: 4 })
        const before = catalog.listings.length
        const parts = yield* listAll(plan)
        expect(parts).toHaveLength(4)
        for (const listed of parts) expect(listed.length).toBeGreaterThan(20)
        expect(parts.flat()).toEqual(catalog.partitionsAt("places", 1))
        expect(catalog.listings.slice(before)).toEqual(plan.parts.map((part) => ({
          layer: "places",
          kind: "partitions",
          options: { additionalFields: ["dataSize", "checksum"], part, version: 1 }
        })))
      }))

    it.effect("lists what changed after the base version up to the plan's, deletions included", () =>
      Effect.gen(function*() {
        const catalog = yield* TestCatalog
        const plan = yield* makePlan({
          catalog: HRN,
          layer: "places",
          version: 2,
          parts: 1,
          mode: "changes",
          baseVersion: 1
        })
        const before = catalog.listings.length
        const [listed] = yield* listAll(plan)
        expect(listed).toEqual(catalog.changesBetween("places", 1, 2))
        expect(listed!.filter((p) => p.dataHandle === "").map((p) => p.partition)).toEqual(["p-0200"])
        expect(catalog.listings.slice(before)).toEqual([{
          layer: "places",
          kind: "changes",
          options: { additionalFields: ["dataSize", "checksum"], startVersion: 1, endVersion: 2 }
        }])
      }))

    it.effect("lists a volatile layer as it is now, without a version", () =>
      Effect.gen(function*() {
        const catalog = yield* TestCatalog
        const plan = yield* makePlan({ catalog: HRN, layer: "traffic", version: "latest", parts: 1 })
        const before = catalog.listings.length
        const [listed] = yield* listAll(plan)
        expect(listed).toEqual(catalog.partitionsAt("traffic"))
        expect(catalog.listings.slice(before)).toEqual([{
          layer: "traffic",
          kind: "partitions",
          options: { additionalFields: ["dataSize", "checksum"] }
        }])
      }))
  })
})
