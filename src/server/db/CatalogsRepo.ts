import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, findOne, run, single } from "./Database.ts"

export const CatalogRow = Schema.Struct({
  hrn: Schema.String,
  id: Schema.String,
  owner_app: Schema.String,
  /** The catalog's configuration as JSON. */
  config: Schema.String,
  created: Schema.String,
  latest_version: Schema.Number,
  min_version: Schema.Number
})
export type CatalogRow = typeof CatalogRow.Type

export const NewCatalog = CatalogRow.omit("latest_version", "min_version")

export const LayerRow = Schema.Struct({
  pk: Schema.Number,
  catalog_hrn: Schema.String,
  id: Schema.String,
  layer_type: Schema.String,
  config: Schema.String,
  created: Schema.String
})
export type LayerRow = typeof LayerRow.Type

export const NewLayer = LayerRow.omit("pk")

const Grant = Schema.Struct({ can_read: Schema.Number, can_write: Schema.Number })
const CatalogAndApp = Schema.Struct({ catalogHrn: Schema.String, appId: Schema.String })
const CatalogAndLayer = Schema.Struct({ catalogHrn: Schema.String, layerId: Schema.String })

/**
 * Catalogs, their layers and grants, and their deletion: a deleted catalog or layer takes every row
 * stored for it along (in the caller's transaction) and leaves what the interface still reports.
 */
export class CatalogsRepo extends Context.Tag("catalog-export/server/CatalogsRepo")<CatalogsRepo, {
  /** Inserts a catalog; false when one with its HRN exists already. */
  readonly insertCatalog: (row: typeof NewCatalog.Type) => Effect.Effect<boolean>
  readonly updateCatalogConfig: (hrn: string, config: string) => Effect.Effect<void>
  readonly catalog: (hrn: string) => Effect.Effect<CatalogRow | undefined>
  readonly catalogById: (id: string) => Effect.Effect<CatalogRow | undefined>
  /** Catalogs the application created or was granted read on. */
  readonly readableCatalogs: (appId: string) => Effect.Effect<ReadonlyArray<CatalogRow>>
  readonly grantOf: (catalogHrn: string, appId: string) => Effect.Effect<typeof Grant.Type | undefined>
  /** Sets the catalog's latest and minimum versions. */
  readonly setVersions: (hrn: string, latest: number, minimum: number) => Effect.Effect<void>
  /** Inserts a layer; returns its key. */
  readonly insertLayer: (row: typeof NewLayer.Type) => Effect.Effect<number>
  readonly updateLayerConfig: (pk: number, config: string) => Effect.Effect<void>
  readonly layers: (catalogHrn: string) => Effect.Effect<ReadonlyArray<LayerRow>>
  readonly layer: (catalogHrn: string, layerId: string) => Effect.Effect<LayerRow | undefined>
  /** Deletes a layer's data, metadata and configuration; returns the blob contents it referenced. */
  readonly deleteLayer: (
    catalogHrn: string,
    layerPk: number,
    layerId: string,
    now: number
  ) => Effect.Effect<ReadonlyArray<string>>
  /** Deletes a catalog with all its layers, versions, grants and publications; returns the blob contents they referenced. */
  readonly deleteCatalog: (catalogHrn: string, now: number) => Effect.Effect<ReadonlyArray<string>>
  /** When the layer id was last deleted in the catalog (for the 60-second delete/create warning). */
  readonly layerDeletedAt: (catalogHrn: string, layerId: string) => Effect.Effect<number | undefined>
}>() {
  static readonly layer = Layer.effect(
    CatalogsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      /**
       * Removes everything stored for one layer except the `layers` row, in both replicas (the
       * secondary region's replica of a multi-region catalog's layer is stored under `-layerPk`,
       * see Regions.ts); returns the blob contents it referenced.
       */
      const purgeLayerData = (layerPk: number) =>
        Effect.gen(function*() {
          const keys = [layerPk, -layerPk]
          const blobs = yield* sql<{ sha256: string }>`DELETE FROM blobs WHERE ${
            sql.in("layer_pk", keys)
          } RETURNING sha256`
          for (
            const table of [
              "partitions",
              "layer_versions",
              "publication_partitions",
              "features",
              "feature_transactions",
              "stream_messages",
              "stream_consumers",
              "stream_offsets"
            ]
          ) {
            yield* sql`DELETE FROM ${sql(table)} WHERE ${sql.in("layer_pk", keys)}`
          }
          return blobs.map((b) => b.sha256)
        })

      const disableSubscriptionsOf = (catalogHrn: string, layerId: string | null, now: string) =>
        layerId === null
          ? sql`UPDATE subscriptions SET state = 'disabled', message = 'The source or destination catalog was deleted.', updated = ${now}
              WHERE state = 'active' AND (source_catalog = ${catalogHrn} OR destination_catalog = ${catalogHrn})`
          : sql`UPDATE subscriptions SET state = 'disabled', message = 'The source or destination layer was deleted.', updated = ${now}
              WHERE state = 'active' AND ((source_catalog = ${catalogHrn} AND source_layer = ${layerId})
                OR (destination_catalog = ${catalogHrn} AND destination_layer = ${layerId}))`

      const deleteLayer = (catalogHrn: string, layerPk: number, layerId: string, now: number) =>
        Effect.gen(function*() {
          const contents = yield* purgeLayerData(layerPk)
          yield* sql`DELETE FROM layers WHERE pk = ${layerPk}`
          yield* sql`INSERT INTO layer_deletions (catalog_hrn, layer_id, deleted_at) VALUES (${catalogHrn}, ${layerId}, ${now})
            ON CONFLICT (catalog_hrn, layer_id) DO UPDATE SET deleted_at = excluded.deleted_at`
          // A publication that names the layer can no longer be completed.
          yield* sql`UPDATE publications SET state = 'cancelled', message = ${`Layer '${layerId}' was deleted`}, modified = ${now}
            WHERE catalog_hrn = ${catalogHrn} AND state IN ('initialized', 'submitted')
            AND EXISTS (SELECT 1 FROM json_each(publications.layer_ids) WHERE value = ${layerId})`
          yield* disableSubscriptionsOf(catalogHrn, layerId, new Date(now).toISOString())
          return contents
        })

      const deleteCatalog = (catalogHrn: string, now: number) =>
        Effect.gen(function*() {
          const layers = yield* sql<
            { pk: number; id: string }
          >`SELECT pk, id FROM layers WHERE catalog_hrn = ${catalogHrn}`
          const contents: Array<string> = []
          for (const layer of layers) contents.push(...(yield* deleteLayer(catalogHrn, layer.pk, layer.id, now)))
          yield* sql`DELETE FROM publication_partitions WHERE publication_id IN (SELECT id FROM publications WHERE catalog_hrn = ${catalogHrn})`
          yield* sql`DELETE FROM publications WHERE catalog_hrn = ${catalogHrn}`
          yield* sql`DELETE FROM versions WHERE catalog_hrn = ${catalogHrn}`
          yield* sql`DELETE FROM version_partition_counts WHERE catalog_hrn = ${catalogHrn}`
          yield* sql`DELETE FROM grants WHERE catalog_hrn = ${catalogHrn}`
          yield* sql`DELETE FROM catalogs WHERE hrn = ${catalogHrn}`
          yield* disableSubscriptionsOf(catalogHrn, null, new Date(now).toISOString())
          return contents
        })

      const layerDeletedAt = findOne({
        Request: CatalogAndLayer,
        Result: Schema.Struct({ deleted_at: Schema.Number }),
        execute: ({ catalogHrn, layerId }) =>
          sql`SELECT deleted_at FROM layer_deletions WHERE catalog_hrn = ${catalogHrn} AND layer_id = ${layerId}`
      })
      const insertCatalog = findAll({
        Request: NewCatalog,
        Result: Schema.Struct({ hrn: Schema.String }),
        execute: (row) => sql`INSERT INTO catalogs ${sql.insert(row)} ON CONFLICT (hrn) DO NOTHING RETURNING hrn`
      })
      const grantOf = findOne({
        Request: CatalogAndApp,
        Result: Grant,
        execute: ({ appId, catalogHrn }) =>
          sql`SELECT can_read, can_write FROM grants WHERE catalog_hrn = ${catalogHrn} AND app_id = ${appId}`
      })
      const insertLayer = single({
        Request: NewLayer,
        Result: Schema.Struct({ pk: Schema.Number }),
        execute: (row) => sql`INSERT INTO layers ${sql.insert(row)} RETURNING pk`
      })
      const layer = findOne({
        Request: CatalogAndLayer,
        Result: LayerRow,
        execute: ({ catalogHrn, layerId }) =>
          sql`SELECT * FROM layers WHERE catalog_hrn = ${catalogHrn} AND id = ${layerId}`
      })

      return CatalogsRepo.of({
        insertCatalog: (row) => Effect.map(insertCatalog(row), (inserted) => inserted.length > 0),
        updateCatalogConfig: (hrn, config) => run(sql`UPDATE catalogs SET config = ${config} WHERE hrn = ${hrn}`),
        catalog: findOne({
          Request: Schema.String,
          Result: CatalogRow,
          execute: (hrn) => sql`SELECT * FROM catalogs WHERE hrn = ${hrn}`
        }),
        catalogById: findOne({
          Request: Schema.String,
          Result: CatalogRow,
          execute: (id) => sql`SELECT * FROM catalogs WHERE id = ${id} ORDER BY hrn LIMIT 1`
        }),
        readableCatalogs: findAll({
          Request: Schema.String,
          Result: CatalogRow,
          execute: (appId) =>
            sql`SELECT c.* FROM catalogs c WHERE c.owner_app = ${appId}
              OR EXISTS (SELECT 1 FROM grants g WHERE g.catalog_hrn = c.hrn AND g.app_id = ${appId} AND g.can_read = 1)
              ORDER BY c.hrn`
        }),
        grantOf: (catalogHrn, appId) => grantOf({ catalogHrn, appId }),
        setVersions: (hrn, latest, minimum) =>
          run(sql`UPDATE catalogs SET latest_version = ${latest}, min_version = ${minimum} WHERE hrn = ${hrn}`),
        insertLayer: (row) => Effect.map(insertLayer(row), (inserted) => inserted.pk),
        updateLayerConfig: (pk, config) => run(sql`UPDATE layers SET config = ${config} WHERE pk = ${pk}`),
        layers: findAll({
          Request: Schema.String,
          Result: LayerRow,
          execute: (hrn) => sql`SELECT * FROM layers WHERE catalog_hrn = ${hrn} ORDER BY pk`
        }),
        layer: (catalogHrn, layerId) => layer({ catalogHrn, layerId }),
        deleteLayer: (catalogHrn, layerPk, layerId, now) =>
          Effect.orDie(deleteLayer(catalogHrn, layerPk, layerId, now)),
        deleteCatalog: (catalogHrn, now) => Effect.orDie(deleteCatalog(catalogHrn, now)),
        layerDeletedAt: (catalogHrn, layerId) =>
          Effect.map(layerDeletedAt({ catalogHrn, layerId }), (row) => row?.deleted_at)
      })
    })
  )
}
