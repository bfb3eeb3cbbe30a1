import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import {
  type ChangeNotification,
  type Changeset,
  type Feature,
  type FeatureChange,
  featureCollection,
  type FeatureOperation,
  type Notification
} from "../domain/Notification.ts"
import { CatalogsRepo } from "./db/CatalogsRepo.ts"
import { type NewStreamMessage, StreamsRepo } from "./db/StreamsRepo.ts"
import { SubscriptionsRepo } from "./db/SubscriptionsRepo.ts"
import { placementOf, replicaKey } from "./Regions.ts"
import { Replicas } from "./Replicas.ts"

/** One committed transaction of an interactive map layer. */
export interface CommittedTransaction {
  readonly catalogHrn: string
  readonly layerId: string
  readonly version: number
  readonly author: string
  /** Milliseconds since the Unix epoch. */
  readonly createdAt: number
  readonly inserted: ReadonlyArray<Feature>
  readonly updated: ReadonlyArray<Feature>
  /** The last state of each deleted feature. */
  readonly deleted: ReadonlyArray<Feature>
}

/** The messages one subscription type makes of a transaction, with the stream partition key of each. */
export const notificationsFor = (
  type: string,
  tx: CommittedTransaction
): ReadonlyArray<{ key: string; message: Notification }> => {
  switch (type) {
    case "perFeature": {
      const change = (operation: FeatureOperation) => (feature: Feature) => ({
        key: String(feature.id ?? ""),
        message: {
          type: "FeatureChange",
          operation,
          catalogHrn: tx.catalogHrn,
          layerId: tx.layerId,
          feature
        } satisfies FeatureChange
      })
      return [
        ...tx.inserted.map(change("INSERT")),
        ...tx.updated.map(change("UPDATE")),
        ...tx.deleted.map(change("DELETE"))
      ]
    }
    case "perTransaction":
      return [{
        key: String(tx.version),
        message: {
          type: "Changeset",
          version: tx.version,
          author: tx.author,
          catalogHrn: tx.catalogHrn,
          layerId: tx.layerId,
          createdAt: tx.createdAt,
          inserted: featureCollection(tx.inserted),
          updated: featureCollection(tx.updated),
          deleted: featureCollection(tx.deleted)
        } satisfies Changeset
      }]
    case "contentChange":
      return [{
        key: tx.layerId,
        message: {
          type: "ChangeNotification",
          catalogHrn: tx.catalogHrn,
          layerId: tx.layerId,
          createdAt: tx.createdAt
        } satisfies ChangeNotification
      }]
    default:
      return []
  }
}

const encode = (message: Notification, key: string, timestamp: number): NewStreamMessage => {
  const data = new TextEncoder().encode(JSON.stringify(message))
  return { partition: key, data, checksum: createHash("sha1").update(data).digest("hex"), timestamp }
}

/**
 * Writes the notifications of a committed transaction to the destination stream layer of every
 * active subscription on the layer. Runs inside the transaction's database transaction, so the
 * change and its notifications commit together and in order. A subscription whose destination is
 * gone is disabled. A multi-region destination gets them in its primary region, or in its backup
 * while the primary is down, and the other region later (Replicas.ts).
 */
export const deliver = (tx: CommittedTransaction) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const subscriptions = yield* SubscriptionsRepo
    const streams = yield* StreamsRepo
    const replicas = yield* Replicas
    for (const subscription of yield* subscriptions.activeOn(tx.catalogHrn, tx.layerId)) {
      const destination = yield* catalogs.layer(subscription.destination_catalog, subscription.destination_layer)
      if (destination === undefined || destination.layer_type !== "stream") {
        yield* subscriptions.disable(
          subscription.hrn,
          "The destination stream layer no longer exists.",
          new Date().toISOString()
        )
        continue
      }
      const messages = notificationsFor(subscription.type, tx).map(({ key, message }) =>
        encode(message, key, tx.createdAt)
      )
      const placement = placementOf(JSON.parse((yield* catalogs.catalog(destination.catalog_hrn))!.config))
      const region = placement.secondary !== undefined && replicas.down.has(placement.primary)
        ? placement.secondary
        : placement.primary
      const key = replicaKey(destination.pk, destination.layer_type, region !== placement.primary)
      yield* streams.appendMessages(key, messages)
      yield* replicas.streamWritten({ placement, region, key, messages })
    }
  })
