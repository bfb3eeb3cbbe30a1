import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { UsageError } from "../src/domain/ExitCode.ts"
import * as Hrn from "../src/domain/Hrn.ts"
import { TOOL } from "../src/domain/Tool.ts"
import { InvalidLayerId } from "../src/export/Errors.ts"
import type { Plan } from "../src/export/Plan.ts"
import { catalogTables, DEFAULT_ORPHAN_AGE, identityOf, sweepTable, tableOf } from "../src/export/Tables.ts"
import { type Destination, destination } from "../src/sinks/Destination.ts"
import { readCurrent } from "../src/sinks/iceberg/Commit.ts"
import { compact, compactionDue } from "../src/sinks/iceberg/Compaction.ts"
import { expireSnapshots } from "../src/sinks/iceberg/Expire.ts"
import { tableAt, type TableLocation } from "../src/sinks/iceberg/Location.ts"
import { loadTable } from "../src/sinks/iceberg/Table.ts"

/**
 * Upkeep of the layers' Iceberg tables (docs/iceberg-tables.md): compaction (`catalog-export compact`,
 * and after an export once `main` has gathered enough deletes: Compaction.compactionDue), the expiry
 * of the snapshots of versions below a catalog's new minimum (retention, --raise-minimum), a volatile
 * layer's newest snapshots kept (keepSnapshots), and after each of them the sweep of files that no
 * snapshot uses and no run will commit (Tables.sweepTable).
 */

export interface Compacted {
  readonly location: string
  /** The data files written again without their deleted rows. */
  readonly rewritten: number
  readonly deleteFilesBefore: number
  readonly deleteFilesAfter: number
  /** The metadata file of the compaction's commit; undefined when there was nothing to compact. */
  readonly metadataFile: string | undefined
  /** Files removed that no snapshot used (URIs). */
  readonly swept: ReadonlyArray<string>
}

/** Compacts a table's `main`, then sweeps its files that no snapshot uses (those of stopped runs older than `orphanAge`). */
export const compactTable = (table: TableLocation, orphanAge: Duration.DurationInput = DEFAULT_ORPHAN_AGE) =>
  Effect.gen(function*() {
    const done = yield* compact(table, { createdBy: `${TOOL.name} ${TOOL.version}` })
    const metadata = done.committed?.metadata ?? (yield* readCurrent(table)).metadata
    const swept = metadata === undefined ? [] : yield* sweepTable(table, metadata, { olderThan: orphanAge })
    return {
      location: table.uri,
      rewritten: done.rewritten.length,
      deleteFilesBefore: done.deleteFilesBefore,
      deleteFilesAfter: done.deleteFilesAfter,
      metadataFile: done.committed?.metadataFile,
      swept
    } satisfies Compacted
  })

export interface CompactRequest {
  readonly out: string
  readonly catalog: string
  readonly layer: string
  readonly orphanAge: Duration.Duration
}

/** `catalog-export compact`: the table of a layer in `out`, which must be there. */
export const compactLayer = (request: CompactRequest) =>
  Effect.gen(function*() {
    const parsed = yield* Hrn.parseCatalog(request.catalog)
    if (!Hrn.isLayerId(request.layer)) return yield* new InvalidLayerId({ layerId: request.layer })
    const dest = yield* destination(request.out)
    const table = tableAt(dest, `${parsed.catalogId}/${request.layer}`)
    const current = yield* loadTable(table, { catalogHrn: Hrn.format(parsed), layerId: request.layer })
    if (current.metadata === undefined) {
      return yield* new UsageError({
        message:
          `There is no Iceberg table at ${table.uri}: export the layer with --format iceberg first, or check --out, --catalog and --layer.`
      })
    }
    return yield* compactTable(table, request.orphanAge)
  })

/** What an export's table got after its commit: older volatile snapshots expired, a compaction. */
export interface TableUpkeep {
  /** Tags of volatile snapshots expired (keepSnapshots). */
  readonly expired: ReadonlyArray<string>
  readonly compacted: Compacted | undefined
}

/**
 * After an export committed to a table: a volatile layer's snapshots beyond the newest `keepSnapshots`
 * expire (and their files go); `main` is compacted when it has gathered enough deletes.
 */
export const afterTableExport = (dest: Destination, plan: Plan, keepSnapshots: number | undefined) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    let expired: ReadonlyArray<string> = []
    if (plan.layerType === "volatile" && keepSnapshots !== undefined) {
      const current = yield* loadTable(table, identityOf(plan))
      const kept = new Set(
        Object.keys(current.metadata?.refs ?? {}).filter((n) => n.startsWith("snapshot-")).sort().slice(-keepSnapshots)
      )
      const done = yield* expireSnapshots(table, {
        dropTag: (name) => name.startsWith("snapshot-") && !kept.has(name)
      })
      expired = done.tags
      const metadata = done.committed?.metadata
      if (metadata !== undefined) yield* sweepTable(table, metadata, { olderThan: DEFAULT_ORPHAN_AGE })
    }
    const metadata = (yield* readCurrent(table)).metadata
    const compacted = metadata !== undefined && compactionDue(metadata) ? yield* compactTable(table) : undefined
    return { expired, compacted } satisfies TableUpkeep
  })

/** One table's expiry: the tags below the minimum and the files only they used, or why it failed. */
export interface ExpiredTable {
  readonly layerId: string
  readonly location: string
  readonly tags: ReadonlyArray<string>
  /** URIs of the files removed (a dry run: to be removed). */
  readonly files: ReadonlyArray<string>
  /** The table could not be expired (the catalog's minimum is raised regardless; the next expiry catches up). */
  readonly failed?: string | undefined
}

/**
 * Expires, in every Iceberg table of the catalog below `dest`, the snapshots of versions below
 * `minimum` (tags `v<N>`), and removes what only they used and what runs below the minimum left
 * (Tables.sweepTable); a dry run lists it. A table that fails is reported, not fatal.
 */
export const expireTables = (
  dest: Destination,
  catalogHrn: string,
  minimum: number,
  dryRun: boolean
) =>
  Effect.gen(function*() {
    const parsed = yield* Hrn.parseCatalog(catalogHrn)
    const tables = yield* catalogTables(dest, { hrn: Hrn.format(parsed), id: parsed.catalogId })
    return yield* Effect.forEach(tables, ({ layerId, table }) =>
      Effect.gen(function*() {
        const expired = yield* expireSnapshots(table, { minVersion: minimum, dryRun })
        const metadata = expired.committed?.metadata ?? (yield* readCurrent(table)).metadata
        const swept = metadata === undefined
          ? []
          : yield* sweepTable(table, metadata, { olderThan: DEFAULT_ORPHAN_AGE, minimum, dryRun })
        return {
          layerId,
          location: table.uri,
          tags: expired.tags,
          files: [...new Set([...expired.files, ...swept])]
        } satisfies ExpiredTable as ExpiredTable
      }).pipe(
        Effect.catchAll((error) =>
          Effect.succeed<ExpiredTable>({ layerId, location: table.uri, tags: [], files: [], failed: error.message })
        )
      ))
  })

/** How long unreferenced files of stopped runs are kept, as a Duration (compact --orphans-older-than). */
export const orphanAgeDefault = Duration.decode(DEFAULT_ORPHAN_AGE)
