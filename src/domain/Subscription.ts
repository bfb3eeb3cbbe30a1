import * as Schema from "effect/Schema"

/** Notification subscriptions on interactive map layers (config API `/subscriptions`). */

export const SUBSCRIPTION_TYPES = ["perFeature", "perTransaction", "contentChange"] as const
export const SubscriptionType = Schema.Literal(...SUBSCRIPTION_TYPES)
export type SubscriptionType = typeof SubscriptionType.Type

/** What a client sends to create a subscription. */
export interface SubscriptionRequest {
  readonly subscriptionName: string
  readonly description?: string
  readonly sourceCatalog: string
  readonly sourceLayer: string
  readonly destinationCatalog: string
  readonly destinationLayer: string
  readonly interactiveMapSubscription: { readonly type: SubscriptionType }
}

export const Subscription = Schema.Struct({
  subscriptionHrn: Schema.String,
  subscriptionName: Schema.String,
  description: Schema.optional(Schema.String),
  sourceCatalog: Schema.String,
  sourceLayer: Schema.String,
  destinationCatalog: Schema.String,
  destinationLayer: Schema.String,
  interactiveMapSubscription: Schema.Struct({ type: Schema.String }),
  owner: Schema.optional(Schema.Struct({
    creator: Schema.optional(Schema.Struct({ id: Schema.String })),
    organisation: Schema.optional(Schema.Struct({ id: Schema.String }))
  })),
  version: Schema.optional(Schema.Number),
  created: Schema.optional(Schema.String),
  updated: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Struct({ state: Schema.String, message: Schema.optional(Schema.String) }))
})
export type Subscription = typeof Subscription.Type

/** `POST` and `DELETE` answer 202 with a status token (the local service adds the subscription to the create answer). */
export const SubscriptionAccepted = Schema.Struct({
  statusToken: Schema.String,
  subscriptionHrn: Schema.optional(Schema.String)
})
export type SubscriptionAccepted = typeof SubscriptionAccepted.Type

export const SubscriptionStatus = Schema.Struct({
  status: Schema.String,
  subscriptionHrn: Schema.optional(Schema.String)
})
export type SubscriptionStatus = typeof SubscriptionStatus.Type

export const SubscriptionList = Schema.Struct({
  limit: Schema.optional(Schema.Number),
  items: Schema.Array(Subscription),
  nextPageToken: Schema.optional(Schema.String),
  previousPageToken: Schema.optional(Schema.String)
})
