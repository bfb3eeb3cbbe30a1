import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, run } from "./Database.ts"

export const FeatureRow = Schema.Struct({
  id: Schema.String,
  /** The GeoJSON feature as JSON. */
  feature: Schema.String,
  version: Schema.Number
})
export type FeatureRow = typeof FeatureRow.Type

/** Interactive map layers: features and the transactions (versions) that wrote them. */
export class FeaturesRepo extends Context.Tag("catalog-export/server/FeaturesRepo")<FeaturesRepo, {
  readonly features: (layerPk: number) => Effect.Effect<ReadonlyArray<FeatureRow>>
  readonly featuresByIds: (layerPk: number, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<FeatureRow>>
  readonly latestVersion: (layerPk: number) => Effect.Effect<number>
  readonly insertTransaction: (layerPk: number, version: number, author: string, created: number) => Effect.Effect<void>
  readonly put: (layerPk: number, id: string, feature: string, version: number) => Effect.Effect<void>
  readonly remove: (layerPk: number, id: string) => Effect.Effect<void>
}>() {
  static readonly layer = Layer.effect(
    FeaturesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const features = findAll({
        Request: Schema.Number,
        Result: FeatureRow,
        execute: (layerPk) => sql`SELECT id, feature, version FROM features WHERE layer_pk = ${layerPk} ORDER BY id`
      })
      const featuresByIds = findAll({
        Request: Schema.Struct({ layerPk: Schema.Number, ids: Schema.Array(Schema.String) }),
        Result: FeatureRow,
        execute: ({ ids, layerPk }) =>
          sql`SELECT id, feature, version FROM features WHERE layer_pk = ${layerPk} AND ${sql.in("id", ids)}`
      })
      return FeaturesRepo.of({
        features,
        featuresByIds: (layerPk, ids) => ids.length === 0 ? Effect.succeed([]) : featuresByIds({ layerPk, ids }),
        latestVersion: (layerPk) =>
          sql<{ v: number | null }>`SELECT MAX(version) AS v FROM feature_transactions WHERE layer_pk = ${layerPk}`
            .pipe(
              Effect.map((rows) => rows[0]?.v ?? 0),
              Effect.orDie
            ),
        insertTransaction: (layerPk, version, author, created) =>
          run(
            sql`INSERT INTO feature_transactions (layer_pk, version, author, created) VALUES (${layerPk}, ${version}, ${author}, ${created})`
          ),
        put: (layerPk, id, feature, version) =>
          run(
            sql`INSERT INTO features (layer_pk, id, feature, version) VALUES (${layerPk}, ${id}, ${feature}, ${version})
            ON CONFLICT (layer_pk, id) DO UPDATE SET feature = excluded.feature, version = excluded.version`
          ),
        remove: (layerPk, id) => run(sql`DELETE FROM features WHERE layer_pk = ${layerPk} AND id = ${id}`)
      })
    })
  )
}
