import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"

/**
 * SQLite access for catalog administration, notification subscriptions, interactive map features
 * and stream layer messages. Kept apart from Store.ts (the export's data path); same database.
 */
export const statements: ReadonlyArray<string> = [
  /** When a layer id was last deleted in a catalog, for the 60-second delete/create warning. */
  `CREATE TABLE IF NOT EXISTS layer_deletions (
    catalog_hrn TEXT NOT NULL,
    layer_id TEXT NOT NULL,
    deleted_at INTEGER NOT NULL,
    PRIMARY KEY (catalog_hrn, layer_id)
  )`,
  /** Status polls seen per asynchronous operation (an operation answers "pending" at least once). */
  `CREATE TABLE IF NOT EXISTS operation_polls (
    token TEXT PRIMARY KEY,
    polls INTEGER NOT NULL
  )`,
  `CREATE TABLE IF NOT EXISTS subscriptions (
    hrn TEXT PRIMARY KEY,
    owner_app TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    source_catalog TEXT NOT NULL,
    source_layer TEXT NOT NULL,
    destination_catalog TEXT NOT NULL,
    destination_layer TEXT NOT NULL,
    type TEXT NOT NULL,
    state TEXT NOT NULL,
    message TEXT,
    create_token TEXT NOT NULL,
    delete_token TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS subscriptions_by_source ON subscriptions (source_catalog, source_layer)`,
  `CREATE INDEX IF NOT EXISTS subscriptions_by_owner ON subscriptions (owner_app)`,
  /** Answers remembered per `x-idempotency-key`, per application and operation. */
  `CREATE TABLE IF NOT EXISTS idempotency_keys (
    app_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    subscription_hrn TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (app_id, operation, key)
  )`,
  `CREATE TABLE IF NOT EXISTS features (
    layer_pk INTEGER NOT NULL,
    id TEXT NOT NULL,
    feature TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, id)
  ) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS feature_transactions (
    layer_pk INTEGER NOT NULL,
    version INTEGER NOT NULL,
    author TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, version)
  )`,
  /** Stream layer messages; the local service keeps one stream partition (0) per layer, so offsets order all messages. */
  `CREATE TABLE IF NOT EXISTS stream_messages (
    layer_pk INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    partition TEXT NOT NULL,
    data BLOB NOT NULL,
    checksum TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, offset)
  ) WITHOUT ROWID`,
  /** Stream API consumers (`POST .../subscribe`) and their read position. */
  `CREATE TABLE IF NOT EXISTS stream_consumers (
    id TEXT PRIMARY KEY,
    layer_pk INTEGER NOT NULL,
    app_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    position INTEGER NOT NULL,
    max_records INTEGER NOT NULL,
    created INTEGER NOT NULL
  )`,
  /** Committed offsets per consumer group (the next offset to read). */
  `CREATE TABLE IF NOT EXISTS stream_offsets (
    layer_pk INTEGER NOT NULL,
    app_id TEXT NOT NULL,
    group_id TEXT NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (layer_pk, app_id, group_id)
  )`
]

export interface SubscriptionRow {
  readonly hrn: string
  readonly owner_app: string
  readonly name: string
  readonly description: string | null
  readonly source_catalog: string
  readonly source_layer: string
  readonly destination_catalog: string
  readonly destination_layer: string
  readonly type: string
  readonly state: "active" | "deleted" | "disabled"
  readonly message: string | null
  readonly create_token: string
  readonly delete_token: string | null
  readonly created: string
  readonly updated: string
  readonly seq: number
}

export interface IdempotencyRow {
  readonly request: string
  readonly subscription_hrn: string
}

export interface FeatureRow {
  readonly id: string
  readonly feature: string
  readonly version: number
}

export interface StreamMessageRow {
  readonly offset: number
  readonly partition: string
  readonly data: Uint8Array
  readonly checksum: string
  readonly timestamp: number
}

export interface StreamConsumerRow {
  readonly id: string
  readonly layer_pk: number
  readonly app_id: string
  readonly group_id: string
  readonly mode: string
  readonly position: number
  readonly max_records: number
  readonly created: number
}

export interface NewStreamMessage {
  readonly partition: string
  readonly data: Uint8Array
  readonly checksum: string
  readonly timestamp: number
}

export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
  const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

  /**
   * Removes everything stored for one layer except the `layers` row, in both replicas (the secondary
   * region's replica of a multi-region catalog's layer is stored under `-layerPk`, see Regions.ts);
   * returns the blob contents it referenced.
   */
  const purgeLayerData = (layerPk: number) =>
    Effect.gen(function*() {
      const keys = [layerPk, -layerPk]
      const blobs = yield* sql<{ sha256: string }>`DELETE FROM blobs WHERE ${sql.in("layer_pk", keys)} RETURNING sha256`
      for (const table of ["partitions", "layer_versions", "publication_partitions", "features", "feature_transactions", "stream_messages", "stream_consumers", "stream_offsets"]) {
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

  return {
    withTransaction: sql.withTransaction,

    // --- deletion ------------------------------------------------------------------------------
    /** Deletes a layer's data, metadata and configuration (in the caller's transaction). */
    deleteLayer,
    /** Deletes a catalog with all its layers, versions, grants and publications (in the caller's transaction). */
    deleteCatalog: (catalogHrn: string, now: number) =>
      Effect.gen(function*() {
        const layers = yield* sql<{ pk: number; id: string }>`SELECT pk, id FROM layers WHERE catalog_hrn = ${catalogHrn}`
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
      }),
    /** Content digests (of those given) that no blob row refers to any more. */
    unusedContents: (digests: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const unused: Array<string> = []
        for (const sha256 of new Set(digests)) {
          const rows = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM blobs WHERE sha256 = ${sha256}`
          if (rows[0]!.n === 0) unused.push(sha256)
        }
        return unused
      }),
    layerDeletedAt: (catalogHrn: string, layerId: string) =>
      sql<{ deleted_at: number }>`SELECT deleted_at FROM layer_deletions WHERE catalog_hrn = ${catalogHrn} AND layer_id = ${layerId}`.pipe(
        Effect.map((rows) => rows[0]?.deleted_at)
      ),

    // --- status polls -----------------------------------------------------------------------
    /** Counts a status poll; returns the number of polls before this one. */
    countPoll: (token: string) =>
      sql<{ polls: number }>`INSERT INTO operation_polls (token, polls) VALUES (${token}, 1)
        ON CONFLICT (token) DO UPDATE SET polls = polls + 1 RETURNING polls`.pipe(Effect.map((rows) => rows[0]!.polls - 1)),

    // --- subscriptions ------------------------------------------------------------------------
    insertSubscription: (row: Omit<SubscriptionRow, "seq">) =>
      sql`INSERT INTO subscriptions ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    subscription: (hrn: string) => sql<SubscriptionRow>`SELECT rowid AS seq, * FROM subscriptions WHERE hrn = ${hrn}`.pipe(Effect.map(first)),
    subscriptionByToken: (token: string) =>
      sql<SubscriptionRow>`SELECT rowid AS seq, * FROM subscriptions WHERE create_token = ${token} OR delete_token = ${token}`.pipe(Effect.map(first)),
    /** The caller's subscriptions that are not deleted, oldest first, after `afterSeq`. */
    subscriptionsOf: (appId: string, afterSeq: number, limit: number) =>
      sql<SubscriptionRow>`SELECT rowid AS seq, * FROM subscriptions WHERE owner_app = ${appId} AND state <> 'deleted' AND rowid > ${afterSeq}
        ORDER BY rowid LIMIT ${limit}`,
    activeDuplicate: (owner: string, source: string, sourceLayer: string, destination: string, destinationLayer: string, type: string) =>
      sql<SubscriptionRow>`SELECT rowid AS seq, * FROM subscriptions WHERE state = 'active' AND owner_app = ${owner} AND source_catalog = ${source} AND source_layer = ${sourceLayer}
        AND destination_catalog = ${destination} AND destination_layer = ${destinationLayer} AND type = ${type}`.pipe(Effect.map(first)),
    activeSubscriptionsOn: (catalogHrn: string, layerId: string) =>
      sql<SubscriptionRow>`SELECT rowid AS seq, * FROM subscriptions WHERE state = 'active' AND source_catalog = ${catalogHrn} AND source_layer = ${layerId} ORDER BY rowid`,
    markSubscriptionDeleted: (hrn: string, deleteToken: string, now: string) =>
      sql`UPDATE subscriptions SET state = 'deleted', delete_token = ${deleteToken}, updated = ${now} WHERE hrn = ${hrn}`.pipe(Effect.asVoid),
    disableSubscription: (hrn: string, message: string, now: string) =>
      sql`UPDATE subscriptions SET state = 'disabled', message = ${message}, updated = ${now} WHERE hrn = ${hrn}`.pipe(Effect.asVoid),
    idempotencyKey: (appId: string, operation: string, key: string) =>
      sql<IdempotencyRow>`SELECT request, subscription_hrn FROM idempotency_keys WHERE app_id = ${appId} AND operation = ${operation} AND key = ${key}`.pipe(
        Effect.map(first)
      ),
    rememberIdempotencyKey: (appId: string, operation: string, key: string, request: string, subscriptionHrn: string) =>
      sql`INSERT INTO idempotency_keys (app_id, operation, key, request, subscription_hrn, created)
        VALUES (${appId}, ${operation}, ${key}, ${request}, ${subscriptionHrn}, ${Date.now()})`.pipe(Effect.asVoid),

    // --- features -----------------------------------------------------------------------------
    features: (layerPk: number) => sql<FeatureRow>`SELECT id, feature, version FROM features WHERE layer_pk = ${layerPk} ORDER BY id`,
    featuresByIds: (layerPk: number, ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<FeatureRow>)
        : sql<FeatureRow>`SELECT id, feature, version FROM features WHERE layer_pk = ${layerPk} AND ${sql.in("id", ids)}`,
    latestFeatureVersion: (layerPk: number) =>
      sql<{ v: number | null }>`SELECT MAX(version) AS v FROM feature_transactions WHERE layer_pk = ${layerPk}`.pipe(Effect.map((rows) => rows[0]?.v ?? 0)),
    insertFeatureTransaction: (layerPk: number, version: number, author: string, created: number) =>
      sql`INSERT INTO feature_transactions (layer_pk, version, author, created) VALUES (${layerPk}, ${version}, ${author}, ${created})`.pipe(Effect.asVoid),
    putFeature: (layerPk: number, id: string, feature: string, version: number) =>
      sql`INSERT INTO features (layer_pk, id, feature, version) VALUES (${layerPk}, ${id}, ${feature}, ${version})
        ON CONFLICT (layer_pk, id) DO UPDATE SET feature = excluded.feature, version = excluded.version`.pipe(Effect.asVoid),
    deleteFeature: (layerPk: number, id: string) => sql`DELETE FROM features WHERE layer_pk = ${layerPk} AND id = ${id}`.pipe(Effect.asVoid),

    // --- stream messages and consumers --------------------------------------------------------
    appendMessages: (layerPk: number, messages: ReadonlyArray<NewStreamMessage>) =>
      Effect.gen(function*() {
        if (messages.length === 0) return
        const rows = yield* sql<{ next: number }>`SELECT COALESCE(MAX(offset) + 1, 0) AS next FROM stream_messages WHERE layer_pk = ${layerPk}`
        const next = rows[0]!.next
        yield* sql`INSERT INTO stream_messages ${
          sql.insert(messages.map((m, i) => ({ layer_pk: layerPk, offset: next + i, partition: m.partition, data: m.data, checksum: m.checksum, timestamp: m.timestamp })) as any)
        }`
      }),
    messagesFrom: (layerPk: number, offset: number, limit: number) =>
      sql<StreamMessageRow>`SELECT offset, partition, data, checksum, timestamp FROM stream_messages
        WHERE layer_pk = ${layerPk} AND offset >= ${offset} ORDER BY offset LIMIT ${limit}`,
    messageBounds: (layerPk: number) =>
      sql<{ low: number | null; high: number | null }>`SELECT MIN(offset) AS low, MAX(offset) AS high FROM stream_messages WHERE layer_pk = ${layerPk}`.pipe(
        Effect.map((rows) => ({ low: rows[0]?.low ?? 0, next: rows[0]?.high === null || rows[0]?.high === undefined ? 0 : rows[0].high + 1 }))
      ),
    insertConsumer: (row: StreamConsumerRow) => sql`INSERT INTO stream_consumers ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    consumer: (id: string) => sql<StreamConsumerRow>`SELECT * FROM stream_consumers WHERE id = ${id}`.pipe(Effect.map(first)),
    latestConsumer: (layerPk: number, appId: string, mode: string) =>
      sql<StreamConsumerRow>`SELECT * FROM stream_consumers WHERE layer_pk = ${layerPk} AND app_id = ${appId} AND mode = ${mode}
        ORDER BY created DESC LIMIT 1`.pipe(Effect.map(first)),
    setConsumerPosition: (id: string, position: number) =>
      sql`UPDATE stream_consumers SET position = ${position} WHERE id = ${id}`.pipe(Effect.asVoid),
    deleteConsumer: (id: string) => sql`DELETE FROM stream_consumers WHERE id = ${id}`.pipe(Effect.asVoid),
    committedOffset: (layerPk: number, appId: string, groupId: string) =>
      sql<{ next_offset: number }>`SELECT next_offset FROM stream_offsets WHERE layer_pk = ${layerPk} AND app_id = ${appId} AND group_id = ${groupId}`.pipe(
        Effect.map((rows) => rows[0]?.next_offset)
      ),
    commitOffset: (layerPk: number, appId: string, groupId: string, nextOffset: number) =>
      sql`INSERT INTO stream_offsets (layer_pk, app_id, group_id, next_offset) VALUES (${layerPk}, ${appId}, ${groupId}, ${nextOffset})
        ON CONFLICT (layer_pk, app_id, group_id) DO UPDATE SET next_offset = excluded.next_offset`.pipe(Effect.asVoid)
  }
})

export type AdminStoreShape = Effect.Effect.Success<typeof make>

export class AdminStore extends Context.Tag("catalog-export/server/AdminStore")<AdminStore, AdminStoreShape>() {
  static readonly layer: Layer.Layer<AdminStore, SqlError, SqlClient.SqlClient> = Layer.effect(AdminStore, make)
}
