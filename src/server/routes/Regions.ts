import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import { LOCAL_REGIONS_PATH, SELECTABLE_REGIONS } from "../../domain/Region.ts"
import { withCaller } from "../Auth.ts"
import { Replicas } from "../Replicas.ts"
import { badRequest, json, notFound } from "../Reply.ts"

/**
 * The local service's own administration of its regions (no such API exists on the platform): take a
 * region down and bring it back while the service runs, for tests and demos of a regional outage.
 * Any authenticated application may call it. `catalog-export regions down|up` uses it.
 *
 * - `GET /local/v1/regions` → `{regions: [{id, state: "up"|"down"}], pendingCopies}`
 * - `PUT /local/v1/regions/{id}` with `{"state": "down"|"up"}` → the same, after the change
 */

const list = Effect.flatMap(Replicas, (replicas) => Effect.map(replicas.status, (status) => json(200, status)))

const set = Effect.gen(function*() {
  const { region } = yield* HttpRouter.params
  if (!(SELECTABLE_REGIONS as ReadonlyArray<string | undefined>).includes(region)) {
    return yield* notFound(
      "region",
      `no region ${JSON.stringify(region)}; the regions are ${SELECTABLE_REGIONS.join(" and ")}`
    )
  }
  const request = yield* HttpServerRequest.HttpServerRequest
  const body = (yield* request.json.pipe(Effect.orElseSucceed(() => undefined))) as { state?: unknown } | undefined
  const state = body?.state
  if (state !== "up" && state !== "down") {
    return yield* badRequest("state", "send {\"state\": \"down\"} or {\"state\": \"up\"}")
  }
  return json(200, yield* (yield* Replicas).setState(region!, state))
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(LOCAL_REGIONS_PATH, withCaller(list)),
  HttpRouter.put(`${LOCAL_REGIONS_PATH}/:region`, withCaller(set))
)
