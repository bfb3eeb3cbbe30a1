import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { BlobApi, VolatileBlobApi } from "../client/BlobApi.ts"
import { ConfigApi } from "../client/ConfigApi.ts"
import { Lookup } from "../client/Lookup.ts"
import { MetadataApi } from "../client/MetadataApi.ts"
import { QueryApi } from "../client/QueryApi.ts"
import { UsageError } from "../domain/ExitCode.ts"
import * as Hrn from "../domain/Hrn.ts"
import { ADDITIONAL_FIELDS, type AdditionalField } from "../domain/Partition.ts"
import { NotFound } from "../export/Errors.ts"
import { fromCause } from "../sinks/SinkError.ts"
import { catalogAdminCommands, layerAdminCommands } from "./admin.ts"
import { globalOptions, withClient } from "./common.ts"
import { CATALOG_VERSION_FLAG } from "./help.ts"
import { wantsJson } from "./render.ts"

const json = Options.boolean("json").pipe(
  Options.withDescription("Print JSON (one document, or one line per item for listings).")
)
const catalog = Options.text("catalog").pipe(Options.withDescription("Catalog HRN."))
const layer = Options.text("layer").pipe(Options.withDescription("Layer id."))
const partitionsVersion = Options.integer(CATALOG_VERSION_FLAG).pipe(
  Options.optional,
  Options.withDescription("Catalog version (versioned layers; default: latest).")
)
const fieldsOption = Options.text("additional-fields").pipe(
  Options.withDefault("dataSize,checksum"),
  Options.withDescription("Comma-separated: dataSize, checksum, compressedDataSize, crc.")
)

const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => r[i]?.length ?? 0))) ?? []
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n")
}

const catalogsList = Command.make(
  "list",
  { ...globalOptions, json },
  (o) =>
    withClient(
      o,
      undefined,
      Effect.gen(function*() {
        const items = yield* (yield* ConfigApi).listCatalogs()
        if (wantsJson(o.json)) {
          return yield* Effect.forEach(items, (i) => Console.log(JSON.stringify(i)), { discard: true })
        }
        yield* Console.log(
          items.length === 0
            ? "No catalogs visible to these credentials."
            : table([["HRN", "TITLE"], ...items.map((i) => [i.hrn, i.title ?? ""])])
        )
      })
    )
).pipe(Command.withDescription("List the catalogs these credentials can read."))

const catalogsGet = Command.make(
  "get",
  { ...globalOptions, json, catalog },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const c = yield* (yield* ConfigApi).getCatalog(yield* Hrn.canonicalCatalog(o.catalog))
        if (wantsJson(o.json)) return yield* Console.log(JSON.stringify(c, null, 2))
        yield* Console.log(`${c.hrn}  ${c.name ?? ""}\n${c.summary ?? ""}\n`)
        yield* Console.log(
          table([
            ["LAYER", "TYPE", "PARTITIONING", "CONTENT TYPE", "ENCODING"],
            ...c.layers.map((l) => [
              l.id,
              l.layerType,
              l.partitioning?.scheme ?? l.partitioningScheme ?? "",
              l.contentType ?? "",
              l.contentEncoding ?? ""
            ])
          ])
        )
      })
    )
).pipe(Command.withDescription("Show a catalog and its layers."))

const layersList = Command.make(
  "list",
  { ...globalOptions, json, catalog },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const c = yield* (yield* ConfigApi).getCatalog(yield* Hrn.canonicalCatalog(o.catalog))
        if (wantsJson(o.json)) {
          return yield* Effect.forEach(c.layers, (l) => Console.log(JSON.stringify(l)), { discard: true })
        }
        yield* Console.log(
          table([
            ["LAYER", "TYPE", "PARTITIONING", "CONTENT TYPE"],
            ...c.layers.map((l) => [l.id, l.layerType, l.partitioning?.scheme ?? "", l.contentType ?? ""])
          ])
        )
      })
    )
).pipe(Command.withDescription("List the layers of a catalog."))

const additionalFields = (raw: string) => {
  const fields = raw.split(",").map((f) => f.trim()).filter((f) => f !== "")
  const unknown = fields.find((f) => !(ADDITIONAL_FIELDS as ReadonlyArray<string>).includes(f))
  return unknown === undefined
    ? Effect.succeed(fields as ReadonlyArray<AdditionalField>)
    : Effect.fail(
      new UsageError({
        message: `--additional-fields: unknown field '${unknown}' (known: ${ADDITIONAL_FIELDS.join(", ")}).`
      })
    )
}

/** The layer, and the catalog version to read it at: the one given or the latest (versioned layers only). */
const layerAndVersion = (hrn: string, layerId: string, given: Option.Option<number>) =>
  Effect.gen(function*() {
    const c = yield* (yield* ConfigApi).getCatalog(hrn)
    const l = c.layers.find((x) => x.id === layerId)
    if (l === undefined) {
      return yield* new NotFound({
        what: "layer",
        message: `Catalog ${hrn} has no layer '${layerId}' (its layers: ${
          c.layers.map((x) => x.id).join(", ") || "none"
        }).`
      })
    }
    const version = l.layerType === "versioned"
      ? Option.isSome(given) ? given.value : yield* (yield* MetadataApi).latestVersion(hrn)
      : undefined
    return { layer: l, version }
  })

const partitionsList = Command.make(
  "list",
  {
    ...globalOptions,
    catalog,
    layer,
    version: partitionsVersion,
    part: Options.text("part").pipe(Options.optional, Options.withDescription("A part id from the parts endpoint.")),
    fields: fieldsOption
  },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const fields = yield* additionalFields(o.fields)
        const { version } = yield* layerAndVersion(hrn, o.layer, o.version)
        const metadata = yield* MetadataApi
        yield* metadata.partitions(hrn, o.layer, {
          additionalFields: fields,
          ...(version === undefined ? {} : { version }),
          ...(Option.isSome(o.part) ? { part: o.part.value } : {})
        }).pipe(Stream.runForEach((p) => Console.log(JSON.stringify(p))))
      })
    )
).pipe(Command.withDescription("Stream the partitions of a layer as JSON lines."))

const partitionsGet = Command.make(
  "get",
  {
    ...globalOptions,
    catalog,
    layer,
    partitions: Options.text("partition").pipe(
      Options.repeated,
      Options.withDescription("A partition id (repeat it, or join ids with commas).")
    ),
    version: partitionsVersion,
    fields: fieldsOption
  },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const ids = [...new Set(o.partitions.flatMap((p) => p.split(",")).map((p) => p.trim()).filter((p) => p !== ""))]
        if (ids.length === 0) {
          return yield* new UsageError({
            message: "Give the partitions to read with --partition ID (repeated, or comma-joined)."
          })
        }
        const fields = yield* additionalFields(o.fields)
        const { layer: l, version } = yield* layerAndVersion(hrn, o.layer, o.version)
        const found = yield* (yield* QueryApi).partitionsById(hrn, l.id, ids, {
          additionalFields: fields,
          ...(version === undefined ? {} : { version })
        })
        yield* Effect.forEach(found, (p) => Console.log(JSON.stringify(p)), { discard: true })
        const missing = ids.filter((id) => !found.some((p) => p.partition === id))
        if (missing.length > 0) {
          return yield* new NotFound({
            what: "layer",
            message: `Layer '${l.id}' of ${hrn} has no partition ${missing.map((id) => `'${id}'`).join(", ")}${
              version === undefined ? "" : ` at version ${version}`
            }; check the ids.`
          })
        }
      })
    )
).pipe(Command.withDescription("Read the metadata of partitions by id (query API), one JSON line each."))

const versionsLatest = Command.make(
  "latest",
  { ...globalOptions, catalog },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        yield* Console.log(String(yield* (yield* MetadataApi).latestVersion(yield* Hrn.canonicalCatalog(o.catalog))))
      })
    )
).pipe(Command.withDescription("Print the latest catalog version."))

const versionsMinimum = Command.make(
  "minimum",
  { ...globalOptions, catalog },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        yield* Console.log(String(yield* (yield* MetadataApi).minimumVersion(yield* Hrn.canonicalCatalog(o.catalog))))
      })
    )
).pipe(Command.withDescription("Print the minimum (oldest readable) catalog version."))

const versionsList = Command.make(
  "list",
  { ...globalOptions, json, catalog },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const metadata = yield* MetadataApi
        const latest = yield* metadata.latestVersion(hrn)
        const minimum = yield* metadata.minimumVersion(hrn)
        const versions = metadata.versions(hrn, { startVersion: minimum - 1, endVersion: latest })
        if (wantsJson(o.json)) return yield* versions.pipe(Stream.runForEach((v) => Console.log(JSON.stringify(v))))
        yield* Console.log("VERSION  CREATED")
        yield* versions.pipe(
          Stream.runForEach((v) =>
            Console.log(`${String(v.version).padEnd(7)}  ${new Date(v.timestamp).toISOString()}`)
          )
        )
      })
    )
).pipe(Command.withDescription("List the readable catalog versions with their timestamps."))

const blobGet = Command.make(
  "get",
  {
    ...globalOptions,
    catalog,
    layer,
    handle: Options.text("data-handle").pipe(Options.withDescription("The partition's data handle.")),
    output: Options.file("output").pipe(
      Options.optional,
      Options.withDescription("Write to this file instead of stdout.")
    ),
    volatile: Options.boolean("volatile").pipe(
      Options.withDescription("Read through the volatile-blob API (volatile layers).")
    )
  },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        const api = o.volatile ? yield* VolatileBlobApi : yield* BlobApi
        const bytes = yield* api.get(hrn, o.layer, o.handle)
        if (Option.isSome(o.output)) {
          const file = o.output.value
          yield* Effect.try({ try: () => fs.writeFileSync(file, bytes), catch: (e) => fromCause(file, "write", e) })
        } else yield* Effect.async<void>((resume) => void process.stdout.write(bytes, () => resume(Effect.void)))
      })
    )
).pipe(Command.withDescription("Download one blob by its data handle."))

const lookup = Command.make(
  "lookup",
  { ...globalOptions, json, catalog: catalog.pipe(Options.optional) },
  (o) =>
    withClient(
      o,
      Option.getOrUndefined(o.catalog),
      Effect.gen(function*() {
        const hrn = Option.isSome(o.catalog) ? yield* Hrn.canonicalCatalog(o.catalog.value) : undefined
        const entries = yield* (yield* Lookup).apis(hrn, Option.getOrUndefined(o.region))
        if (wantsJson(o.json)) return yield* Console.log(JSON.stringify(entries, null, 2))
        yield* Console.log(
          table([["API", "VERSION", "BASE URL"], ...entries.map((e) => [e.api, e.version, e.baseURL])])
        )
      })
    )
).pipe(Command.withDescription("Show the API base URLs the lookup service returns (platform, or for a catalog)."))

export const inspectCommands = [
  Command.make("catalogs").pipe(
    Command.withDescription("Inspect and manage catalogs."),
    Command.withSubcommands([catalogsList, catalogsGet, ...catalogAdminCommands])
  ),
  Command.make("layers").pipe(
    Command.withDescription("Inspect and delete layers."),
    Command.withSubcommands([layersList, ...layerAdminCommands])
  ),
  Command.make("partitions").pipe(
    Command.withDescription("Inspect partition metadata."),
    Command.withSubcommands([partitionsList, partitionsGet])
  ),
  Command.make("versions").pipe(
    Command.withDescription("Inspect catalog versions."),
    Command.withSubcommands([versionsLatest, versionsMinimum, versionsList])
  ),
  Command.make("blob").pipe(Command.withDescription("Read blobs."), Command.withSubcommands([blobGet])),
  lookup
] as const
