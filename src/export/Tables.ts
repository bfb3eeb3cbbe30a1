import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { UsageError } from "../domain/ExitCode.ts"
import { TOOL } from "../domain/Tool.ts"
import { type Column, rawColumns } from "../sinks/Columns.ts"
import type { Destination } from "../sinks/Destination.ts"
import { type Current, readCurrent } from "../sinks/iceberg/Commit.ts"
import { IcebergError } from "../sinks/iceberg/Errors.ts"
import { reachable } from "../sinks/iceberg/Expire.ts"
import {
  keyIn,
  keyOfUri,
  metadataFileName,
  tableAt,
  type TableLocation,
  uriOf,
  VERSION_HINT,
  writtenAt
} from "../sinks/iceberg/Location.ts"
import { liveFiles, readSnapshot } from "../sinks/iceberg/SnapshotFiles.ts"
import {
  commitVersion,
  dataFileMetadata,
  Keys,
  loadTable,
  nearestOlder,
  schemaFor,
  type TableIdentity,
  versionTag
} from "../sinks/iceberg/Table.ts"
import { type Snapshot, snapshotById, type TableMetadata } from "../sinks/iceberg/TableMetadata.ts"
import type { Evolved } from "../sinks/iceberg/TableSchema.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import type { Decoding } from "./Decoding.ts"
import { exportedOf, type Manifest } from "./Manifest.ts"
import { exportDir, PLAN, type Plan, TABLE_DATA } from "./Plan.ts"
import type { ExportFormat } from "./Settings.ts"
import type { ShardManifest } from "./Shards.ts"

/**
 * An export into a layer's Apache Iceberg table (`--format iceberg`, docs/iceberg-tables.md): the
 * table is the layer's directory `OUT/<catalog-id>/<layer-id>/` (sinks/iceberg), each export works in
 * its directory below the table's `data/` (`data/version=<V>/`: the plan, checkpoints and shard
 * manifests while it runs, its data files for good), the table's tags are the cursor of changes
 * runs, and the commit makes one snapshot of every shard's files. A snapshot's summary records what
 * the export counted, so that a version found committed says what it holds.
 */

/** What an export committed to its layer's table. */
export interface TableCommit {
  /** The table's location: its directory, as the table records it (`file:///…`, `s3://…`). */
  readonly location: string
  /** The metadata file of the commit (of the table as it is, for a version committed before): what engines open. */
  readonly metadataFile: string
  /** `v<N>`, or `snapshot-<UTC time>` for a volatile layer. */
  readonly tag: string
  readonly snapshotId: number
  /** Data and delete files the snapshot added. */
  readonly dataFiles: number
  readonly deleteFiles: number
}

/** The table an export writes and the columns it writes into it, decided before anything is written. */
export interface PreparedTable {
  readonly schema: Evolved
  readonly columns: ReadonlyArray<Column>
}

/** Summary fields of this tool besides the table library's (Keys): what the export counted. */
const Counted = {
  partitions: "catalog-export.partitions",
  deleted: "catalog-export.deleted-partitions",
  bytes: "catalog-export.blob-bytes",
  /** The layer's content type and encoding, for the manifest a committed snapshot tells. */
  contentType: "catalog-export.content-type",
  contentEncoding: "catalog-export.content-encoding"
} as const

/** Unreferenced files a commit or compaction wrote are removed once this old (as Iceberg's remove_orphan_files). */
export const DEFAULT_ORPHAN_AGE = Duration.days(3)

export const isTablePlan = (plan: Pick<Plan, "format">): boolean => plan.format === "iceberg"

/** The layer's table: the layer's directory of the output. */
export const tableOf = (dest: Destination, plan: Pick<Plan, "catalogId" | "layerId">): TableLocation =>
  tableAt(dest, `${plan.catalogId}/${plan.layerId}`)

export const identityOf = (plan: Pick<Plan, "catalogHrn" | "layerId">): TableIdentity => ({
  catalogHrn: plan.catalogHrn,
  layerId: plan.layerId
})

/** The tag of the plan's snapshot: `v<N>`, or `snapshot-<S>` for a volatile layer's. */
export const tagOf = (plan: Pick<Plan, "layerType" | "version" | "snapshot">): string =>
  plan.layerType === "volatile" ? `snapshot-${plan.snapshot}` : versionTag(plan.version)

const taggedSnapshot = (metadata: TableMetadata | undefined, tag: string): Snapshot | undefined => {
  const ref = metadata?.refs?.[tag]
  return ref === undefined || metadata === undefined ? undefined : snapshotById(metadata, ref["snapshot-id"])
}

/**
 * A plan and the `--format` a shard of it is run with must agree: a table's plan writes Parquet data
 * files for the table (`--format iceberg`, or the default), a plan of files cannot make a table.
 */
export const checkFormat = (plan: Plan, format: ExportFormat): Effect.Effect<void, UsageError> => {
  if (isTablePlan(plan) && format !== "iceberg" && format !== "parquet") {
    return Effect.fail(
      new UsageError({
        message:
          `--format ${format} does not fit this plan: it exports ${plan.catalogHrn} layer ${plan.layerId} into an Iceberg table, whose data files are Parquet. Drop --format, or give --format iceberg.`
      })
    )
  }
  if (!isTablePlan(plan) && format === "iceberg") {
    return Effect.fail(
      new UsageError({
        message:
          `--format iceberg does not fit this plan: it was planned for files. Plan it again with catalog-export plan ... --format iceberg.`
      })
    )
  }
  return Effect.void
}

/**
 * A layer's directory that holds an Iceberg table takes no Parquet/Arrow export beside it (the
 * table refuses a directory holding one, too).
 */
export const refuseTable = (dest: Destination, plan: Pick<Plan, "catalogId" | "layerId">) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const names = new Set((yield* dest.list(keyIn(table, "metadata"))).map((e) => e.name))
    if (!names.has(VERSION_HINT.slice("metadata/".length)) && !names.has(metadataFileName(1))) return
    return yield* new IcebergError({
      table: table.uri,
      reason: "Mismatch",
      message:
        `${table.uri} holds an Apache Iceberg table, not an export of files. Export it with --format iceberg, or into another --out.`
    })
  })

/**
 * The plan's layer's table as it is (loadTable), its version hint brought up to date when a run
 * stopped between its commit and the hint: readers that do not look past the hint need it.
 */
const openTable = (table: TableLocation, plan: Plan) =>
  Effect.gen(function*() {
    const current = yield* loadTable(table, identityOf(plan))
    if (current.hintLags) yield* table.dest.write(keyIn(table, VERSION_HINT), String(current.version))
    return current
  })

/**
 * The layer's table as it is (refused when the directory holds something else), whether it has the
 * plan's version, and the newest exported version below it: the base of a changes run.
 */
export const tableState = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const current = yield* openTable(table, plan)
    return {
      table,
      current,
      tagged: taggedSnapshot(current.metadata, tagOf(plan)) !== undefined,
      base: plan.layerType === "volatile" ? undefined : nearestOlder(current.metadata, plan.version)?.version
    }
  })

/**
 * The table's schema for the export's columns (the raw ones, or those `decoding` writes): refused
 * with exit 2 and the differences when Iceberg cannot evolve the table to them, before anything is
 * written.
 */
export const prepareTable = (dest: Destination, plan: Plan, decoding: Decoding | undefined) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const current = yield* loadTable(table, identityOf(plan))
    const columns = decoding?.columns ?? rawColumns(plan.heretile)
    const schema = yield* schemaFor(table, current, columns)
    return { schema, columns } satisfies PreparedTable
  })

/** What the Parquet writers need to write the table's data files: its field ids and the file's own schema. */
export const writerOptionsOf = (prepared: PreparedTable) => ({
  format: "parquet" as const,
  fieldIds: prepared.schema.fieldIds,
  metadata: dataFileMetadata(prepared.schema),
  tableRows: true
})

const metadataFileOf = (table: TableLocation, version: number) =>
  uriOf(table, keyIn(table, `metadata/${metadataFileName(version)}`))

const commitOf = (table: TableLocation, metadataFile: string, tag: string, snapshot: Snapshot): TableCommit => ({
  location: table.uri,
  metadataFile,
  tag,
  snapshotId: snapshot["snapshot-id"],
  dataFiles: Number(snapshot.summary["added-data-files"] ?? 0),
  deleteFiles: Number(snapshot.summary["added-delete-files"] ?? 0)
})

/** The export's manifest as a committed snapshot's summary tells it (the snapshot is the table's record). */
const manifestOfSnapshot = (
  plan: Pick<
    Plan,
    "catalogHrn" | "layerId" | "layerType" | "version" | "snapshot" | "contentType" | "contentEncoding"
  >,
  snapshot: Snapshot
): Manifest => {
  const summary = snapshot.summary
  const count = (key: string) => Number(summary[key] ?? 0)
  const at = new Date(snapshot["timestamp-ms"]).toISOString()
  const base = summary[Keys.baseVersion]
  return {
    formatVersion: 1,
    ...exportedOf(plan),
    mode: summary[Keys.mode] === "changes" ? "changes" : "full",
    ...(base === undefined ? {} : { baseVersion: Number(base) }),
    partitions: count(Counted.partitions),
    deleted: count(Counted.deleted),
    bytes: count(Counted.bytes),
    files: [],
    startedAt: at,
    finishedAt: at,
    tool: { name: TOOL.name, version: TOOL.version }
  }
}

/** The names (relative to the export's directory) of the snapshot's data files that are in it. */
const filesIn = (table: TableLocation, snapshot: Snapshot, dir: string) =>
  Effect.map(readSnapshot(table, snapshot), (manifests) => {
    const names = new Set<string>()
    for (const entry of liveFiles(manifests).data) {
      const key = keyOfUri(table, entry.data_file.file_path)
      if (key?.startsWith(`${dir}/`) === true) names.add(key.slice(dir.length + 1))
    }
    return names
  })

/** A table export found committed: the manifest its snapshot tells, and which of its directory's files the table uses. */
export interface TableCommitted {
  readonly manifest: Manifest
  readonly table: TableCommit
  /** The files of the export's directory the snapshot uses; undefined when the directory is tidy already. */
  readonly named: ReadonlySet<string> | undefined
}

/**
 * The plan's version (or volatile snapshot) as committed to the table, if it is: its snapshot's
 * record, and, when the run that committed it was stopped before tidying, what to keep.
 */
export const tableCommitted = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const current = yield* openTable(table, plan)
    const tag = tagOf(plan)
    const snapshot = taggedSnapshot(current.metadata, tag)
    if (snapshot === undefined) return Option.none<TableCommitted>()
    const dir = exportDir(plan)
    const untidy = (yield* dest.list(dir)).some((e) => e.name === PLAN)
    return Option.some<TableCommitted>({
      manifest: manifestOfSnapshot(plan, snapshot),
      table: commitOf(table, metadataFileOf(table, current.version), tag, snapshot),
      named: untidy ? yield* filesIn(table, snapshot, dir) : undefined
    })
  })

/** A table's run directory found committed: the manifest its snapshot tells, and the table's commit of it. */
export interface CommittedRun {
  readonly manifest: Manifest
  readonly table: TableCommit
}

/**
 * The export of a table's run directory (`data/version=<V>` or `data/snapshot=<S>`) once committed and
 * tidied (its plan removed): the manifest its tagged snapshot tells and the table's commit of it;
 * none while it is not tagged.
 */
export const committedRun = (dest: Destination, catalogId: string, layerId: string, runDir: string) =>
  Effect.gen(function*() {
    const m = RUN_DIR.exec(runDir)
    const table = tableAt(dest, `${catalogId}/${layerId}`)
    const { metadata, version } = yield* readCurrent(table)
    if (m === null || metadata === undefined) return Option.none<CommittedRun>()
    const tag = m[1] !== undefined ? versionTag(Number(m[1])) : `snapshot-${m[2]}`
    const snapshot = taggedSnapshot(metadata, tag)
    if (snapshot === undefined) return Option.none<CommittedRun>()
    return Option.some<CommittedRun>({
      manifest: manifestOfSnapshot({
        catalogHrn: snapshot.summary[Keys.catalog] ?? "",
        layerId,
        layerType: m[1] !== undefined ? "versioned" : "volatile",
        version: Number(m[1] ?? snapshot.summary[Keys.version] ?? 0),
        snapshot: m[2],
        contentType: snapshot.summary[Counted.contentType] ?? "",
        contentEncoding: snapshot.summary[Counted.contentEncoding]
      }, snapshot),
      table: commitOf(table, metadataFileOf(table, version), tag, snapshot)
    })
  })

/**
 * Commits the finished shards' data files as one snapshot of the layer's table, tagged with the
 * plan's version (a changes plan: on top of its base version's snapshot, the superseded and
 * deleted partitions' rows position-deleted). Returns the commit and the files of the export's
 * directory the table uses (the rest may go): the shards' files, or, when another run committed the
 * version meanwhile, that run's.
 */
export const commitTable = (
  dest: Destination,
  plan: Plan,
  finished: ReadonlyArray<ShardManifest>,
  manifest: Manifest
) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const dir = exportDir(plan)
    const current = yield* loadTable(table, identityOf(plan))
    const schema = yield* schemaFor(table, current, finished[0]?.columns ?? rawColumns(plan.heretile))
    const files = finished.flatMap((s) => s.files).map((file) => ({ uri: uriOf(table, `${dir}/${file.path}`), file }))
    const probe = yield* CrashProbe
    probe.reached("manifest")
    const result = yield* commitVersion(table, {
      identity: identityOf(plan),
      version: plan.layerType === "versioned" ? plan.version : undefined,
      mode: plan.mode,
      baseVersion: plan.baseVersion,
      deleted: new Set(finished.flatMap((s) => s.deletedPartitions ?? [])),
      schema,
      files,
      summary: {
        "engine-name": TOOL.name,
        "engine-version": TOOL.version,
        [Counted.partitions]: String(manifest.partitions),
        [Counted.deleted]: String(manifest.deleted),
        [Counted.bytes]: String(manifest.bytes),
        [Counted.contentType]: plan.contentType,
        ...(plan.contentEncoding === undefined ? {} : { [Counted.contentEncoding]: plan.contentEncoding })
      },
      createdBy: `${TOOL.name} ${TOOL.version}`,
      // A volatile layer's tag names the time of the plan's snapshot, as its directory does.
      now: new Date(plan.createdAt),
      commit: { reached: probe.reached }
    })
    probe.reached("committed")
    if (result._tag === "Committed") {
      return {
        table: commitOf(table, result.committed.metadataFile, result.tag, result.snapshot),
        named: new Set(finished.flatMap((s) => s.files.map((f) => f.path)))
      }
    }
    // Committed by another run of the same version meanwhile (or by this one, stopped before it could tell).
    const done = yield* tableCommitted(dest, plan)
    if (Option.isNone(done)) {
      return yield* Effect.dieMessage(`the table ${table.uri} said ${result.tag} is tagged, then did not have it`)
    }
    return { table: done.value.table, named: done.value.named ?? (yield* namedOf(dest, plan)) }
  })

/** The files of the export's directory that the table's snapshot of the plan uses. */
const namedOf = (dest: Destination, plan: Plan) =>
  Effect.gen(function*() {
    const table = tableOf(dest, plan)
    const current = yield* loadTable(table, identityOf(plan))
    const snapshot = taggedSnapshot(current.metadata, tagOf(plan))
    return snapshot === undefined ? new Set<string>() : yield* filesIn(table, snapshot, exportDir(plan))
  })

export interface SweepOptions {
  /** Files a commit or compaction wrote (their names carry the time) and no snapshot uses go once this old. */
  readonly olderThan: Duration.DurationInput
  /** The catalog's minimum version: an unfinished export of a version below it can never commit. */
  readonly minimum?: number | undefined
  readonly dryRun?: boolean | undefined
  readonly now?: number | undefined
}

const RUN_DIR = /^(?:version=(\d+)|snapshot=(\d{8}T\d{6}Z))$/

/**
 * Removes (a dry run: lists) the files of a table that no snapshot of `metadata` uses and that no run
 * will commit any more, and returns their URIs; nothing a snapshot uses is ever removed:
 *   - in an export's directory (`data/version=<V>/`, `data/snapshot=<S>/`), everything the table does
 *     not use once that export is over: committed (tagged), given up (its plan is gone), of a version
 *     below the catalog's `minimum` (which can never commit), or a volatile snapshot older than the
 *     oldest one the table keeps (never resumed: the next run takes a new one). An unfinished export
 *     of a version the catalog still has is left to its next run, which resumes it.
 *   - elsewhere (manifests and manifest lists in `metadata/`, delete files in `data/`, compaction's
 *     `data/compact-<id>/`), the files this tool named with the time they were written (Location.fileId)
 *     once older than `olderThan`: leftovers of commits and compactions stopped before they committed
 *     (younger ones may belong to a commit in progress). Files named otherwise (other writers') stay.
 */
export const sweepTable = (table: TableLocation, metadata: TableMetadata, options: SweepOptions) =>
  Effect.gen(function*() {
    const dest = table.dest
    const live = yield* reachable(table, metadata.snapshots ?? [])
    const refs = metadata.refs ?? {}
    const now = options.now ?? Date.now()
    const age = Duration.toMillis(Duration.decode(options.olderThan))
    const old = (path: string) => {
      const at = writtenAt(path)
      return at !== undefined && now - at >= age
    }
    const unused = (key: string) => !live.has(uriOf(table, key))
    const oldestSnapshot = Object.keys(refs).filter((name) => name.startsWith("snapshot-")).sort()[0]?.slice(
      "snapshot-".length
    )
    const over = (name: string, hasPlan: boolean) => {
      const m = RUN_DIR.exec(name)!
      if (!hasPlan) return true
      if (m[1] !== undefined) {
        const version = Number(m[1])
        return refs[versionTag(version)] !== undefined || (options.minimum !== undefined && version < options.minimum)
      }
      return refs[`snapshot-${m[2]}`] !== undefined || (oldestSnapshot !== undefined && m[2]! < oldestSnapshot)
    }
    const doomed: Array<string> = []
    const doomedDirs: Array<string> = []
    const metadataDir = keyIn(table, "metadata")
    for (const e of yield* dest.list(metadataDir)) {
      const key = `${metadataDir}/${e.name}`
      if (!e.dir && e.name.endsWith(".avro") && old(e.name) && unused(key)) doomed.push(key)
    }
    const dataDir = keyIn(table, TABLE_DATA)
    for (const e of yield* dest.list(dataDir)) {
      const key = `${dataDir}/${e.name}`
      if (!e.dir) {
        if (old(e.name) && unused(key)) doomed.push(key)
        continue
      }
      const entries = yield* dest.list(key)
      if (!RUN_DIR.test(e.name)) {
        for (const f of entries) {
          if (!f.dir && old(`${e.name}/${f.name}`) && unused(`${key}/${f.name}`)) doomed.push(`${key}/${f.name}`)
        }
        continue
      }
      if (!over(e.name, entries.some((f) => f.name === PLAN))) continue
      for (const f of entries) {
        if (f.dir) doomedDirs.push(`${key}/${f.name}`)
        else if (unused(`${key}/${f.name}`)) doomed.push(`${key}/${f.name}`)
      }
    }
    if (options.dryRun !== true) {
      yield* dest.remove(doomed)
      for (const dir of doomedDirs) yield* dest.removeAll(dir)
    }
    return [...doomed, ...doomedDirs.map((d) => `${d}/`)].map((key) => uriOf(table, key))
  })

/** The tables of a catalog's layers below a destination (`<catalog-id>/<layer-id>/`), as they are now. */
export const catalogTables = (dest: Destination, catalog: { readonly hrn: string; readonly id: string }) =>
  Effect.gen(function*() {
    const found: Array<{ readonly layerId: string; readonly table: TableLocation; readonly current: Current }> = []
    for (const e of yield* dest.list(catalog.id)) {
      if (!e.dir) continue
      const table = tableAt(dest, `${catalog.id}/${e.name}`)
      const current = yield* loadTable(table, { catalogHrn: catalog.hrn, layerId: e.name }).pipe(
        Effect.catchTag("IcebergError", (error) => (error.reason === "Mismatch" ? Effect.succeed(undefined) : error))
      )
      if (current?.metadata !== undefined) found.push({ layerId: e.name, table, current })
    }
    return found
  })
