import type * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import { BlobFiles } from "./BlobFiles.ts"
import { CatalogsRepo } from "./db/CatalogsRepo.ts"
import { transaction } from "./db/Database.ts"
import { VersionsRepo } from "./db/VersionsRepo.ts"
import { badRequest } from "./Reply.ts"

export const MAX_VERSIONS_TO_KEEP = 50_000

/**
 * Raises the minimum version: versions below it stop being readable at once; their partition
 * metadata and the blobs no surviving version uses are removed afterwards by `Collector`.
 * The latest version always stays readable. Checked and written in one transaction on a fresh read
 * of the catalog, so a version committed meanwhile is never overwritten by a stale `latest_version`.
 */
export const raiseMinimum = (catalogHrn: string, version: number) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    return yield* transaction(
      Effect.gen(function*() {
        const catalog = (yield* catalogs.catalog(catalogHrn))!
        if (catalog.latest_version < 0) {
          return yield* badRequest("version", `Catalog ${catalog.hrn} has no versions yet`)
        }
        if (version > catalog.latest_version) {
          return yield* badRequest(
            "version",
            `Invalid version: latest known version is ${catalog.latest_version}; the minimum version cannot pass it (the last version of a catalog cannot be deleted; delete the catalog instead)`
          )
        }
        if (version < catalog.min_version) {
          return yield* badRequest(
            "version",
            `Invalid version: the minimum version is ${catalog.min_version} and cannot be lowered`
          )
        }
        if (version === catalog.min_version) return false
        yield* catalogs.setVersions(catalog.hrn, catalog.latest_version, version)
        return true
      })
    )
  })

/**
 * Physical removal below the minimum: partition rows no version at or above it can see, and blobs
 * whose owning row (the first one published with the handle) is gone, even when a later version
 * reused the handle; that is the data-handle reuse hazard the interface warns about. Content no blob
 * refers to any more is forgotten in the same transaction, so an upload of identical bytes committed
 * after it stores them again instead of pointing at removed content.
 */
const collect = (catalogHrn: string) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const versions = yield* VersionsRepo
    const files = yield* BlobFiles
    yield* transaction(
      Effect.gen(function*() {
        const catalog = yield* catalogs.catalog(catalogHrn)
        if (catalog === undefined) return
        const orphaned = yield* versions.purgeBelowMinimum(catalogHrn, catalog.min_version)
        for (const sha256 of orphaned) yield* files.remove(sha256)
      })
    )
  })

/**
 * Runs `collect` in the background after the minimum version was raised: the request that raised
 * it answers without waiting. Collections still running when the service stops are interrupted
 * (each is one transaction, so it rolls back and the next raise collects again).
 */
export class Collector extends Context.Tag("catalog-export/server/Collector")<Collector, {
  readonly start: (catalogHrn: string) => Effect.Effect<void>
}>() {
  static readonly layer: Layer.Layer<Collector, never, CatalogsRepo | VersionsRepo | BlobFiles | SqlClient.SqlClient> =
    Layer.scoped(
      Collector,
      Effect.gen(function*() {
        const fibers = yield* FiberSet.make()
        const context = yield* Effect.context<CatalogsRepo | VersionsRepo | BlobFiles | SqlClient.SqlClient>()
        return Collector.of({
          start: (catalogHrn) => Effect.asVoid(FiberSet.run(fibers, Effect.provide(collect(catalogHrn), context)))
        })
      })
    )
}

/**
 * After a commit: keep only `numberOfVersionsToKeep` versions when automatic deletion is on. Meant
 * to run inside the commit's transaction; the minimum only ever moves up.
 */
export const applyAutomaticDeletion = (catalogHrn: string) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const catalog = (yield* catalogs.catalog(catalogHrn))!
    const keep = (JSON.parse(catalog.config) as { automaticVersionDeletion?: { numberOfVersionsToKeep?: number } })
      .automaticVersionDeletion?.numberOfVersionsToKeep
    if (keep === undefined || catalog.latest_version < 0) return false
    const minimum = Math.max(catalog.min_version, catalog.latest_version - keep + 1)
    if (minimum === catalog.min_version) return false
    yield* catalogs.setVersions(catalog.hrn, catalog.latest_version, minimum)
    return true
  })
