import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, findOne, run, write } from "./Database.ts"

export const PublicationRow = Schema.Struct({
  id: Schema.String,
  catalog_hrn: Schema.String,
  app_id: Schema.String,
  /** JSON array of layer ids. */
  layer_ids: Schema.String,
  kind: Schema.String,
  state: Schema.String,
  message: Schema.String,
  catalog_version: Schema.Number,
  dependencies: Schema.String,
  started: Schema.Number,
  modified: Schema.Number,
  expires: Schema.Number
})
export type PublicationRow = typeof PublicationRow.Type

export interface StagedPartition {
  readonly layerPk: number
  readonly partition: string
  readonly dataHandle: string
  readonly checksum: string | null
  readonly dataSize: number | null
  readonly compressedDataSize: number | null
  readonly crc: string | null
}

/** Publications, the partitions staged in them, and their commit into the layers' partitions. */
export class PublicationsRepo extends Context.Tag("catalog-export/server/PublicationsRepo")<PublicationsRepo, {
  readonly insert: (row: PublicationRow) => Effect.Effect<void>
  readonly byId: (id: string) => Effect.Effect<PublicationRow | undefined>
  /** The catalog's publications of a kind still open (initialized or submitted). */
  readonly active: (catalogHrn: string, kind: string) => Effect.Effect<ReadonlyArray<PublicationRow>>
  readonly setState: (
    id: string,
    state: string,
    message: string,
    modified: number,
    catalogVersion?: number
  ) => Effect.Effect<void>
  readonly stagePartitions: (publicationId: string, staged: ReadonlyArray<StagedPartition>) => Effect.Effect<void>
  readonly deleteStaged: (publicationId: string) => Effect.Effect<void>
  /**
   * Commits a versioned publication as catalog version `version`: ends the current row of every
   * staged partition and starts a new one (a deletion only where there was data to delete).
   */
  readonly commitVersioned: (publicationId: string, version: number, now: number) => Effect.Effect<void>
  /** Volatile layers keep one row per partition, overwritten in place; returns what was written. */
  readonly commitVolatile: (
    publicationId: string,
    now: number
  ) => Effect.Effect<ReadonlyArray<{ readonly layer_pk: number; readonly partition: string }>>
}>() {
  static readonly layer = Layer.effect(
    PublicationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const active = findAll({
        Request: Schema.Struct({ catalogHrn: Schema.String, kind: Schema.String }),
        Result: PublicationRow,
        execute: ({ catalogHrn, kind }) =>
          sql`SELECT * FROM publications WHERE catalog_hrn = ${catalogHrn} AND kind = ${kind} AND state IN ('initialized', 'submitted')`
      })
      return PublicationsRepo.of({
        insert: write({ Request: PublicationRow, execute: (row) => sql`INSERT INTO publications ${sql.insert(row)}` }),
        byId: findOne({
          Request: Schema.String,
          Result: PublicationRow,
          execute: (id) => sql`SELECT * FROM publications WHERE id = ${id}`
        }),
        active: (catalogHrn, kind) => active({ catalogHrn, kind }),
        setState: (id, state, message, modified, catalogVersion) =>
          run(
            catalogVersion === undefined
              ? sql`UPDATE publications SET state = ${state}, message = ${message}, modified = ${modified} WHERE id = ${id}`
              : sql`UPDATE publications SET state = ${state}, message = ${message}, modified = ${modified}, catalog_version = ${catalogVersion} WHERE id = ${id}`
          ),
        stagePartitions: (publicationId, staged) =>
          staged.length === 0 ?
            Effect.void :
            run(sql`INSERT OR REPLACE INTO publication_partitions ${
              sql.insert(staged.map((p) => ({
                publication_id: publicationId,
                layer_pk: p.layerPk,
                partition: p.partition,
                data_handle: p.dataHandle,
                checksum: p.checksum,
                data_size: p.dataSize,
                compressed_data_size: p.compressedDataSize,
                crc: p.crc
              })))
            }`),
        deleteStaged: (publicationId) =>
          run(sql`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}`),
        commitVersioned: (publicationId, version, now) =>
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
                  (SELECT c.count FROM version_partition_counts c WHERE c.catalog_hrn = l.catalog_hrn AND c.version = ${
              version - 1
            } AND c.layer_id = l.id) END,
                (SELECT COUNT(*) FROM partitions p WHERE p.layer_pk = l.pk AND p.vto IS NULL AND p.data_handle <> ''))
              FROM layers l
              WHERE l.layer_type = 'versioned' AND l.catalog_hrn = (SELECT catalog_hrn FROM publications WHERE id = ${publicationId})`
            yield* sql`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}`
          }).pipe(Effect.orDie),
        commitVolatile: (publicationId, now) =>
          Effect.gen(function*() {
            yield* sql`INSERT INTO partitions (layer_pk, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified)
              SELECT layer_pk, partition, 0, NULL, data_handle, checksum, data_size, compressed_data_size, crc, ${now}
              FROM publication_partitions WHERE publication_id = ${publicationId} AND true
              ON CONFLICT (layer_pk, partition, vfrom) DO UPDATE SET data_handle = excluded.data_handle, checksum = excluded.checksum,
                data_size = excluded.data_size, compressed_data_size = excluded.compressed_data_size, crc = excluded.crc, modified = excluded.modified`
            return yield* sql<
              { layer_pk: number; partition: string }
            >`DELETE FROM publication_partitions WHERE publication_id = ${publicationId}
              RETURNING layer_pk, partition`
          }).pipe(Effect.orDie)
      })
    })
  )
}
