import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { ExitCode } from "../domain/ExitCode.ts"
import {
  Subscription,
  SubscriptionAccepted,
  SubscriptionList,
  type SubscriptionRequest,
  SubscriptionStatus
} from "../domain/Subscription.ts"
import { ApiClient, joinUrl } from "./ApiClient.ts"
import { ApiError } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/**
 * Notification subscriptions (config API v1 `/subscriptions`). Create and delete carry an
 * `x-idempotency-key`: a retry (ours, after a cut connection, or the caller's with the same key)
 * can never create a second subscription.
 */

export class SubscriptionNotFound extends Schema.TaggedError<SubscriptionNotFound>()("SubscriptionNotFound", {
  hrn: Schema.String,
  status: Schema.Number
}) {
  get exitCode() {
    return ExitCode.notFound
  }

  override get message(): string {
    return `Subscription ${this.hrn} was not found or is not accessible with these credentials (${this.status}). Check the HRN; subscriptions are visible to the application that created them.`
  }
}

/** 409: the key was used for another request, or the same subscription already exists. */
export class SubscriptionConflict extends Schema.TaggedError<SubscriptionConflict>()("SubscriptionConflict", {
  detail: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message(): string {
    return `The subscription request conflicts with an existing one: ${this.detail}`
  }
}

export type SubscriptionsFailure = LookupFailure | SubscriptionNotFound | SubscriptionConflict

export interface IdempotencyOptions {
  /** 10-255 characters; a fresh UUID when omitted. Reuse it to retry the same request safely. */
  readonly idempotencyKey?: string
}

export interface SubscriptionsApiShape {
  readonly create: (
    request: SubscriptionRequest,
    options?: IdempotencyOptions
  ) => Effect.Effect<Subscription, SubscriptionsFailure>
  /** Every subscription the calling application can read, all pages. */
  readonly list: () => Effect.Effect<ReadonlyArray<Subscription>, SubscriptionsFailure>
  readonly get: (hrn: string) => Effect.Effect<Subscription, SubscriptionsFailure>
  /** Deletes and waits until the status says `deleted`. */
  readonly delete: (
    hrn: string,
    options?: IdempotencyOptions
  ) => Effect.Effect<SubscriptionStatus, SubscriptionsFailure>
  readonly status: (statusToken: string) => Effect.Effect<SubscriptionStatus, SubscriptionsFailure>
}

const STATUS_POLL = Duration.millis(300)

export class SubscriptionsApi
  extends Context.Tag("catalog-export/client/SubscriptionsApi")<SubscriptionsApi, SubscriptionsApiShape>()
{
  static readonly layer: Layer.Layer<SubscriptionsApi, never, ApiClient | Lookup> = Layer.effect(
    SubscriptionsApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const base = lookup.baseUrl({ api: "config", version: "v1" })
      const path = (root: string, hrn: string) => joinUrl(root, `/subscriptions/${hrn}`)

      const conflicts = <A, E, R>(self: Effect.Effect<A, E, R>) =>
        Effect.catchIf(
          self,
          (e): e is E & ApiError => e instanceof ApiError && e.status === 409,
          (e) => Effect.fail(new SubscriptionConflict({ detail: e.detail ?? e.title ?? "conflict" }))
        )
      const missing = (hrn: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
        Effect.catchIf(
          self,
          (e): e is E & ApiError => e instanceof ApiError && (e.status === 404 || e.status === 403),
          (e) => Effect.fail(new SubscriptionNotFound({ hrn, status: e.status }))
        )

      const status = Effect.fn("SubscriptionsApi.status")(function*(statusToken: string) {
        const root = yield* base
        return yield* api.json(
          HttpClientRequest.get(joinUrl(root, `/subscriptions/status/${encodeURIComponent(statusToken)}`)),
          SubscriptionStatus
        )
      })

      /** Polls a status token until it leaves `pending`. */
      const settle = (statusToken: string) =>
        Effect.gen(function*() {
          for (;;) {
            const current = yield* status(statusToken)
            if (current.status !== "pending") return current
            yield* Effect.sleep(STATUS_POLL)
          }
        })

      const get = Effect.fn("SubscriptionsApi.get")(function*(hrn: string) {
        const root = yield* base
        return yield* api.json(HttpClientRequest.get(path(root, hrn)), Subscription).pipe(missing(hrn))
      })

      const create = Effect.fn("SubscriptionsApi.create")(
        function*(request: SubscriptionRequest, options: IdempotencyOptions = {}) {
          const root = yield* base
          const key = options.idempotencyKey ?? randomUUID()
          const post = HttpClientRequest.post(joinUrl(root, "/subscriptions")).pipe(
            HttpClientRequest.setHeader("x-idempotency-key", key),
            HttpClientRequest.bodyUnsafeJson(request)
          )
          const answer = yield* api.json(post, Schema.Union(Subscription, SubscriptionAccepted)).pipe(conflicts)
          if ("subscriptionName" in answer) return answer
          // The platform answers with a status token only: follow it to the subscription.
          const settled = answer.subscriptionHrn === undefined
            ? yield* settle(answer.statusToken)
            : { status: "active", subscriptionHrn: answer.subscriptionHrn }
          if (settled.subscriptionHrn === undefined) {
            return yield* new SubscriptionConflict({
              detail: `the creation ended ${settled.status} without a subscription HRN`
            })
          }
          return yield* get(settled.subscriptionHrn)
        }
      )

      const list = Effect.fn("SubscriptionsApi.list")(function*() {
        const root = yield* base
        const items: Array<Subscription> = []
        let token: string | undefined
        const seen = new Set<string>()
        for (;;) {
          let request = HttpClientRequest.get(joinUrl(root, "/subscriptions"))
          if (token !== undefined) request = HttpClientRequest.setUrlParam(request, "pageToken", token)
          const page = yield* api.json(request, SubscriptionList)
          items.push(...page.items)
          token = page.nextPageToken
          if (token === undefined || token === "" || seen.has(token)) return items
          seen.add(token)
        }
      })

      const remove = Effect.fn("SubscriptionsApi.delete")(function*(hrn: string, options: IdempotencyOptions = {}) {
        const root = yield* base
        const request = HttpClientRequest.del(path(root, hrn)).pipe(
          HttpClientRequest.setHeader("x-idempotency-key", options.idempotencyKey ?? randomUUID())
        )
        const answer = yield* api.json(request, SubscriptionAccepted).pipe(missing(hrn), conflicts)
        return yield* settle(answer.statusToken)
      })

      return SubscriptionsApi.of({ create, list, get, delete: remove, status })
    })
  )
}
