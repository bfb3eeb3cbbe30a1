import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { ArtifactApi } from "../client/ArtifactApi.ts"
import { mainMessageOf, readBundle } from "../decode/Bundle.ts"
import {
  formatCoordinates,
  parseCoordinates,
  SCHEMA_BUNDLE_VARIANT,
  type SchemaInfo,
  variantUrl
} from "../domain/Artifact.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { globalOptions, withClient } from "./common.ts"
import { wantsJson } from "./render.ts"

/**
 * `schemas publish|get|list`: schemas in the artifact API. Publishing registers the bundle's artifact
 * (`<artifactId>_ds` in the schema's group), uploads the bundle as `<artifactId>_ds-<version>.zip`, and
 * creates the schema with that file as its `ds` variant.
 */

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))
const schema = Options.text("schema").pipe(
  Options.withDescription("Schema HRN, hrn:<partition>:schema:::<groupId>:<artifactId>:<version>.")
)

const schemaCoordinates = (raw: string) =>
  Either.match(parseCoordinates(raw, "schema"), {
    onLeft: (e) => Effect.fail(new UsageError({ message: `--schema: ${e.message}` })),
    onRight: Effect.succeed
  })

const readFile = (file: string, flag: string) =>
  Effect.try({
    try: () => new Uint8Array(fs.readFileSync(file)),
    catch: (e) =>
      new UsageError({ message: `${flag} ${file}: cannot read it (${e instanceof Error ? e.message : String(e)}).` })
  })

/** The bundle's main message, or a usage error saying what is wrong with the file. */
const checkBundle = (bytes: Uint8Array, what: string, consequence: string) =>
  Effect.try({
    try: () => mainMessageOf(readBundle(bytes, what)).fullName.slice(1),
    catch: (e) =>
      new UsageError({
        message: `${what} is not a usable schema bundle: ${e instanceof Error ? e.message : String(e)}. ${consequence}`
      })
  })

const publish = Command.make(
  "publish",
  {
    ...globalOptions,
    json,
    schema,
    file: Options.file("file").pipe(
      Options.withDescription(
        "The schema bundle: a ZIP with the .proto files, META-INF/layer.fds and META-INF/layer.manifest.json."
      )
    ),
    name: Options.text("name").pipe(
      Options.optional,
      Options.withDescription("Schema name (default: the artifact id).")
    ),
    summary: Options.text("summary").pipe(Options.optional, Options.withDescription("One-line summary."))
  },
  (o) =>
    withClient(
      o,
      o.schema,
      Effect.gen(function*() {
        const coordinates = yield* schemaCoordinates(o.schema)
        const bytes = yield* readFile(o.file, "--file")
        const main = yield* checkBundle(bytes, `--file ${o.file}`, "Nothing was uploaded.")
        const api = yield* ArtifactApi
        const artifact = { ...coordinates, artifactId: `${coordinates.artifactId}_${SCHEMA_BUNDLE_VARIANT}` }
        const artifactHrn = formatCoordinates(artifact, "artifact")
        const fileName = `${artifact.artifactId}-${artifact.version}.zip`
        yield* api.registerArtifact(artifact.groupId, artifact.artifactId)
        yield* api.putArtifactFile(artifactHrn, fileName, bytes, "application/zip")
        const details = yield* api.createSchema(formatCoordinates(coordinates, "schema"), {
          ...(Option.isSome(o.name) ? { name: o.name.value } : {}),
          ...(Option.isSome(o.summary) ? { summary: o.summary.value } : {}),
          variants: [{ id: SCHEMA_BUNDLE_VARIANT, url: variantUrl(artifactHrn, fileName) }]
        })
        yield* Console.log(
          o.json
            ? JSON.stringify(details, null, 2)
            : `Published ${details.schema.hrn} (main message ${main}); its bundle is ${artifactHrn}/${fileName}.`
        )
      })
    )
).pipe(
  Command.withDescription(
    "Publish a schema bundle: register its artifact, upload the bundle, create the schema with its ds variant."
  )
)

const describe = (s: SchemaInfo) => `${s.hrn}  ${s.name}${s.summary === undefined ? "" : `  ${s.summary}`}`

const get = Command.make(
  "get",
  {
    ...globalOptions,
    json,
    schema,
    bundleOut: Options.file("bundle-out").pipe(
      Options.optional,
      Options.withDescription("Also download the schema bundle (variant ds) to this file.")
    )
  },
  (o) =>
    withClient(
      o,
      o.schema,
      Effect.gen(function*() {
        const hrn = formatCoordinates(yield* schemaCoordinates(o.schema), "schema")
        const api = yield* ArtifactApi
        const details = yield* api.getSchema(hrn)
        if (o.json) yield* Console.log(JSON.stringify(details, null, 2))
        else {
          yield* Console.log(describe(details.schema))
          for (const v of details.variants) yield* Console.log(`  variant ${v.id}: ${v.url}`)
        }
        if (Option.isSome(o.bundleOut)) {
          const out = o.bundleOut.value
          const bytes = yield* api.getSchemaBundle(hrn)
          const main = yield* checkBundle(bytes, `The bundle of ${hrn}`, "Nothing was written.")
          yield* Effect.try({
            try: () => {
              fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true })
              fs.writeFileSync(out, bytes)
            },
            catch: (e) =>
              new UsageError({
                message: `--bundle-out: cannot write ${out} (${e instanceof Error ? e.message : String(e)}).`
              })
          })
          if (!o.json) yield* Console.log(`Bundle (main message ${main}) written to ${out}.`)
        }
      })
    )
).pipe(Command.withDescription("Show a schema and its variants; --bundle-out downloads its schema bundle."))

const list = Command.make("list", { ...globalOptions, json }, (o) =>
  withClient(
    o,
    undefined,
    Effect.gen(function*() {
      const items = yield* (yield* ArtifactApi).listSchemas()
      if (wantsJson(o.json)) {
        return yield* Effect.forEach(items, (s) => Console.log(JSON.stringify(s)), { discard: true })
      }
      yield* Console.log(
        items.length === 0 ? "No schemas visible to these credentials." : items.map(describe).join("\n")
      )
    })
  )).pipe(Command.withDescription("List the schemas these credentials can read."))

export const schemasCommand = Command.make("schemas").pipe(
  Command.withDescription("Publish and inspect schemas (the artifact API)."),
  Command.withSubcommands([publish, get, list])
)
