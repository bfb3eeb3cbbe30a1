import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { statements } from "./Schema.ts"

export interface AppRow {
  readonly id: string
  readonly key_id: string
  readonly key_secret: string
  readonly user_id: string
  readonly realm: string
}

export interface CatalogRow {
  readonly hrn: string
  readonly id: string
  readonly owner_app: string
  readonly config: string
  readonly created: string
  readonly latest_version: number
  readonly min_version: number
}

export interface LayerRow {
  readonly pk: number
  readonly catalog_hrn: string
  readonly id: string
  readonly layer_type: string
  readonly config: string
  readonly created: string
}

export interface BlobRow {
  readonly sha256: string
  readonly size: number
  readonly content_encoding: string | null
}

/** A blob and where its bytes are; `pack` is null when the content was removed. */
export interface BlobLocationRow extends BlobRow {
  readonly pack: number | null
  readonly offset: number | null
  readonly length: number | null
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

export interface VersionRow {
  readonly version: number
  readonly timestamp: number
  readonly dependencies: string
  /** JSON object layer id -> partitions; `{}` for versions committed before counts were kept. */
  readonly partition_counts: string
}

/** An asynchronous config operation behind a status link. */
export interface OperationRow {
  readonly token: string
  readonly kind: "create" | "update" | "delete" | "layer-delete"
  readonly catalog_hrn: string
  readonly title: string
  readonly state: "pending" | "success" | "failure"
  readonly created: number
}

export interface PublicationRow {
  readonly id: string
  readonly catalog_hrn: string
  readonly app_id: string
  readonly layer_ids: string
  readonly kind: string
  readonly state: string
  readonly message: string
  readonly catalog_version: number
  readonly dependencies: string
  readonly started: number
  readonly modified: number
  readonly expires: number
}

export interface StagedPartition {
  readonly layerPk: number
  readonly partition: string
  readonly dataHandle: string
  readonly checksum: string | null
  readonly dataSize: number | null
  readonly compressedDataSize: number | null
  readonly crc: string | null
}

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe("PRAGMA synchronous = NORMAL")
  yield* sql.unsafe("PRAGMA foreign_keys = OFF")
  for (const statement of statements) yield* sql.unsafe(statement)

  const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]
  const partitionCounts = sql.unsafe(`(SELECT json_group_object(c.layer_id, c.count) FROM version_partition_counts c
    WHERE c.catalog_hrn = v.catalog_hrn AND c.version = v.version) AS partition_counts`)

  return {
    withTransaction: sql.withTransaction,

    // --- applications and tokens -----------------------------------------------------------
    insertApp: (app: AppRow) =>
      sql`INSERT INTO apps ${sql.insert(app as any)} ON CONFLICT (id) DO UPDATE SET key_id = excluded.key_id, key_secret = excluded.key_secret`.pipe(Effect.asVoid),
    appById: (id: string) => sql<AppRow>`SELECT * FROM apps WHERE id = ${id}`.pipe(Effect.map(first)),
    appByKeyId: (keyId: string) =>
      sql<AppRow>`SELECT * FROM apps WHERE key_id = ${keyId}`.pipe(Effect.map(first)),
    insertToken: (tokenHash: string, appId: string, expiresAt: number) =>
      sql`INSERT INTO tokens (token_hash, app_id, expires_at) VALUES (${tokenHash}, ${appId}, ${expiresAt})`.pipe(Effect.asVoid),
    deleteExpiredTokens: (now: number) => sql`DELETE FROM tokens WHERE expires_at < ${now}`.pipe(Effect.asVoid),

    // --- catalogs, layers, grants ----------------------------------------------------------
    insertCatalog: (row: Omit<CatalogRow, "latest_version" | "min_version">) =>
      sql`INSERT INTO catalogs ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    updateCatalogConfig: (hrn: string, config: string) =>
      sql`UPDATE catalogs SET config = ${config} WHERE hrn = ${hrn}`.pipe(Effect.asVoid),
    catalog: (hrn: string) => sql<CatalogRow>`SELECT * FROM catalogs WHERE hrn = ${hrn}`.pipe(Effect.map(first)),
    catalogById: (id: string) => sql<CatalogRow>`SELECT * FROM catalogs WHERE id = ${id} ORDER BY hrn LIMIT 1`.pipe(Effect.map(first)),
    /** Catalogs the application created or was granted read on. */
    readableCatalogs: (appId: string) =>
      sql<CatalogRow>`SELECT c.* FROM catalogs c WHERE c.owner_app = ${appId}
        OR EXISTS (SELECT 1 FROM grants g WHERE g.catalog_hrn = c.hrn AND g.app_id = ${appId} AND g.can_read = 1)
        ORDER BY c.hrn`,
    grant: (catalogHrn: string, appId: string, read: boolean, write: boolean) =>
      sql`INSERT INTO grants (catalog_hrn, app_id, can_read, can_write) VALUES (${catalogHrn}, ${appId}, ${read ? 1 : 0}, ${write ? 1 : 0})
        ON CONFLICT (catalog_hrn, app_id) DO UPDATE SET can_read = excluded.can_read, can_write = excluded.can_write`.pipe(Effect.asVoid),
    grantOf: (catalogHrn: string, appId: string) =>
      sql<{ can_read: number; can_write: number }>`SELECT can_read, can_write FROM grants WHERE catalog_hrn = ${catalogHrn} AND app_id = ${appId}`.pipe(
        Effect.map(first)
      ),
    insertLayer: (row: Omit<LayerRow, "pk">) =>
      sql<{ pk: number }>`INSERT INTO layers ${sql.insert(row as any)} RETURNING pk`.pipe(Effect.map((rows) => rows[0]!.pk)),
    updateLayerConfig: (pk: number, config: string) => sql`UPDATE layers SET config = ${config} WHERE pk = ${pk}`.pipe(Effect.asVoid),
    insertOperation: (row: OperationRow) => sql`INSERT INTO operations ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    operation: (token: string) => sql<OperationRow>`SELECT * FROM operations WHERE token = ${token}`.pipe(Effect.map(first)),
    layers: (catalogHrn: string) => sql<LayerRow>`SELECT * FROM layers WHERE catalog_hrn = ${catalogHrn} ORDER BY pk`,
    layer: (catalogHrn: string, layerId: string) =>
      sql<LayerRow>`SELECT * FROM layers WHERE catalog_hrn = ${catalogHrn} AND id = ${layerId}`.pipe(Effect.map(first)),

    // --- versions ---------------------------------------------------------------------------
    setVersions: (hrn: string, latest: number, minimum: number) =>
      sql`UPDATE catalogs SET latest_version = ${latest}, min_version = ${minimum} WHERE hrn = ${hrn}`.pipe(Effect.asVoid),
    insertVersion: (hrn: string, version: number, timestamp: number, dependencies: string) =>
      sql`INSERT INTO versions (catalog_hrn, version, timestamp, dependencies) VALUES (${hrn}, ${version}, ${timestamp}, ${dependencies})`.pipe(Effect.asVoid),
    versions: (hrn: string, fromExclusive: number, toInclusive: number) =>
      sql<VersionRow>`SELECT version, timestamp, dependencies, ${partitionCounts} FROM versions v
        WHERE catalog_hrn = ${hrn} AND version > ${fromExclusive} AND version <= ${toInclusive} ORDER BY version`,
    versionsIn: (hrn: string, list: ReadonlyArray<number>) =>
      sql<VersionRow>`SELECT version, timestamp, dependencies, ${partitionCounts} FROM versions v
        WHERE catalog_hrn = ${hrn} AND ${sql.in("version", list)} ORDER BY version`,
    markLayerVersion: (layerPk: number, version: number, timestamp: number) =>
      sql`INSERT OR REPLACE INTO layer_versions (layer_pk, version, timestamp) VALUES (${layerPk}, ${version}, ${timestamp})`.pipe(Effect.asVoid),
    /** Per layer of the catalog, the last version at or below `version` in which it changed. */
    layerVersionsAt: (hrn: string, version: number) =>
      sql<{ layer: string; version: number; timestamp: number }>`
        SELECT l.id AS layer, lv.version AS version, lv.timestamp AS timestamp
        FROM layers l JOIN layer_versions lv ON lv.layer_pk = l.pk
        WHERE l.catalog_hrn = ${hrn} AND lv.version = (SELECT MAX(version) FROM layer_versions WHERE layer_pk = l.pk AND version <= ${version})
        ORDER BY l.id`,

    // --- partitions --------------------------------------------------------------------------
    /** Ids at fixed ranks of the layer's distinct partition ids; used to cut a listing into parts. */
    partitionIdAtRank: (layerPk: number, rank: number) =>
      sql<{ partition: string }>`SELECT partition FROM partitions WHERE layer_pk = ${layerPk} AND vto IS NULL
        ORDER BY partition LIMIT 1 OFFSET ${rank}`.pipe(Effect.map((rows) => rows[0]?.partition)),
    countCurrentPartitions: (layerPk: number) =>
      sql<{ n: number }>`SELECT COUNT(*) AS n FROM partitions WHERE layer_pk = ${layerPk} AND vto IS NULL`.pipe(Effect.map((rows) => rows[0]!.n)),
    /**
     * Commits a versioned publication as catalog version `version`: ends the current row of every
     * staged partition and starts a new one (a deletion only where there was data to delete).
     */
    commitVersioned: (publicationId: string, version: number, now: number) =>
      Effect.gen(function*() {
        yield* sql`UPDATE partitions SET vto = ${version}
          WHERE vto IS NULL AND (layer_pk, partition) IN (SELECT layer_pk, partition FROM publication_partitions WHERE publication_id = ${publicationId})`
        yield* sql`INSERT INTO partitions (layer_pk, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified)
          SELECT s.layer_pk, s.partition, ${version}, NULL, s.data_handle, s.checksum, s.data_size, s.compressed_data_size, s.crc, ${now}
          FROM publication_partitions s
          WHERE s.publication_id = ${publicationId} AND (s.data_handle <> '' OR EXISTS (
            SELECT 1 FROM partitions p WHERE p.layer_pk = s.layer_pk AND p.partition = s.partition AND p.vto = ${version} AND p.data_handle <> ''))`
        yield* sql`UPDATE blobs SET owner_version = ${version} WHERE owner_version IS NULL
          AND (layer_pk, data_handle) IN (SELECT layer_pk, data_handle FROM publication_partitions WHERE publication_id = ${publicationId})`
        yield* sql`INSERT OR REPLACE INTO layer_versions (layer_pk, version, timestamp)
          SELECT DISTINCT layer_pk, ${version}, ${now} FROM publication_partitions WHERE publication_id = ${publicationId}`
        // Counted again for the layers this publication changed, carried over for the others.
        yield* sql`INSERT OR REPLACE INTO version_partition_counts (catalog_hrn, version, layer_id, count)
          SELECT l.catalog_hrn, ${version}, l.id, COALESCE(
            CASE WHEN l.pk IN (SELECT layer_pk FROM publication_partitions WHERE publication_id = ${publicationId}) THEN NULL ELSE
              (SELECT c.count FROM version_partition_counts c WHERE c.catalog_hrn = l.catalog_hrn AND c.version = ${version - 1} AND c.layer_id = l.id) END,
            (SELECT COUNT(*) FROM partitions p WHERE p.layer_pk = l.pk AND p.vto IS NULL AND p.data_handle <> ''))
          FROM layers l
          WHERE l.layer_type = 'versioned' AND l.catalog_hrn = (SELECT catalog_hrn FROM publications WHERE id = ${publicationId})`
        yield* sql`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}`
      }),
    /** Volatile layers keep one row per partition, overwritten in place; returns what was written. */
    commitVolatile: (publicationId: string, now: number) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO partitions (layer_pk, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified)
          SELECT layer_pk, partition, 0, NULL, data_handle, checksum, data_size, compressed_data_size, crc, ${now}
          FROM publication_partitions WHERE publication_id = ${publicationId} AND true
          ON CONFLICT (layer_pk, partition, vfrom) DO UPDATE SET data_handle = excluded.data_handle, checksum = excluded.checksum,
            data_size = excluded.data_size, compressed_data_size = excluded.compressed_data_size, crc = excluded.crc, modified = excluded.modified`
        return yield* sql<{ layer_pk: number; partition: string }>`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}
          RETURNING layer_pk, partition`
      }),

    /**
     * Makes the partitions `ids` of replica `to` what they are in replica `from` (volatile
     * replication); returns the data handles they now refer to.
     */
    copyPartitions: (from: number, to: number, ids: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const list = JSON.stringify(ids)
        yield* sql`DELETE FROM partitions WHERE layer_pk = ${to} AND partition IN (SELECT value FROM json_each(${list}))`
        const rows = yield* sql<{ data_handle: string }>`INSERT INTO partitions
          (layer_pk, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified)
          SELECT ${to}, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified
          FROM partitions WHERE layer_pk = ${from} AND partition IN (SELECT value FROM json_each(${list}))
          RETURNING data_handle`
        return rows.map((r) => r.data_handle).filter((h) => h !== "")
      }),
    /** Makes the blobs `handles` of replica `to` what they are in replica `from`; returns the contents it stopped using. */
    copyBlobs: (from: number, to: number, handles: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const list = JSON.stringify(handles)
        const replaced = yield* sql<{ sha256: string }>`DELETE FROM blobs WHERE layer_pk = ${to}
          AND data_handle IN (SELECT value FROM json_each(${list})) RETURNING sha256`
        yield* sql`INSERT INTO blobs (layer_pk, data_handle, sha256, size, content_encoding, owner_version)
          SELECT ${to}, data_handle, sha256, size, content_encoding, owner_version
          FROM blobs WHERE layer_pk = ${from} AND data_handle IN (SELECT value FROM json_each(${list}))`
        return replaced.map((r) => r.sha256)
      }),

    /**
     * Removes, in the versioned layers of a catalog, the partition rows no version at or above
     * `minimum` can see, and the blobs those rows owned unless a surviving row of the same version
     * shares the handle. Returns the content digests no blob refers to any more.
     */
    purgeBelowMinimum: (catalogHrn: string, minimum: number) =>
      Effect.gen(function*() {
        const layers = sql`SELECT pk FROM layers WHERE catalog_hrn = ${catalogHrn} AND layer_type = 'versioned'`
        const removed = yield* sql<{ sha256: string }>`DELETE FROM blobs
          WHERE (layer_pk, data_handle, owner_version) IN (
            SELECT layer_pk, data_handle, vfrom FROM partitions
            WHERE layer_pk IN (${layers}) AND vto IS NOT NULL AND vto <= ${minimum} AND data_handle <> '')
          AND NOT EXISTS (
            SELECT 1 FROM partitions s WHERE s.layer_pk = blobs.layer_pk AND s.data_handle = blobs.data_handle
            AND s.vfrom = blobs.owner_version AND (s.vto IS NULL OR s.vto > ${minimum}))
          RETURNING sha256`
        yield* sql`DELETE FROM partitions WHERE layer_pk IN (${layers}) AND vto IS NOT NULL AND vto <= ${minimum}`
        yield* sql`DELETE FROM versions WHERE catalog_hrn = ${catalogHrn} AND version < ${minimum}`
        yield* sql`DELETE FROM version_partition_counts WHERE catalog_hrn = ${catalogHrn} AND version < ${minimum}`
        const orphaned: Array<string> = []
        for (const sha256 of new Set(removed.map((r) => r.sha256))) {
          const used = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM blobs WHERE sha256 = ${sha256}`
          if (used[0]!.n === 0) orphaned.push(sha256)
        }
        return orphaned
      }),

    // --- blobs -------------------------------------------------------------------------------
    blob: (layerPk: number, dataHandle: string) =>
      sql<BlobRow>`SELECT sha256, size, content_encoding FROM blobs WHERE layer_pk = ${layerPk} AND data_handle = ${dataHandle}`.pipe(Effect.map(first)),
    putBlob: (layerPk: number, dataHandle: string, sha256: string, size: number, contentEncoding: string | null) =>
      sql`INSERT INTO blobs (layer_pk, data_handle, sha256, size, content_encoding, owner_version)
        VALUES (${layerPk}, ${dataHandle}, ${sha256}, ${size}, ${contentEncoding}, NULL)
        ON CONFLICT (layer_pk, data_handle) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, content_encoding = excluded.content_encoding`.pipe(
        Effect.asVoid
      ),
    putBlobs: (layerPk: number, blobs: ReadonlyArray<{ handle: string; sha256: string; size: number }>, contentEncoding: string | null) =>
      blobs.length === 0
        ? Effect.void
        : sql`INSERT OR REPLACE INTO blobs ${
          sql.insert(blobs.map((b) => ({
            layer_pk: layerPk,
            data_handle: b.handle,
            sha256: b.sha256,
            size: b.size,
            content_encoding: contentEncoding,
            owner_version: null
          })) as any)
        }`.pipe(Effect.asVoid),
    deleteBlob: (layerPk: number, dataHandle: string) =>
      sql`DELETE FROM blobs WHERE layer_pk = ${layerPk} AND data_handle = ${dataHandle}`.pipe(Effect.asVoid),
    contentInUse: (sha256: string) =>
      sql<{ n: number }>`SELECT COUNT(*) AS n FROM blobs WHERE sha256 = ${sha256}`.pipe(Effect.map((rows) => rows[0]!.n > 0)),

    // --- publications ------------------------------------------------------------------------
    insertPublication: (row: PublicationRow) => sql`INSERT INTO publications ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    publication: (id: string) => sql<PublicationRow>`SELECT * FROM publications WHERE id = ${id}`.pipe(Effect.map(first)),
    activePublications: (catalogHrn: string, kind: string) =>
      sql<PublicationRow>`SELECT * FROM publications WHERE catalog_hrn = ${catalogHrn} AND kind = ${kind} AND state IN ('initialized', 'submitted')`,
    setPublicationState: (id: string, state: string, message: string, modified: number, catalogVersion?: number) =>
      catalogVersion === undefined
        ? sql`UPDATE publications SET state = ${state}, message = ${message}, modified = ${modified} WHERE id = ${id}`.pipe(Effect.asVoid)
        : sql`UPDATE publications SET state = ${state}, message = ${message}, modified = ${modified}, catalog_version = ${catalogVersion} WHERE id = ${id}`.pipe(
          Effect.asVoid
        ),
    stagePartitions: (publicationId: string, staged: ReadonlyArray<StagedPartition>) =>
      staged.length === 0
        ? Effect.void
        : sql`INSERT OR REPLACE INTO publication_partitions ${
          sql.insert(staged.map((p) => ({
            publication_id: publicationId,
            layer_pk: p.layerPk,
            partition: p.partition,
            data_handle: p.dataHandle,
            checksum: p.checksum,
            data_size: p.dataSize,
            compressed_data_size: p.compressedDataSize,
            crc: p.crc
          })) as any)
        }`.pipe(Effect.asVoid),
    deleteStaged: (publicationId: string) => sql`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}`.pipe(Effect.asVoid)
  }
})

export type StoreShape = Effect.Effect.Success<typeof make>

export class Store extends Context.Tag("catalog-export/server/Store")<Store, StoreShape>() {
  static readonly layer: Layer.Layer<Store, SqlError, SqlClient.SqlClient> = Layer.effect(Store, make)
}
