/**
 * The messages interactive map subscriptions write to their destination stream layer (one JSON
 * document per stream message). `createdAt` is milliseconds since the Unix epoch.
 */

export interface Feature {
  readonly type: "Feature"
  readonly id?: string | number
  readonly geometry: unknown
  readonly properties: Record<string, unknown> | null
  readonly [key: string]: unknown
}

export interface FeatureCollection {
  readonly type: "FeatureCollection"
  readonly features: ReadonlyArray<Feature>
}

export type FeatureOperation = "INSERT" | "UPDATE" | "DELETE"

/** perFeature: one message per changed feature. */
export interface FeatureChange {
  readonly type: "FeatureChange"
  readonly operation: FeatureOperation
  readonly catalogHrn: string
  readonly layerId: string
  readonly feature: Feature
}

/** perTransaction: one message per transaction. */
export interface Changeset {
  readonly type: "Changeset"
  readonly version: number
  readonly author: string
  readonly catalogHrn: string
  readonly layerId: string
  readonly createdAt: number
  readonly inserted: FeatureCollection
  readonly updated: FeatureCollection
  readonly deleted: FeatureCollection
}

/** contentChange: only says that something in the layer changed. */
export interface ChangeNotification {
  readonly type: "ChangeNotification"
  readonly catalogHrn: string
  readonly layerId: string
  readonly createdAt: number
}

export type Notification = FeatureChange | Changeset | ChangeNotification

export const featureCollection = (features: ReadonlyArray<Feature>): FeatureCollection => ({
  type: "FeatureCollection",
  features
})
