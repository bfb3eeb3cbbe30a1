import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, run } from "./Database.ts"

export const VersionRow = Schema.Struct({
  version: Schema.Number,
  timestamp: Schema.Number,
  dependencies: Schema.String,
  /** JSON object layer id -> partitions; `{}` for versions committed before counts were kept. */
  partition_counts: Schema.String
})
export type VersionRow = typeof VersionRow.Type

const LayerVersion = Schema.Struct({ layer: Schema.String, version: Schema.Number, timestamp: Schema.Number })

/**
 * Catalog versions and the partition rows they see (validity intervals, see Migrations.ts). The
 * listings themselves are read by Reads.ts; commits are in PublicationsRepo.
 */
export class VersionsRepo extends Context.Tag("catalog-export/server/VersionsRepo")<VersionsRepo, {
  readonly insertVersion: (hrn: string, version: number, timestamp: number, dependencies: string) => Effect.Effect<void>
  /** Versions in `(fromExclusive, toInclusive]`, in order. */
  readonly versions: (
    hrn: string,
    fromExclusive: number,
    toInclusive: number
  ) => Effect.Effect<ReadonlyArray<VersionRow>>
  readonly versionsIn: (hrn: string, list: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<VersionRow>>
  /** Per layer of the catalog, the last version at or below `version` in which it changed. */
  readonly layerVersionsAt: (hrn: string, version: number) => Effect.Effect<ReadonlyArray<typeof LayerVersion.Type>>
  /** The id at a fixed rank of the layer's current partition ids; used to cut a listing into parts. */
  readonly partitionIdAtRank: (layerPk: number, rank: number) => Effect.Effect<string | undefined>
  readonly countCurrentPartitions: (layerPk: number) => Effect.Effect<number>
  /**
   * Removes, in the versioned layers of a catalog, the partition rows no version at or above
   * `minimum` can see, and the blobs those rows owned unless a surviving row of the same version
   * shares the handle. Returns the content digests no blob refers to any more.
   */
  readonly purgeBelowMinimum: (catalogHrn: string, minimum: number) => Effect.Effect<ReadonlyArray<string>>
  /**
   * Makes the partitions `ids` of replica `to` what they are in replica `from` (volatile
   * replication); returns the data handles they now refer to.
   */
  readonly copyPartitions: (
    from: number,
    to: number,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>>
}>() {
  static readonly layer = Layer.effect(
    VersionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const partitionCounts = sql.unsafe(`(SELECT json_group_object(c.layer_id, c.count) FROM version_partition_counts c
        WHERE c.catalog_hrn = v.catalog_hrn AND c.version = v.version) AS partition_counts`)

      const versions = findAll({
        Request: Schema.Struct({ hrn: Schema.String, fromExclusive: Schema.Number, toInclusive: Schema.Number }),
        Result: VersionRow,
        execute: ({ fromExclusive, hrn, toInclusive }) =>
          sql`SELECT version, timestamp, dependencies, ${partitionCounts} FROM versions v
            WHERE catalog_hrn = ${hrn} AND version > ${fromExclusive} AND version <= ${toInclusive} ORDER BY version`
      })
      const versionsIn = findAll({
        Request: Schema.Struct({ hrn: Schema.String, list: Schema.Array(Schema.Number) }),
        Result: VersionRow,
        execute: ({ hrn, list }) =>
          sql`SELECT version, timestamp, dependencies, ${partitionCounts} FROM versions v
            WHERE catalog_hrn = ${hrn} AND ${sql.in("version", list)} ORDER BY version`
      })
      const layerVersionsAt = findAll({
        Request: Schema.Struct({ hrn: Schema.String, version: Schema.Number }),
        Result: LayerVersion,
        execute: ({ hrn, version }) =>
          sql`SELECT l.id AS layer, lv.version AS version, lv.timestamp AS timestamp
            FROM layers l JOIN layer_versions lv ON lv.layer_pk = l.pk
            WHERE l.catalog_hrn = ${hrn} AND lv.version = (SELECT MAX(version) FROM layer_versions WHERE layer_pk = l.pk AND version <= ${version})
            ORDER BY l.id`
      })

      const purgeBelowMinimum = (catalogHrn: string, minimum: number) =>
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
        }).pipe(Effect.orDie)

      const copyPartitions = (from: number, to: number, ids: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const list = JSON.stringify(ids)
          yield* sql`DELETE FROM partitions WHERE layer_pk = ${to} AND partition IN (SELECT value FROM json_each(${list}))`
          const rows = yield* sql<{ data_handle: string }>`INSERT INTO partitions
            (layer_pk, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified)
            SELECT ${to}, partition, vfrom, vto, data_handle, checksum, data_size, compressed_data_size, crc, modified
            FROM partitions WHERE layer_pk = ${from} AND partition IN (SELECT value FROM json_each(${list}))
            RETURNING data_handle`
          return rows.map((r) => r.data_handle).filter((h) => h !== "")
        }).pipe(Effect.orDie)

      return VersionsRepo.of({
        insertVersion: (hrn, version, timestamp, dependencies) =>
          run(
            sql`INSERT INTO versions (catalog_hrn, version, timestamp, dependencies) VALUES (${hrn}, ${version}, ${timestamp}, ${dependencies})`
          ),
        versions: (hrn, fromExclusive, toInclusive) => versions({ hrn, fromExclusive, toInclusive }),
        versionsIn: (hrn, list) => versionsIn({ hrn, list }),
        layerVersionsAt: (hrn, version) => layerVersionsAt({ hrn, version }),
        partitionIdAtRank: (layerPk, rank) =>
          sql<{ partition: string }>`SELECT partition FROM partitions WHERE layer_pk = ${layerPk} AND vto IS NULL
            ORDER BY partition LIMIT 1 OFFSET ${rank}`.pipe(Effect.map((rows) => rows[0]?.partition), Effect.orDie),
        countCurrentPartitions: (layerPk) =>
          sql<{ n: number }>`SELECT COUNT(*) AS n FROM partitions WHERE layer_pk = ${layerPk} AND vto IS NULL`.pipe(
            Effect.map((rows) => rows[0]!.n),
            Effect.orDie
          ),
        purgeBelowMinimum,
        copyPartitions
      })
    })
  )
}
