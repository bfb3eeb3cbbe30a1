import { Effect } from "effect"
import { BlobFiles } from "./BlobFiles.ts"
import { badRequest } from "./Reply.ts"
import { type CatalogRow, Store } from "./Store.ts"

export const MAX_VERSIONS_TO_KEEP = 50_000

/**
 * Raises the minimum version: versions below it stop being readable at once; their partition
 * metadata and the blobs no surviving version uses are removed afterwards by `collect`.
 * The latest version always stays readable.
 */
export const raiseMinimum = (catalog: CatalogRow, version: number) =>
  Effect.gen(function*() {
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
      return yield* badRequest("version", `Invalid version: the minimum version is ${catalog.min_version} and cannot be lowered`)
    }
    if (version === catalog.min_version) return false
    yield* (yield* Store).setVersions(catalog.hrn, catalog.latest_version, version).pipe(Effect.orDie)
    return true
  })

/**
 * Physical removal below the minimum: partition rows no version at or above it can see, and blobs
 * whose owning row (the first one published with the handle) is gone, even when a later version
 * reused the handle; that is the data-handle reuse hazard the interface warns about.
 */
export const collect = (catalogHrn: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    const files = yield* BlobFiles
    const catalog = yield* store.catalog(catalogHrn)
    if (catalog === undefined) return
    const orphaned = yield* store.withTransaction(store.purgeBelowMinimum(catalogHrn, catalog.min_version))
    for (const sha256 of orphaned) yield* files.remove(sha256)
  }).pipe(Effect.orDie)

/** After a commit: keep only `numberOfVersionsToKeep` versions when automatic deletion is on. */
export const applyAutomaticDeletion = (catalogHrn: string) =>
  Effect.gen(function*() {
    const store = yield* Store
    const catalog = (yield* store.catalog(catalogHrn).pipe(Effect.orDie))!
    const keep = (JSON.parse(catalog.config) as { automaticVersionDeletion?: { numberOfVersionsToKeep?: number } })
      .automaticVersionDeletion?.numberOfVersionsToKeep
    if (keep === undefined || catalog.latest_version - catalog.min_version + 1 <= keep) return false
    yield* store.setVersions(catalog.hrn, catalog.latest_version, catalog.latest_version - keep + 1).pipe(Effect.orDie)
    return true
  })
