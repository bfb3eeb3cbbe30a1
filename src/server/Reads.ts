import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BlobRow } from "./db/BlobsRepo.ts"
import type { CatalogRow } from "./db/CatalogsRepo.ts"
import * as Sqlite from "./db/Sqlite.ts"

/**
 * The reads every data request makes (bearer token, catalog access, blob location, partition pages),
 * as plain synchronous calls on prepared statements of a second, read-only SQLite connection. The
 * lean path (FastPath.ts) and the Effect routes both use them, so each rule and query exists once.
 * WAL lets this connection read while the Effect SqlClient writes; it sees every committed change.
 */
export interface ReadsShape {
  readonly tokenByHash: (tokenHash: string) => TokenRow | undefined
  /** A catalog as one application sees it, and optionally one of its layers (cached until the database changes). */
  readonly catalogAccess: (nameOrId: string, appId: string, layerId: string | null) => CatalogAccessRow | undefined
  readonly blobLocation: (layerPk: number, dataHandle: string) => BlobLocationRow | undefined
  /**
   * Runs a synchronous `read` that takes access rows from the cache without checking them first, and
   * checks once at its end instead, with the data version its last blobLocation reported (else one
   * query): if anything was committed since the rows were cached, the cache is dropped and `read` runs
   * again on fresh rows. The service's writes run on this thread, so none can land during `read`.
   * This saves a statement (and its two lock syscalls) per blob read, a tenth of what one costs.
   */
  readonly consistent: <A>(read: () => A) => A
  /** One page of a listing, ordered by partition id, strictly after `after` and at most `upTo`. */
  readonly partitionsPage: (
    layerPk: number,
    selection: Selection,
    after: string,
    upTo: string | null,
    limit: number
  ) => ReadonlyArray<PartitionRow>
  readonly partitionsByIds: (
    layerPk: number,
    selection: Selection,
    ids: ReadonlyArray<string>
  ) => ReadonlyArray<PartitionRow>
}

export class Reads extends Context.Tag("catalog-export/server/Reads")<Reads, ReadsShape>() {
  /** Opened once the database is migrated (Database.ts, hence the dependency), closed with the scope. */
  static readonly layer = (filename: string): Layer.Layer<Reads, never, SqlClient.SqlClient> =>
    Layer.scoped(Reads, make(filename))
}

/** A catalog as one application sees it, and optionally one of its layers, in one query. */
export interface CatalogAccessRow extends CatalogRow {
  readonly owns: number
  readonly can_read: number | null
  readonly can_write: number | null
  /** From the catalog's `replication.regions`; null when it names none (then the default region). */
  readonly primary_region: string | null
  /** The backup region of a multi-region catalog, else null. */
  readonly secondary_region: string | null
  readonly layer_pk: number | null
  readonly layer_id: string | null
  readonly layer_type: string | null
  readonly layer_config: string | null
  readonly layer_created: string | null
}

/** A blob and where its bytes are; `pack` is null when the content was removed. */
export interface BlobLocationRow extends BlobRow {
  readonly pack: number | null
  readonly offset: number | null
  readonly length: number | null
}

type BlobLocationTuple = readonly [
  string | null,
  number | null,
  string | null,
  number | null,
  number | null,
  number | null,
  number
]

export interface TokenRow {
  readonly app_id: string
  readonly expires_at: number
}

/**
 * A partition row in SQLite's raw (array) form, which is about twice as fast to read as an object:
 * see the `P` indices.
 */
export type PartitionRow = readonly [string, number, string, string | null, number | null, number | null, string | null]

export const P = {
  partition: 0,
  vfrom: 1,
  dataHandle: 2,
  checksum: 3,
  dataSize: 4,
  compressedDataSize: 5,
  crc: 6
} as const

const PARTITION_COLUMNS = "partition, vfrom, data_handle, checksum, data_size, compressed_data_size, crc"

/** Which rows a listing reads: one catalog version, a range of versions (changes), or volatile data. */
export type Selection =
  | { readonly _tag: "AtVersion"; readonly version: number }
  | { readonly _tag: "Changes"; readonly startVersion: number; readonly endVersion: number }
  | { readonly _tag: "Volatile" }
  | { readonly _tag: "VolatileSince"; readonly sinceTime: number }

/** Visibility of partition rows (validity intervals, see db/Migrations.ts) per kind of selection. */
const SELECTION_FILTERS: Record<Selection["_tag"], string> = {
  AtVersion: "vfrom <= @version AND (vto IS NULL OR vto > @version) AND data_handle <> ''",
  Changes: "vfrom > @startVersion AND vfrom <= @endVersion AND (vto IS NULL OR vto > @endVersion)",
  Volatile: "vto IS NULL AND data_handle <> ''",
  VolatileSince: "vto IS NULL AND modified >= @sinceTime"
}

const selectionParams = (selection: Selection): Record<string, number> => {
  switch (selection._tag) {
    case "AtVersion":
      return { version: selection.version }
    case "Changes":
      return { startVersion: selection.startVersion, endVersion: selection.endVersion }
    case "Volatile":
      return {}
    case "VolatileSince":
      return { sinceTime: selection.sinceTime }
  }
}

const regionWithRole = (role: string) =>
  `(SELECT json_extract(r.value, '$.id') FROM json_each(c.config, '$.replication.regions') r WHERE json_extract(r.value, '$.role') = '${role}')`

const ACCESS_SELECT = `SELECT c.*, c.owner_app = @appId AS owns, g.can_read, g.can_write,
    ${regionWithRole("primary")} AS primary_region, ${regionWithRole("secondary")} AS secondary_region,
    l.pk AS layer_pk, l.id AS layer_id, l.layer_type, l.config AS layer_config, l.created AS layer_created
  FROM catalogs c
  LEFT JOIN grants g ON g.catalog_hrn = c.hrn AND g.app_id = @appId
  LEFT JOIN layers l ON l.catalog_hrn = c.hrn AND l.id = @layerId`

const ACCESS_CACHE_MAX = 10_000

const make = (filename: string) =>
  Effect.gen(function*() {
    yield* SqlClient.SqlClient
    const db = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const db = Sqlite.open(filename, { readOnly: true })
        // SQLite's default page cache (2 MB) is far smaller than the partition and blob tables; every
        // miss is a pread. Pages are cached as they are read, up to this bound.
        db.exec("PRAGMA cache_size = -65536")
        return db
      }),
      (db) => Effect.sync(() => db.close())
    )
    const token = Sqlite.query<[string], TokenRow>(db, "SELECT app_id, expires_at FROM tokens WHERE token_hash = ?")
    const accessByHrn = Sqlite.query<[Record<string, string>], CatalogAccessRow>(
      db,
      `${ACCESS_SELECT} WHERE c.hrn = @nameOrId ORDER BY c.hrn LIMIT 1`
    )
    const accessById = Sqlite.query<[Record<string, string>], CatalogAccessRow>(
      db,
      `${ACCESS_SELECT} WHERE c.id = @nameOrId ORDER BY c.hrn LIMIT 1`
    )
    // One row whether or not the blob exists, with the data version of the same read transaction.
    const blob = Sqlite.query<[number, string], BlobLocationTuple>(
      db,
      `SELECT b.sha256, b.size, b.content_encoding, c.pack, c.offset, c.length, d.data_version
      FROM pragma_data_version() d
      LEFT JOIN blobs b ON b.layer_pk = ? AND b.data_handle = ?
      LEFT JOIN contents c ON c.sha256 = b.sha256`,
      { arrays: true }
    )

    // Access rows change only through writes on the other connection; `data_version` moves with each
    // commit there, so a cached row is used only while nothing at all was committed since it was read.
    const dataVersion = Sqlite.query<[], readonly [number]>(db, "PRAGMA data_version", { arrays: true })
    let seenVersion = -1
    const access = new Map<string, CatalogAccessRow | undefined>()
    const checkVersion = (version: number) => {
      if (version === seenVersion) return true
      seenVersion = version
      access.clear()
      return false
    }
    // Inside `consistent`: whether a cached row was used, and the version the last blob read saw.
    let inRun = false
    let usedCache = false
    let observed: number | undefined

    const statements = new Map<string, Sqlite.Query<[Record<string, string | number>], PartitionRow>>()
    const partitionStatement = (key: string, sql: () => string) => {
      let statement = statements.get(key)
      if (statement === undefined) {
        statement = Sqlite.query(db, sql(), { arrays: true })
        statements.set(key, statement)
      }
      return statement
    }

    return Reads.of({
      tokenByHash: (tokenHash) => token.get(tokenHash),
      catalogAccess: (nameOrId, appId, layerId) => {
        if (!inRun) checkVersion(dataVersion.get()![0])
        const layer = layerId ?? ""
        const key = `${appId.length}:${appId}${layer.length}:${layer}${nameOrId}`
        let row = access.get(key)
        if (row !== undefined || access.has(key)) {
          usedCache = true
          return row
        }
        const params = { appId, layerId: layer, nameOrId }
        row = nameOrId.startsWith("hrn:") ? accessByHrn.get(params) : accessById.get(params)
        if (access.size >= ACCESS_CACHE_MAX) access.clear()
        access.set(key, row)
        return row
      },
      blobLocation: (layerPk, dataHandle) => {
        const [sha256, size, content_encoding, pack, offset, length, version] = blob.get(layerPk, dataHandle)!
        observed = version
        return sha256 === null ? undefined : { sha256, size: size!, content_encoding, pack, offset, length }
      },
      consistent: (read) => {
        if (inRun) return read()
        inRun = true
        usedCache = false
        observed = undefined
        let result
        try {
          result = read()
        } finally {
          inRun = false
        }
        return checkVersion(observed ?? dataVersion.get()![0]) || !usedCache ? result : read()
      },
      partitionsPage: (layerPk, selection, after, upTo, limit) =>
        partitionStatement(`page ${selection._tag} ${upTo === null}`, () =>
          `SELECT ${PARTITION_COLUMNS} FROM partitions
            WHERE layer_pk = @layerPk AND partition > @after ${upTo === null ? "" : "AND partition <= @upTo"}
            AND ${SELECTION_FILTERS[selection._tag]}
            ORDER BY partition LIMIT @limit`).all({
            layerPk,
            after,
            limit,
            ...(upTo === null ? {} : { upTo }),
            ...selectionParams(selection)
          }),
      partitionsByIds: (layerPk, selection, ids) =>
        partitionStatement(`ids ${selection._tag}`, () =>
          `SELECT ${PARTITION_COLUMNS} FROM partitions
            WHERE layer_pk = @layerPk AND partition IN (SELECT value FROM json_each(@ids))
            AND ${SELECTION_FILTERS[selection._tag]}
            ORDER BY partition`).all({ layerPk, ids: JSON.stringify(ids), ...selectionParams(selection) })
    })
  })
