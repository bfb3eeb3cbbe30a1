import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import type { Column } from "../Columns.ts"
import type { RecordedFile } from "../WrittenFile.ts"
import { commit, type CommitOptions, type Committed, type Current, readCurrent } from "./Commit.ts"
import { IcebergError } from "./Errors.ts"
import { locateRows, partitionsIn } from "./LiveRows.ts"
import type { TableLocation } from "./Location.ts"
import { dataFileOf, UNPARTITIONED } from "./Manifest.ts"
import { writePositionDeletes } from "./PositionDeletes.ts"
import { liveFiles, readSnapshot } from "./SnapshotFiles.ts"
import { proposeSnapshot, type StagedManifest, stageManifest } from "./SnapshotUpdate.ts"
import {
  currentSchema,
  currentSnapshot,
  type Operation,
  type Snapshot,
  snapshotById,
  type TableMetadata,
  tagsOf
} from "./TableMetadata.ts"
import { evolve, type Evolved } from "./TableSchema.ts"

/**
 * A layer's Iceberg table as the export uses it: one table per layer, one snapshot per exported
 * catalog version tagged `v<N>` (a volatile layer: one per run, tagged `snapshot-<UTC time>`),
 * `main` on the newest version. The table says whose it is (catalog and layer in its properties)
 * and each snapshot what it holds (catalog, layer, version, mode in its summary).
 */

export interface TableIdentity {
  readonly catalogHrn: string
  readonly layerId: string
}

/** Table properties and summary fields of this tool. */
export const Keys = {
  catalog: "catalog-export.catalog-hrn",
  layer: "catalog-export.layer-id",
  version: "catalog-export.catalog-version",
  mode: "catalog-export.mode",
  baseVersion: "catalog-export.base-version"
} as const

export const versionTag = (version: number) => `v${version}`

/** `snapshot-<UTC yyyymmddThhmmssZ>`: a volatile layer's run. */
export const timeTag = (at: Date) => `snapshot-${at.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}`

const mismatch = (table: TableLocation, message: string) =>
  new IcebergError({ table: table.uri, reason: "Mismatch", message })

/** What an export directory (not a table) leaves in a layer's directory. */
const isPlainExport = (name: string) =>
  name.startsWith("version=") || name.startsWith("snapshot=") || name === "_state.json"

/**
 * The layer's table as it is (no table yet: version 0), checked to be this layer's: a directory
 * holding a Parquet/Arrow export, another layer's table, or a table that was moved is refused.
 */
export const loadTable = Effect.fn("Iceberg.loadTable")(
  function*(table: TableLocation, identity: TableIdentity) {
    const current = yield* readCurrent(table)
    const metadata = current.metadata
    if (metadata === undefined) {
      const plain = (yield* table.dest.list(table.key)).find((e) => isPlainExport(e.name))
      if (plain !== undefined) {
        return yield* mismatch(
          table,
          `${table.uri} holds a Parquet/Arrow export (${plain.name}), not an Iceberg table. Export the table into another --out, or move that export away.`
        )
      }
      return current
    }
    if (metadata.location !== table.uri) {
      return yield* mismatch(
        table,
        `The table at ${table.uri} says its location is ${metadata.location}: it was copied or moved, and every file it records is still named under the old location. Export into the table's own location, or into a new one.`
      )
    }
    const [catalog, layer] = [metadata.properties?.[Keys.catalog], metadata.properties?.[Keys.layer]]
    if (catalog !== identity.catalogHrn || layer !== identity.layerId) {
      return yield* mismatch(
        table,
        `${table.uri} is the table of ${catalog ?? "another tool"}${
          layer === undefined ? "" : ` layer ${layer}`
        }, not of ${identity.catalogHrn} layer ${identity.layerId}. Export into another --out.`
      )
    }
    return current
  }
)

/** The catalog version a snapshot holds (none for a volatile layer's or another tool's). */
export const versionOf = (snapshot: Snapshot): number | undefined => {
  const v = snapshot.summary[Keys.version]
  return v === undefined ? undefined : Number(v)
}

/** The exported catalog versions: each tag `v<N>` and its snapshot, oldest first. */
export const taggedVersions = (metadata: TableMetadata | undefined) =>
  (metadata === undefined ? [] : tagsOf(metadata)).flatMap(({ name, snapshot }) => {
    const m = /^v(\d+)$/.exec(name)
    return m === null ? [] : [{ version: Number(m[1]), tag: name, snapshot }]
  }).sort((a, b) => a.version - b.version)

/** The catalog version `main` holds: the newest exported. */
export const mainVersion = (metadata: TableMetadata | undefined): number | undefined => {
  const snapshot = metadata === undefined ? undefined : currentSnapshot(metadata)
  return snapshot === undefined ? undefined : versionOf(snapshot)
}

/** The newest exported version below `version`, which a new snapshot of `version` builds on (its parent). */
export const nearestOlder = (metadata: TableMetadata | undefined, version: number) =>
  taggedVersions(metadata).filter((t) => t.version < version).at(-1)

/**
 * The table schema for the export's columns: the table's current one, or its update (new columns
 * are added); refused when Iceberg cannot evolve to them (exit 2, the differences named).
 */
export const schemaFor = (
  table: TableLocation,
  current: Current,
  columns: ReadonlyArray<Column>
): Effect.Effect<Evolved, IcebergError> => {
  const metadata = current.metadata
  const result = evolve(
    columns,
    metadata === undefined ? undefined : { schema: currentSchema(metadata), lastColumnId: metadata["last-column-id"] }
  )
  if (result._tag === "Evolved") return Effect.succeed(result.evolved)
  return Effect.fail(
    new IcebergError({
      table: table.uri,
      reason: "SchemaChange",
      message:
        `The columns of this export do not fit the table ${table.uri}, and Iceberg cannot evolve its schema to them: ${
          result.problems.join("; ")
        }. Export into a new table (another --out), or keep the export's settings (--decode) as the table has them.`
    })
  )
}

/** File key-value metadata for a data file written with `schema`: its own Iceberg schema, as Iceberg writers add it. */
export const dataFileMetadata = (schema: Evolved): Record<string, string> => ({
  "iceberg.schema": JSON.stringify({ ...schema.fileSchema, "schema-id": schema.schema["schema-id"] })
})

/** Properties of a new table. */
const tableProperties = (identity: TableIdentity): Record<string, string> => ({
  [Keys.catalog]: identity.catalogHrn,
  [Keys.layer]: identity.layerId,
  "write.format.default": "parquet",
  "write.parquet.compression-codec": "zstd",
  "write.metadata.delete-after-commit.enabled": "true",
  "write.metadata.previous-versions-max": "100"
})

/** A new table's metadata, without snapshots. */
export const newTable = (table: TableLocation, identity: TableIdentity, schema: Evolved): TableMetadata => ({
  "format-version": 2,
  "table-uuid": randomUUID(),
  location: table.uri,
  "last-sequence-number": 0,
  "last-updated-ms": Date.now(),
  "last-column-id": schema.lastColumnId,
  schemas: [schema.schema],
  "current-schema-id": schema.schema["schema-id"],
  "partition-specs": [UNPARTITIONED],
  "default-spec-id": UNPARTITIONED["spec-id"],
  "last-partition-id": 999,
  properties: tableProperties(identity),
  snapshots: [],
  "snapshot-log": [],
  "metadata-log": [],
  "sort-orders": [{ "order-id": 0, fields: [] }],
  "default-sort-order-id": 0,
  refs: {}
})

export interface VersionCommit {
  readonly identity: TableIdentity
  /** The catalog version (tag `v<N>`); undefined for a volatile layer's run (tag `snapshot-<time>`, main moves). */
  readonly version: number | undefined
  /**
   * `full`: the new snapshot holds the written files only. `changes`: the snapshot of `baseVersion`,
   * less the rows of the partitions the written files hold anew and of the `deleted` ones, plus the
   * written files.
   */
  readonly mode: "full" | "changes"
  /** changes: the exported version the changes are from (its tag's snapshot is the base). */
  readonly baseVersion?: number | undefined
  /** changes: the partitions deleted in the catalog since `baseVersion` (no row of theirs is written). */
  readonly deleted?: ReadonlySet<string> | undefined
  /** The schema the files were written with (schemaFor, when the export was planned). */
  readonly schema: Evolved
  /** The written data files and their URIs. */
  readonly files: ReadonlyArray<{ readonly uri: string; readonly file: RecordedFile }>
  /** Further summary fields (the tool's version, ...). */
  readonly summary?: Readonly<Record<string, string>> | undefined
  readonly createdBy: string
  readonly now?: Date | undefined
  readonly commit?: CommitOptions | undefined
}

export type VersionCommitted =
  | { readonly _tag: "Committed"; readonly committed: Committed; readonly tag: string; readonly snapshot: Snapshot }
  /**
   * The version was tagged already: nothing was committed. `holdsFiles`: the tagged snapshot has the
   * given data files (this run's own commit, stopped before it could tell); otherwise they are
   * unneeded and the caller may remove them.
   */
  | { readonly _tag: "AlreadyTagged"; readonly tag: string; readonly holdsFiles: boolean }

/** The partition column's field id in a table schema. */
const partitionFieldId = (schema: Evolved, table: TableLocation) => {
  const field = schema.schema.fields.find((f) => f.name === "partition")
  return field === undefined
    ? Effect.fail(mismatch(table, `The table ${table.uri} has no partition column to find rows by.`))
    : Effect.succeed(field.id)
}

/**
 * Commits an exported catalog version as a snapshot tagged `v<N>` (a volatile run: `snapshot-<time>`).
 * `full`: a snapshot of the written files only, its parent the nearest older version's snapshot;
 * `changes`: the base version's snapshot with the written files added, and the older rows of their
 * partitions and of the deleted ones position-deleted (found in the base snapshot itself, whichever
 * machine wrote it). `main` moves only forward in versions.
 * Retries on top of other writers; a version someone else tagged meanwhile is left as it is.
 */
export const commitVersion = Effect.fn("Iceberg.commitVersion")(
  function*(table: TableLocation, options: VersionCommit) {
    const now = options.now ?? new Date()
    const tag = options.version === undefined ? timeTag(now) : versionTag(options.version)
    const dataFiles = options.files.map(({ file, uri }) => dataFileOf(uri, file, options.schema.schema.fields))
    const staged: StagedManifest | undefined = yield* stageManifest(table, options.schema.schema, "data", dataFiles)
    const addedRows = dataFiles.reduce((n, f) => n + f.record_count, 0)
    // changes: the partitions whose rows in the base go: those written anew, and the deleted ones.
    const replaced = options.mode === "changes"
      ? yield* partitionsIn(table, dataFiles, yield* partitionFieldId(options.schema, table))
      : new Set<string>()
    for (const id of options.deleted ?? []) replaced.add(id)
    // Delete files depend on the base snapshot: made again only when another writer moved it.
    const deletesFor = new Map<
      number,
      { readonly manifest: StagedManifest | undefined; readonly keys: Array<string> }
    >()
    // The snapshot of the latest proposal: the committed one when the commit succeeds.
    let proposed: Snapshot | undefined
    let attempt = 0

    // What this run wrote besides the data files: gone again when it fails.
    const written =
      () => [...(staged === undefined ? [] : [staged.key]), ...[...deletesFor.values()].flatMap((d) => d.keys)]
    const committed = yield* commit(table, (current) =>
      Effect.gen(function*() {
        attempt++
        const metadata = current.metadata ?? newTable(table, options.identity, options.schema)
        if (metadata.refs?.[tag] !== undefined) return undefined
        const main = options.version === undefined ||
          (mainVersion(metadata) ?? Number.NEGATIVE_INFINITY) < options.version
        const added: Array<StagedManifest> = staged === undefined ? [] : [staged]
        let base: Snapshot | undefined
        let removed = new Set<string>()
        let operation: Operation = "append"
        let deletes = 0
        if (options.mode === "changes") {
          const baseTag = versionTag(options.baseVersion ?? Number.NaN)
          base = tagsOf(metadata).find((t) => t.name === baseTag)?.snapshot
          if (base === undefined) {
            return yield* new IcebergError({
              table: table.uri,
              reason: "Conflict",
              message:
                `The table ${table.uri} no longer has the snapshot of version ${options.baseVersion} (tag ${baseTag}) that this changes run builds on (expired meanwhile). Run the export again: it makes a full snapshot.`
            })
          }
          const id = base["snapshot-id"]
          if (!deletesFor.has(id)) {
            const rows = replaced.size === 0
              ? new Map()
              : yield* locateRows(table, base, yield* partitionFieldId(options.schema, table), (p) => replaced.has(p))
            const written = yield* writePositionDeletes(table, [...rows.values()].flat(), options.createdBy)
            const manifest = written === undefined
              ? undefined
              : yield* stageManifest(table, options.schema.schema, "deletes", [written.file])
            deletesFor.set(id, {
              manifest,
              keys: written === undefined ? [] : [written.key, ...(manifest === undefined ? [] : [manifest.key])]
            })
          }
          const forBase = deletesFor.get(id)!
          if (forBase.manifest !== undefined) {
            added.push(forBase.manifest)
            deletes = forBase.manifest.rows
          }
          operation = deletes === 0 ? "append" : addedRows === 0 ? "delete" : "overwrite"
        } else {
          // A full snapshot replaces what its parent holds.
          base = options.version === undefined
            ? currentSnapshot(metadata)
            : nearestOlder(metadata, options.version)?.snapshot
          if (base !== undefined) {
            const { data, deletes: deleteFiles } = liveFiles(yield* readSnapshot(table, base))
            removed = new Set([...data, ...deleteFiles].map((e) => e.data_file.file_path))
            operation = "overwrite"
          }
        }
        const proposal = yield* proposeSnapshot(table, metadata, {
          operation,
          base,
          added,
          removed,
          main,
          tags: [tag],
          summary: {
            ...options.summary,
            [Keys.catalog]: options.identity.catalogHrn,
            [Keys.layer]: options.identity.layerId,
            ...(options.version === undefined ? {} : { [Keys.version]: String(options.version) }),
            [Keys.mode]: options.mode,
            ...(options.mode === "changes" ? { [Keys.baseVersion]: String(options.baseVersion) } : {})
          },
          schema: options.schema.schema,
          lastColumnId: options.schema.lastColumnId
        }, attempt)
        proposed = proposal.snapshot
        return proposal
      }), options.commit).pipe(Effect.tapError(() => Effect.ignore(table.dest.remove(written()))))

    if (committed === undefined || proposed === undefined) {
      // The version is tagged: the manifests and delete files made here are not needed.
      yield* Effect.ignore(table.dest.remove(written()))
      const metadata = (yield* readCurrent(table)).metadata
      const tagged = metadata === undefined ? undefined : tagsOf(metadata).find((t) => t.name === tag)?.snapshot
      const held = tagged === undefined
        ? new Set<string>()
        : new Set(liveFiles(yield* readSnapshot(table, tagged)).data.map((e) => e.data_file.file_path))
      const holdsFiles = options.files.length > 0 && options.files.every((f) => held.has(f.uri))
      return { _tag: "AlreadyTagged", tag, holdsFiles } satisfies VersionCommitted as VersionCommitted
    }
    // Delete files made for bases that did not win are not referenced by anything.
    const winner = proposed["parent-snapshot-id"]
    const stale = [...deletesFor.entries()].filter(([id]) => id !== winner).flatMap(([, d]) => d.keys)
    if (stale.length > 0) yield* Effect.ignore(table.dest.remove(stale))
    return { _tag: "Committed", committed, tag, snapshot: proposed } satisfies VersionCommitted as VersionCommitted
  }
)

/** The snapshot of an exported version, if tagged. */
export const snapshotOfVersion = (metadata: TableMetadata | undefined, version: number): Snapshot | undefined => {
  const ref = metadata?.refs?.[versionTag(version)]
  return ref === undefined || metadata === undefined ? undefined : snapshotById(metadata, ref["snapshot-id"])
}
