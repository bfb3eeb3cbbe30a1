import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type Accepted, AdminApi, createdHrn } from "../client/AdminApi.ts"
import { lastOffsets, StreamApi } from "../client/StreamApi.ts"
import { SubscriptionsApi } from "../client/SubscriptionsApi.ts"
import type { OperationStatus } from "../domain/Catalog.ts"
import { UsageError } from "../domain/ExitCode.ts"
import * as Hrn from "../domain/Hrn.ts"
import { plural } from "../domain/Plural.ts"
import type { StreamMessage } from "../domain/Stream.ts"
import { type Subscription, SUBSCRIPTION_TYPES, type SubscriptionRequest } from "../domain/Subscription.ts"
import { readJsonFile } from "../export/Json.ts"
import { globalOptions, withClient } from "./common.ts"

/**
 * Administration commands over the rest of the interface: create, update and delete catalogs,
 * delete layers, manage notification subscriptions, and read stream layers.
 */

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of text."))
const catalog = Options.text("catalog").pipe(Options.withDescription("Catalog HRN."))
const layer = Options.text("layer").pipe(Options.withDescription("Layer id."))
const file = Options.file("file").pipe(
  Options.withDescription("JSON file with the full catalog configuration (the config API's catalog body).")
)
const wait = Options.boolean("wait").pipe(Options.withDescription("Wait until the service has finished the operation."))
const idempotencyKey = Options.text("idempotency-key").pipe(
  Options.optional,
  Options.withDescription(
    "x-idempotency-key (10-255 characters; default: a new UUID). Repeat a request with the same key to retry it safely."
  )
)

/** How often `--wait` polls a status link. */
const POLL = "200 millis"

/** A file holding a JSON object: a catalog configuration, a subscription request. */
const readJsonObject = (path: string) =>
  readJsonFile(path, Schema.Record({ key: Schema.String, value: Schema.Unknown })).pipe(
    Effect.mapError((e) =>
      new UsageError({
        message: e._tag === "FileUnreadable"
          ? `Cannot read ${path}: ${e.why}.`
          : e.notJson
          ? `${path} is not valid JSON (${e.detail}).`
          : `${path} is not a JSON object.`
      })
    )
  )

/** Where to follow an accepted change, or that the service gave nothing to follow (a bare 202). */
const statusOf = (accepted: Accepted) =>
  accepted.link === undefined ? " (the service sent no status link to follow)." : `; status: ${accepted.link.href}`

const printWarnings = (accepted: Accepted) =>
  Effect.forEach(accepted.warnings, (w) => Console.error(`warning: ${w}`), { discard: true })

// --- catalogs ------------------------------------------------------------------------------------

const catalogsCreate = Command.make(
  "create",
  { ...globalOptions, json, file, wait },
  (o) =>
    withClient(
      o,
      undefined,
      Effect.gen(function*() {
        const configuration = yield* readJsonObject(o.file)
        if (typeof configuration.id !== "string") {
          return yield* new UsageError({ message: `${o.file} has no catalog "id".` })
        }
        const admin = yield* AdminApi
        const accepted = yield* admin.createCatalog(configuration)
        yield* printWarnings(accepted)
        // The platform answers with a status link; the interface describes the catalog itself as the answer.
        if (accepted.link === undefined) {
          const hrn = accepted.catalog?.hrn
          if (hrn === undefined) {
            return yield* Console.log(
              o.json
                ? "{}"
                : `Catalog creation of '${configuration.id}' accepted (the service sent no status link to follow).`
            )
          }
          const created = o.wait ? yield* admin.awaitCatalog(hrn, { interval: POLL }) : accepted.catalog!
          return yield* Console.log(
            o.json ? JSON.stringify(created) : `Created ${created.hrn} with ${plural(created.layers.length, "layer")}.`
          )
        }
        if (!o.wait) {
          return yield* Console.log(
            o.json
              ? JSON.stringify(accepted.link)
              : `Catalog creation of '${configuration.id}' accepted; status: ${accepted.link.href}`
          )
        }
        const status = yield* admin.awaitOperation(accepted.link, { interval: POLL })
        const hrn = createdHrn(status)
        if (hrn === undefined) {
          return yield* Console.log(o.json ? JSON.stringify(status) : `Catalog '${configuration.id}' created.`)
        }
        const created = yield* admin.awaitCatalog(hrn, { interval: POLL })
        yield* Console.log(
          o.json ? JSON.stringify(created) : `Created ${created.hrn} with ${plural(created.layers.length, "layer")}.`
        )
      })
    )
).pipe(Command.withDescription("Create a catalog (with or without layers) from a JSON configuration."))

const catalogsUpdate = Command.make(
  "update",
  { ...globalOptions, json, catalog, file, wait },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const configuration = yield* readJsonObject(o.file)
        const admin = yield* AdminApi
        const accepted = yield* admin.updateCatalog(hrn, configuration)
        yield* printWarnings(accepted)
        if (o.wait && accepted.link !== undefined) yield* admin.awaitOperation(accepted.link, { interval: POLL })
        yield* Console.log(
          o.json
            ? JSON.stringify(accepted.link ?? {})
            : o.wait && accepted.link !== undefined
            ? `Updated ${hrn}.`
            : `Update of ${hrn} accepted${statusOf(accepted)}`
        )
      })
    )
).pipe(
  Command.withDescription(
    "Replace a catalog's configuration (PUT, the full configuration); layers are added or updated, region and replication stay."
  )
)

const catalogsDelete = Command.make(
  "delete",
  { ...globalOptions, json, catalog, wait },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const admin = yield* AdminApi
        const accepted = yield* admin.deleteCatalog(hrn)
        yield* printWarnings(accepted)
        if (o.wait && accepted.link !== undefined) yield* admin.awaitOperation(accepted.link, { interval: POLL })
        yield* Console.log(
          o.json
            ? JSON.stringify(accepted.link ?? {})
            : o.wait && accepted.link !== undefined
            ? `Deleted ${hrn}.`
            : `Deletion of ${hrn} accepted${statusOf(accepted)}`
        )
      })
    )
).pipe(Command.withDescription("Delete a catalog with all its layers, data and metadata (only its creator may)."))

// --- layers --------------------------------------------------------------------------------------

/** Prints each step's state when it changes; a finished deletion completes every step. */
const stepPrinter = (asJson: boolean) => {
  const shown = new Map<string, string>()
  const show = (name: string, state: string) =>
    shown.get(name) === state
      ? Effect.void
      : Effect.suspend(() => {
        shown.set(name, state)
        return Console.log(asJson ? JSON.stringify({ step: name, state }) : `${name}: ${state}`)
      })
  return {
    pending: (status: OperationStatus) =>
      Effect.forEach(status.steps ?? [], (s) => (s.state === "Not started" ? Effect.void : show(s.name, s.state)), {
        discard: true
      }),
    done: (names: ReadonlyArray<string>) => Effect.forEach(names, (name) => show(name, "Completed"), { discard: true })
  }
}

const layersDelete = Command.make(
  "delete",
  { ...globalOptions, json, catalog, layer, wait },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const admin = yield* AdminApi
        const accepted = yield* admin.deleteLayer(hrn, o.layer)
        yield* printWarnings(accepted)
        if (!o.wait || accepted.link === undefined) {
          return yield* Console.log(
            o.json
              ? JSON.stringify(accepted.link ?? {})
              : `Deletion of layer '${o.layer}' accepted${statusOf(accepted)}`
          )
        }
        const printer = stepPrinter(o.json)
        const names: Array<string> = []
        yield* admin.awaitOperation(accepted.link, {
          interval: POLL,
          onPending: (status) => {
            for (const s of status.steps ?? []) if (!names.includes(s.name)) names.push(s.name)
            return printer.pending(status)
          }
        })
        yield* printer.done(names)
        if (!o.json) yield* Console.log(`Deleted layer '${o.layer}' of ${hrn}: its data and metadata are gone.`)
      })
    )
).pipe(
  Command.withDescription("Delete a layer with its data and metadata; --wait shows the deletion steps as they advance.")
)

// --- subscriptions -------------------------------------------------------------------------------

const subscription = Options.text("subscription").pipe(Options.withDescription("Subscription HRN."))
const text = (name: string, description: string) =>
  Options.text(name).pipe(Options.optional, Options.withDescription(description))

const describeSubscription = (s: Subscription) =>
  `${s.subscriptionHrn}  ${s.interactiveMapSubscription.type}  ${s.sourceCatalog}:${s.sourceLayer} -> ${s.destinationCatalog}:${s.destinationLayer}  ${
    s.status?.state ?? ""
  }`.trimEnd()

const subscriptionsCreate = Command.make(
  "create",
  {
    ...globalOptions,
    json,
    idempotencyKey,
    file: Options.file("file").pipe(
      Options.optional,
      Options.withDescription("JSON file with the subscription body (instead of the flags below).")
    ),
    name: text("name", "subscriptionName: 3-46 characters of a-z, 0-9 and '-'."),
    description: text("description", "A description."),
    sourceCatalog: text("source-catalog", "HRN of the catalog with the interactive map layer."),
    sourceLayer: text("source-layer", "The interactive map layer to observe."),
    destinationCatalog: text("destination-catalog", "HRN of the catalog with the destination stream layer."),
    destinationLayer: text("destination-layer", "The stream layer the notifications are written to."),
    type: Options.choice("type", SUBSCRIPTION_TYPES).pipe(
      Options.optional,
      Options.withDescription("perFeature, perTransaction or contentChange.")
    )
  },
  (o) =>
    withClient(
      o,
      Option.getOrUndefined(o.sourceCatalog),
      Effect.gen(function*() {
        let request: SubscriptionRequest
        if (Option.isSome(o.file)) {
          request = (yield* readJsonObject(o.file.value)) as unknown as SubscriptionRequest
        } else {
          const missing = (
            [
              ["name", o.name],
              ["source-catalog", o.sourceCatalog],
              ["source-layer", o.sourceLayer],
              ["destination-catalog", o.destinationCatalog],
              ["destination-layer", o.destinationLayer],
              ["type", o.type]
            ] as const
          ).filter(([, v]) => Option.isNone(v)).map(([k]) => `--${k}`)
          if (missing.length > 0) {
            return yield* new UsageError({ message: `Give --file, or all of ${missing.join(", ")}.` })
          }
          request = {
            subscriptionName: Option.getOrThrow(o.name),
            ...(Option.isSome(o.description) ? { description: o.description.value } : {}),
            sourceCatalog: Option.getOrThrow(o.sourceCatalog),
            sourceLayer: Option.getOrThrow(o.sourceLayer),
            destinationCatalog: Option.getOrThrow(o.destinationCatalog),
            destinationLayer: Option.getOrThrow(o.destinationLayer),
            interactiveMapSubscription: { type: Option.getOrThrow(o.type) }
          }
        }
        const key = Option.getOrUndefined(o.idempotencyKey)
        if (key !== undefined && (key.length < 10 || key.length > 255)) {
          return yield* new UsageError({ message: `--idempotency-key must be 10-255 characters, got ${key.length}.` })
        }
        const created = yield* (yield* SubscriptionsApi).create(
          request,
          key === undefined ? {} : { idempotencyKey: key }
        )
        yield* Console.log(o.json ? JSON.stringify(created) : `Created ${describeSubscription(created)}`)
      })
    )
).pipe(
  Command.withDescription(
    "Create a notification subscription on an interactive map layer (idempotent with --idempotency-key)."
  )
)

const subscriptionsList = Command.make(
  "list",
  { ...globalOptions, json },
  (o) =>
    withClient(
      o,
      undefined,
      Effect.gen(function*() {
        const items = yield* (yield* SubscriptionsApi).list()
        if (o.json) return yield* Effect.forEach(items, (s) => Console.log(JSON.stringify(s)), { discard: true })
        yield* Console.log(
          items.length === 0
            ? "No subscriptions visible to these credentials."
            : items.map(describeSubscription).join("\n")
        )
      })
    )
).pipe(Command.withDescription("List the subscriptions these credentials can read."))

const subscriptionsGet = Command.make(
  "get",
  { ...globalOptions, json, subscription },
  (o) =>
    withClient(
      o,
      undefined,
      Effect.gen(function*() {
        const s = yield* (yield* SubscriptionsApi).get(o.subscription)
        yield* Console.log(o.json ? JSON.stringify(s, null, 2) : describeSubscription(s))
      })
    )
).pipe(Command.withDescription("Show one subscription."))

const subscriptionsDelete = Command.make(
  "delete",
  { ...globalOptions, json, subscription, idempotencyKey },
  (o) =>
    withClient(
      o,
      undefined,
      Effect.gen(function*() {
        const key = Option.getOrUndefined(o.idempotencyKey)
        const status = yield* (yield* SubscriptionsApi).delete(
          o.subscription,
          key === undefined ? {} : { idempotencyKey: key }
        )
        yield* Console.log(o.json ? JSON.stringify(status) : `Deleted ${o.subscription}: notifications stop.`)
      })
    )
).pipe(Command.withDescription("Delete a subscription (idempotent); its notifications stop."))

// --- stream --------------------------------------------------------------------------------------

/** One output line per message: the JSON document itself when the message is JSON, else base64. */
const messageLine = (m: StreamMessage) => {
  const base = {
    offset: m.offset.offset,
    streamPartition: m.offset.partition,
    partition: m.metaData.partition,
    timestamp: m.metaData.timestamp
  }
  if (m.metaData.data === undefined) return JSON.stringify({ ...base, dataHandle: m.metaData.dataHandle })
  const bytes = Buffer.from(m.metaData.data, "base64")
  try {
    return JSON.stringify({ ...base, data: JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)) })
  } catch {
    return JSON.stringify({ ...base, dataBase64: m.metaData.data })
  }
}

const streamRead = Command.make(
  "read",
  {
    ...globalOptions,
    catalog,
    layer,
    follow: Options.boolean("follow").pipe(
      Options.withDescription("Keep reading new messages until interrupted (Ctrl-C).")
    ),
    group: Options.text("group").pipe(
      Options.withDefault("catalog-export"),
      Options.withDescription(
        "Consumer group: each run continues after the messages the group has committed (default catalog-export)."
      )
    ),
    fromBeginning: Options.boolean("from-beginning").pipe(
      Options.withDescription("Start at the first message, whatever the group committed.")
    ),
    limit: Options.integer("limit").pipe(Options.optional, Options.withDescription("Stop after this many messages.")),
    pollMillis: Options.integer("poll-interval").pipe(
      Options.withDefault(500),
      Options.withDescription("Milliseconds between reads that found nothing, with --follow.")
    )
  },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const limit = Option.getOrUndefined(o.limit)
        if (limit !== undefined && limit < 1) {
          return yield* new UsageError({ message: `--limit must be at least 1, got ${limit}.` })
        }
        const stream = yield* StreamApi
        yield* Effect.scoped(Effect.gen(function*() {
          const consumer = yield* Effect.acquireRelease(
            stream.subscribe(hrn, o.layer, { groupId: o.group }),
            (c) => Effect.ignore(stream.unsubscribe(c))
          )
          if (o.fromBeginning) yield* stream.seek(consumer, [{ partition: 0, offset: 0 }])
          let printed = 0
          for (;;) {
            const batch = yield* stream.read(consumer)
            const wanted = limit === undefined ? batch : batch.slice(0, limit - printed)
            for (const m of wanted) yield* Console.log(messageLine(m))
            printed += wanted.length
            yield* stream.commit(consumer, lastOffsets(wanted))
            if (limit !== undefined && printed >= limit) return
            if (batch.length === 0) {
              if (!o.follow) return
              yield* Effect.sleep(`${Math.max(10, o.pollMillis)} millis`)
            }
          }
        }))
      })
    )
).pipe(
  Command.withDescription(
    "Read the messages of a stream layer as JSON lines (subscribe, read, commit offsets), once or with --follow."
  )
)

export const catalogAdminCommands = [catalogsCreate, catalogsUpdate, catalogsDelete] as const
export const layerAdminCommands = [layersDelete] as const

export const adminCommands = [
  Command.make("subscriptions").pipe(
    Command.withDescription("Manage notification subscriptions of interactive map layers."),
    Command.withSubcommands([subscriptionsCreate, subscriptionsList, subscriptionsGet, subscriptionsDelete])
  ),
  Command.make("stream").pipe(Command.withDescription("Read stream layers."), Command.withSubcommands([streamRead]))
] as const
