import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { planExport } from "../../src/export/Incremental.ts"
import { advanceState } from "../../src/export/Manifest.ts"
import { exportDir, makePlan } from "../../src/export/Plan.ts"
import { destination } from "../../src/sinks/Destination.ts"
import { InMemoryCatalog, TestCatalog } from "../support/catalog.ts"
import { HRN, makeCatalog, stagesLayer, tempDir } from "./support.ts"

/** Plan.ts and Incremental.ts in this process, over the in-memory catalog (test/support/catalog.ts). */

const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flip(effect)

layer(stagesLayer())("makePlan", (it) => {
  it.effect("pins the latest version, the layer's settings and the parts the service makes", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const plan = yield* makePlan({ catalog: ` ${HRN} `, layer: "tiles", version: "latest", parts: 3 })
      expect(plan).toMatchObject({
        formatVersion: 1,
        catalogHrn: HRN,
        catalogId: "roads",
        layerId: "tiles",
        layerType: "versioned",
        contentType: "application/x-protobuf",
        contentEncoding: "gzip",
        digest: "MD5",
        heretile: true,
        version: 3,
        mode: "full"
      })
      expect(plan.parts).toHaveLength(3)
      expect(plan.baseVersion).toBeUndefined()
      expect(plan.snapshot).toBeUndefined()
      expect(exportDir(plan)).toBe("roads/tiles/version=3")
      expect(catalog.requests.slice(-4).sort()).toEqual(
        ["config.getCatalog", "metadata.latestVersion", "metadata.minimumVersion", "metadata.partitionParts"].sort()
      )
    }))

  it.effect("asks for no parts for one listing, and for changes parts in changes mode", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const before = catalog.requests.length
      const one = yield* makePlan({ catalog: HRN, layer: "places", version: 2, parts: 1 })
      expect(one.parts).toEqual([])
      expect(one).toMatchObject({ version: 2, heretile: false, contentType: "application/json", digest: "SHA-256" })
      expect(catalog.requests.slice(before)).not.toContain("metadata.partitionParts")
      const changes = yield* makePlan({
        catalog: HRN,
        layer: "places",
        version: 2,
        parts: 4,
        mode: "changes",
        baseVersion: 0
      })
      expect(changes).toMatchObject({ mode: "changes", baseVersion: 0, version: 2 })
      expect(changes.parts).toHaveLength(4)
      expect(catalog.requests.at(-1)).toBe("metadata.changesParts")
    }))

  it.effect("refuses a version past the latest or below the minimum, saying which versions there are", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const past = yield* failure(makePlan({ catalog: HRN, layer: "places", version: 9, parts: 1 }))
      expect(past).toMatchObject({ _tag: "NotFound", what: "version" })
      expect(past.message).toBe(`Version 9 of ${HRN} does not exist: the latest version is 3.`)
      catalog.minimum = 2
      try {
        const deleted = yield* failure(makePlan({ catalog: HRN, layer: "places", version: 1, parts: 1 }))
        expect(deleted.message).toBe(
          `Version 1 of ${HRN} was deleted: the minimum version is 2. Export version 2 or later.`
        )
        expect((yield* makePlan({ catalog: HRN, layer: "places", version: 2, parts: 1 })).version).toBe(2)
      } finally {
        catalog.minimum = 0
      }
    }))

  it.effect("refuses a layer id that could name another directory, before asking the service anything", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const before = catalog.requests.length
      for (const id of ["../places", "a/b", ""]) {
        const error = yield* failure(makePlan({ catalog: HRN, layer: id, version: "latest", parts: 1 }))
        expect(error).toMatchObject({ _tag: "InvalidLayerId", layerId: id })
      }
      expect(catalog.requests.length).toBe(before)
    }))

  it.effect("names the catalog's layers when the layer is not there, and refuses a stream layer", () =>
    Effect.gen(function*() {
      const missing = yield* failure(makePlan({ catalog: HRN, layer: "roads", version: "latest", parts: 1 }))
      expect(missing).toMatchObject({ _tag: "NotFound", what: "layer" })
      expect(missing.message).toBe(
        `Catalog ${HRN} has no layer 'roads' (its layers: places, tiles, plain, traffic, events).`
      )
      const stream = yield* failure(makePlan({ catalog: HRN, layer: "events", version: "latest", parts: 1 }))
      expect(stream).toMatchObject({
        _tag: "LayerNotExportable",
        catalogHrn: HRN,
        layerId: "events",
        layerType: "stream"
      })
    }))

  it.effect("passes the config API's CatalogNotFound on, and refuses an HRN that is not a catalog's", () =>
    Effect.gen(function*() {
      const other = "hrn:here:data::test:elsewhere"
      expect(yield* failure(makePlan({ catalog: other, layer: "places", version: 0, parts: 1 }))).toMatchObject({
        _tag: "CatalogNotFound",
        hrn: other
      })
      expect(yield* failure(makePlan({ catalog: "roads", layer: "places", version: 0, parts: 1 }))).toMatchObject({
        _tag: "InvalidHrn"
      })
    }))

  it.effect("snapshots a volatile layer, whatever the version asked for, without parts", () =>
    Effect.gen(function*() {
      const plan = yield* makePlan({ catalog: HRN, layer: "traffic", version: 1, parts: 8 })
      expect(plan).toMatchObject({ layerType: "volatile", version: 3, parts: [], heretile: false })
      expect(plan.snapshot).toMatch(/^\d{8}T\d{6}Z$/)
      expect(exportDir(plan)).toBe(`roads/traffic/snapshot=${plan.snapshot}`)
    }))
})

describe("makePlan of a catalog without versions", () => {
  const empty = () => new InMemoryCatalog({ hrn: HRN, layers: makeCatalog().config.layers })

  it.effect("says a versioned layer has nothing to export yet; a volatile snapshot records version -1", () =>
    Effect.gen(function*() {
      const error = yield* failure(makePlan({ catalog: HRN, layer: "places", version: "latest", parts: 1 }))
      expect(error).toMatchObject({ _tag: "NotFound", what: "version" })
      expect(error.message).toBe(`Catalog ${HRN} has no versions yet; publish data first.`)
      expect((yield* makePlan({ catalog: HRN, layer: "traffic", version: "latest", parts: 1 })).version).toBe(-1)
    }).pipe(Effect.provide(stagesLayer(empty))))
})

describe("planExport", () => {
  const request = (out: string, overrides: Partial<Parameters<typeof planExport>[0]> = {}) =>
    planExport({ catalog: HRN, layer: "places", version: "latest", mode: "changes", out, parts: 2, ...overrides })

  /** The layer's cursor in `out`, as a commit leaves it. */
  const cursorAt = (out: string, lastVersion: number) =>
    Effect.flatMap(destination(out), (dest) =>
      advanceState(dest, "roads/places", {
        catalogHrn: HRN,
        layerId: "places",
        lastVersion,
        updatedAt: new Date().toISOString()
      }))

  it.scoped("plans a full export when there is no cursor, and says so", () =>
    Effect.gen(function*() {
      const planned = yield* request(yield* tempDir)
      expect(planned).toMatchObject({
        _tag: "Planned",
        note: "no cursor (_state.json) yet: full export",
        plan: { mode: "full", version: 3 }
      })
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("plans the changes since the cursor, and nothing once the cursor has the version", () =>
    Effect.gen(function*() {
      const out = yield* tempDir
      yield* cursorAt(out, 1)
      const planned = yield* request(out)
      expect(planned._tag).toBe("Planned")
      if (planned._tag !== "Planned") return
      expect(planned.note).toBeUndefined()
      expect(planned.plan).toMatchObject({ mode: "changes", baseVersion: 1, version: 3, layerId: "places" })
      expect(planned.plan.parts).toHaveLength(2)
      yield* cursorAt(out, 3)
      expect(yield* request(out)).toEqual({ _tag: "UpToDate", catalogHrn: HRN, layerId: "places", version: 3 })
      expect((yield* request(out, { mode: "full" }))._tag).toBe("Planned")
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("reads the configuration and the versions once, and asks only for the chosen plan's parts", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const asked = (from: number) => catalog.requests.slice(from).sort()
      const out = yield* tempDir
      yield* cursorAt(out, 1)
      let before = catalog.requests.length
      expect(yield* request(out)).toMatchObject({ plan: { mode: "changes", baseVersion: 1 } })
      expect(asked(before)).toEqual(
        ["config.getCatalog", "metadata.changesParts", "metadata.latestVersion", "metadata.minimumVersion"]
      )
      catalog.minimum = 2
      const below = yield* tempDir
      yield* cursorAt(below, 0)
      before = catalog.requests.length
      expect(yield* request(below)).toMatchObject({ plan: { mode: "full" } })
      expect(asked(before)).toEqual(
        ["config.getCatalog", "metadata.latestVersion", "metadata.minimumVersion", "metadata.partitionParts"]
      )
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("falls back to a full export, saying why, when the versions after the cursor are deleted", () =>
    Effect.gen(function*() {
      const catalog = yield* TestCatalog
      const out = yield* tempDir
      catalog.minimum = 2
      // From the version just below the minimum the changes are still there.
      yield* cursorAt(out, 1)
      expect(yield* request(out)).toMatchObject({ plan: { mode: "changes", baseVersion: 1 } })
      const below = yield* tempDir
      yield* cursorAt(below, 0)
      expect(yield* request(below)).toMatchObject({
        _tag: "Planned",
        plan: { mode: "full", version: 3 },
        note: "the cursor (version 0) is below the minimum version 2, so its changes are gone: full export"
      })
    }).pipe(Effect.provide(stagesLayer())))

  it.scoped("snapshots a volatile layer in changes mode, saying it has no versions to diff", () =>
    Effect.gen(function*() {
      expect(yield* request(yield* tempDir, { layer: "traffic" })).toMatchObject({
        _tag: "Planned",
        plan: { layerType: "volatile" },
        note: "volatile layers have no versions to diff: exporting a snapshot"
      })
    }).pipe(Effect.provide(stagesLayer())))
})
