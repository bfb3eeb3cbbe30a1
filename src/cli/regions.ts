import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ApiClient } from "../client/ApiClient.ts"
import { ApiError } from "../client/Errors.ts"
import { UsageError } from "../domain/ExitCode.ts"
import {
  LOCAL_REGIONS_PATH,
  regionOf,
  type RegionsStatus,
  RegionsStatus as RegionsStatusSchema,
  SELECTABLE_REGIONS
} from "../domain/Region.ts"
import { clientFor, type GlobalOptions, globalOptions } from "./common.ts"
import { loggerLayer } from "./Logging.ts"

/**
 * `regions down|up|status`: take a region of the local catalog service down and bring it back while it
 * runs, to rehearse a regional outage (multi-region failover, replication). This talks to the local
 * service's own administration endpoint (`/local/v1/regions`); the HERE platform has none.
 */

const LOCAL_LOOKUP = "http://localhost:31005/lookup/v1"

const lookupUrlOf = (o: Flags) =>
  Option.match(o.lookupUrl, { onNone: () => LOCAL_LOOKUP, onSome: (given) => given.url })

const describe = (status: RegionsStatus) =>
  `Regions: ${status.regions.map((r) => `${r.id} ${r.state}`).join(", ")}; ${status.pendingCopies} cop${
    status.pendingCopies === 1 ? "y" : "ies"
  } between replicas pending.`

const regionOption = Options.text("region").pipe(
  Options.withDescription(`The region: ${SELECTABLE_REGIONS.join(" or ")}.`)
)

/** The global options but `--region` (the commands take a region of their own). */
const { region: _region, ...connection } = globalOptions

type Flags = Omit<GlobalOptions, "region"> & { readonly json: boolean }

const call = (o: Flags, state: "up" | "down" | undefined, rawRegion: string | undefined) =>
  Effect.gen(function*() {
    const region = rawRegion === undefined ? undefined : regionOf(rawRegion)
    if (rawRegion !== undefined && region === undefined) {
      return yield* new UsageError({
        message: `--region: unknown region '${rawRegion}'; the regions are ${SELECTABLE_REGIONS.join(" and ")}.`
      })
    }
    const service = lookupUrlOf(o).replace(/\/+$/, "").replace(/\/lookup\/v1$/, "")
    const api = yield* ApiClient
    const request = state === undefined
      ? HttpClientRequest.get(`${service}${LOCAL_REGIONS_PATH}`)
      : HttpClientRequest.put(`${service}${LOCAL_REGIONS_PATH}/${region}`).pipe(
        HttpClientRequest.bodyUnsafeJson({ state })
      )
    const status = yield* api.json(request, RegionsStatusSchema).pipe(
      Effect.catchIf(
        (e): e is ApiError => e instanceof ApiError && e.status === 404,
        () =>
          new UsageError({
            message:
              `${service} is not a local catalog service (catalog-export serve): only it has regions to take down; check --lookup-url.`
          })
      )
    )
    if (o.json) return yield* Console.log(JSON.stringify(status))
    yield* Console.log(state === undefined ? describe(status) : `Region ${region} is ${state}. ${describe(status)}`)
  }).pipe(
    Effect.provide(clientFor(
      {
        lookupUrl: lookupUrlOf(o),
        lookupFrom: Option.match(o.lookupUrl, {
          onNone: () => "is the local service's default (none was given)",
          onSome: (given) => given.from
        }),
        credentials: Option.getOrUndefined(o.credentials)
      },
      undefined,
      { concurrency: 2, retry: { maxRetries: 2 } }
    )),
    Effect.provide(loggerLayer(o))
  )

const json = Options.boolean("json").pipe(Options.withDescription("Print the regions' states as JSON."))

const change = (state: "up" | "down", description: string) =>
  Command.make(state, { ...connection, json, region: regionOption }, (o) => call(o, state, o.region)).pipe(
    Command.withDescription(description)
  )

export const regionsCommand = Command.make("regions").pipe(
  Command.withDescription(
    "Take a region of the local catalog service (catalog-export serve) down or bring it back, to rehearse a regional outage. Local service only."
  ),
  Command.withSubcommands([
    change(
      "down",
      "Take a region down: its catalog-bound APIs answer 503; versioned layers of multi-region catalogs take no new data."
    ),
    change("up", "Bring a region back; stream messages waiting for it are delivered."),
    Command.make("status", { ...connection, json }, (o) => call(o, undefined, undefined)).pipe(
      Command.withDescription("Show which regions are up.")
    )
  ])
)
