import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, findOne, run, write } from "./Database.ts"

export const SubscriptionRow = Schema.Struct({
  hrn: Schema.String,
  owner_app: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  source_catalog: Schema.String,
  source_layer: Schema.String,
  destination_catalog: Schema.String,
  destination_layer: Schema.String,
  type: Schema.String,
  state: Schema.Literal("active", "deleted", "disabled"),
  message: Schema.NullOr(Schema.String),
  create_token: Schema.String,
  delete_token: Schema.NullOr(Schema.String),
  created: Schema.String,
  updated: Schema.String,
  /** The row's insertion order (SQLite rowid), the listing's page cursor. */
  seq: Schema.Number
})
export type SubscriptionRow = typeof SubscriptionRow.Type

const NewSubscription = SubscriptionRow.omit("seq")

const IdempotencyRow = Schema.Struct({ request: Schema.String, subscription_hrn: Schema.String })
export type IdempotencyRow = typeof IdempotencyRow.Type

const IdempotencyKey = Schema.Struct({ appId: Schema.String, operation: Schema.String, key: Schema.String })

/** Notification subscriptions and the answers remembered per idempotency key. */
export class SubscriptionsRepo extends Context.Tag("catalog-export/server/SubscriptionsRepo")<SubscriptionsRepo, {
  readonly insert: (row: typeof NewSubscription.Type) => Effect.Effect<void>
  readonly byHrn: (hrn: string) => Effect.Effect<SubscriptionRow | undefined>
  /** The subscription a create or delete status token belongs to. */
  readonly byToken: (token: string) => Effect.Effect<SubscriptionRow | undefined>
  /** The application's subscriptions that are not deleted, oldest first, after `afterSeq`. */
  readonly ownedBy: (appId: string, afterSeq: number, limit: number) => Effect.Effect<ReadonlyArray<SubscriptionRow>>
  readonly activeDuplicate: (
    owner: string,
    source: string,
    sourceLayer: string,
    destination: string,
    destinationLayer: string,
    type: string
  ) => Effect.Effect<SubscriptionRow | undefined>
  readonly activeOn: (catalogHrn: string, layerId: string) => Effect.Effect<ReadonlyArray<SubscriptionRow>>
  readonly markDeleted: (hrn: string, deleteToken: string, now: string) => Effect.Effect<void>
  readonly disable: (hrn: string, message: string, now: string) => Effect.Effect<void>
  readonly idempotencyKey: (appId: string, operation: string, key: string) => Effect.Effect<IdempotencyRow | undefined>
  readonly rememberIdempotencyKey: (
    appId: string,
    operation: string,
    key: string,
    request: string,
    subscriptionHrn: string
  ) => Effect.Effect<void>
}>() {
  static readonly layer = Layer.effect(
    SubscriptionsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ownedBy = findAll({
        Request: Schema.Struct({ appId: Schema.String, afterSeq: Schema.Number, limit: Schema.Number }),
        Result: SubscriptionRow,
        execute: ({ afterSeq, appId, limit }) =>
          sql`SELECT rowid AS seq, * FROM subscriptions WHERE owner_app = ${appId} AND state <> 'deleted' AND rowid > ${afterSeq}
            ORDER BY rowid LIMIT ${limit}`
      })
      const activeDuplicate = findOne({
        Request: SubscriptionRow.pick(
          "owner_app",
          "source_catalog",
          "source_layer",
          "destination_catalog",
          "destination_layer",
          "type"
        ),
        Result: SubscriptionRow,
        execute: (s) =>
          sql`SELECT rowid AS seq, * FROM subscriptions WHERE state = 'active' AND owner_app = ${s.owner_app}
            AND source_catalog = ${s.source_catalog} AND source_layer = ${s.source_layer}
            AND destination_catalog = ${s.destination_catalog} AND destination_layer = ${s.destination_layer} AND type = ${s.type}`
      })
      const activeOn = findAll({
        Request: Schema.Struct({ catalogHrn: Schema.String, layerId: Schema.String }),
        Result: SubscriptionRow,
        execute: ({ catalogHrn, layerId }) =>
          sql`SELECT rowid AS seq, * FROM subscriptions WHERE state = 'active' AND source_catalog = ${catalogHrn} AND source_layer = ${layerId} ORDER BY rowid`
      })
      const idempotencyKey = findOne({
        Request: IdempotencyKey,
        Result: IdempotencyRow,
        execute: ({ appId, key, operation }) =>
          sql`SELECT request, subscription_hrn FROM idempotency_keys WHERE app_id = ${appId} AND operation = ${operation} AND key = ${key}`
      })
      return SubscriptionsRepo.of({
        insert: write({
          Request: NewSubscription,
          execute: (row) => sql`INSERT INTO subscriptions ${sql.insert(row)}`
        }),
        byHrn: findOne({
          Request: Schema.String,
          Result: SubscriptionRow,
          execute: (hrn) => sql`SELECT rowid AS seq, * FROM subscriptions WHERE hrn = ${hrn}`
        }),
        byToken: findOne({
          Request: Schema.String,
          Result: SubscriptionRow,
          execute: (token) =>
            sql`SELECT rowid AS seq, * FROM subscriptions WHERE create_token = ${token} OR delete_token = ${token}`
        }),
        ownedBy: (appId, afterSeq, limit) => ownedBy({ appId, afterSeq, limit }),
        activeDuplicate: (owner_app, source_catalog, source_layer, destination_catalog, destination_layer, type) =>
          activeDuplicate({ owner_app, source_catalog, source_layer, destination_catalog, destination_layer, type }),
        activeOn: (catalogHrn, layerId) => activeOn({ catalogHrn, layerId }),
        markDeleted: (hrn, deleteToken, now) =>
          run(
            sql`UPDATE subscriptions SET state = 'deleted', delete_token = ${deleteToken}, updated = ${now} WHERE hrn = ${hrn}`
          ),
        disable: (hrn, message, now) =>
          run(
            sql`UPDATE subscriptions SET state = 'disabled', message = ${message}, updated = ${now} WHERE hrn = ${hrn}`
          ),
        idempotencyKey: (appId, operation, key) => idempotencyKey({ appId, operation, key }),
        rememberIdempotencyKey: (appId, operation, key, request, subscriptionHrn) =>
          run(sql`INSERT INTO idempotency_keys (app_id, operation, key, request, subscription_hrn, created)
            VALUES (${appId}, ${operation}, ${key}, ${request}, ${subscriptionHrn}, ${Date.now()})`)
      })
    })
  )
}
