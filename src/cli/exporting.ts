import * as Options from "@effect/cli/Options"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Struct from "effect/Struct"
import * as fs from "node:fs"
import * as path from "node:path"
import { UsageError } from "../domain/ExitCode.ts"
import { defaults, ExportSettings, PositiveInt } from "../export/Settings.ts"
import { destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import { choiceOption, durationOption, integerOption, retryOptions } from "./common.ts"

/**
 * What the commands that export share (export, plan, commit, backfill, run, demo): the flags of the
 * export settings, derived from their schema, and the checks of what the parser cannot see.
 * Commands that only read a catalog do not load it.
 */

/** How often progress is reported where it is not drawn on a terminal (src/cli/progress.ts). */
export const progressOptions = {
  progressInterval: durationOption(
    "progress-interval",
    "a duration of 100ms or more such as 10s or 1m",
    Duration.greaterThanOrEqualTo(Duration.millis(100))
  ).pipe(
    Options.optional,
    Options.withDescription("How often a JSON progress line is written when stderr is not a terminal (default 10s).")
  )
}

export interface ProgressFlags {
  readonly progressInterval?: Option.Option<Duration.Duration>
}

/**
 * What `--help` says of the flag of each export setting, in the order it lists them. The flag is
 * named after the setting (`listConcurrency`: `--list-concurrency`) and parses as the setting's
 * schema says (ExportSettings: its type and default); a setting without a line here does not compile.
 */
const SETTING_FLAGS: {
  readonly [K in keyof typeof ExportSettings.fields]: { readonly description: string; readonly pseudoName?: string }
} = {
  out: {
    pseudoName: "DEST",
    description:
      "Output directory or object store (s3://bucket/prefix); files go to OUT/<catalog-id>/<layer-id>/version=<V>/."
  },
  format: {
    description:
      "parquet, arrow or both; iceberg: one Apache Iceberg table per layer at OUT/<catalog-id>/<layer-id>/, a snapshot tagged v<N> per version (docs/iceberg-tables.md)."
  },
  compression: { description: "Parquet page compression." },
  concurrency: {
    description:
      "Blob downloads in flight at once, pinned. Without it the export finds the number itself: it grows while the service answers as fast and backs off when it throttles (429, 503)."
  },
  maxConcurrency: { description: "The most blob downloads in flight the export may find." },
  bufferBytes: {
    description:
      "Blob bytes held in memory at once: downloads in flight, rows waiting to be written (default: a quarter of the memory available, at most 256 MiB). A larger blob is fetched alone."
  },
  listConcurrency: { description: "Metadata parts listed at once." },
  parts: { description: "Metadata parts to ask for (the unit of parallel listing and of resume)." },
  maxFileBytes: {
    description: "Start a new file once one reaches this size (default 256 MiB); parts share files up to it."
  },
  decode: {
    description:
      "Columns instead of blobs: auto decodes protobuf with the layer's schema, GeoJSON to GeoParquet and JSON by content type; none (the default) writes the raw bytes."
  },
  schemaBundle: {
    pseudoName: "FILE.zip",
    description: "Decode protobuf with this schema bundle instead of the layer's schema."
  },
  explode: { pseudoName: "FIELD", description: "Protobuf: one row per element of this repeated top-level field." },
  onDecodeError: {
    description: "A blob that does not decode: fail (exit 6), skip it, or write it raw (data and decode_error columns)."
  }
}

type SettingFields = typeof ExportSettings.fields
/** The schema of a setting (an optional one's, inside its property signature). */
type SchemaOf<F> = F extends { readonly from: infer S } ? S : F
/** What a setting's flag gives: its value, or none for a setting with a default or none needed. */
export type SettingFlags = {
  readonly [K in keyof SettingFields]: Schema.Schema.Type<SchemaOf<SettingFields[K]>> extends infer A
    ? SettingFields[K] extends Schema.PropertySignature.All ? Option.Option<A> : A
    : never
}

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

/** A setting's schema (inside the property signature of one that may be left out). */
const settingSchema = (key: keyof SettingFields) => {
  const field: Schema.Struct.Field = ExportSettings.fields[key]
  return Schema.isPropertySignature(field)
    ? { optional: true, schema: "from" in field ? field.from : undefined }
    : { optional: false, schema: field }
}

/** A setting's flag: an integer, one of the schema's literals, or text, as the setting's schema says. */
const settingFlag = (key: keyof SettingFields): Options.Options<unknown> => {
  const { optional, schema } = settingSchema(key)
  const name = kebab(key)
  const { description, pseudoName } = SETTING_FLAGS[key]
  const flag: Options.Options<unknown> = schema === PositiveInt
    ? integerOption(name)
    : Predicate.hasProperty(schema, "literals")
    ? choiceOption(name, schema.literals as ReadonlyArray<string>)
    : Options.text(name)
  const fallback: unknown = (defaults as Record<string, unknown>)[key]
  return flag.pipe(
    (f) => (pseudoName === undefined ? f : Options.withPseudoName(f, pseudoName)),
    (f) => (optional ? Options.optional(f) : f),
    Options.withDescription(description),
    (f) => (fallback === undefined ? f : Options.withDescription(f, `Default: ${String(fallback)}.`))
  )
}

/** The flags of the export settings (export, backfill), derived from ExportSettings. */
export const settingFlags = Object.fromEntries(
  Struct.keys(SETTING_FLAGS).map((key) => [key, settingFlag(key)])
) as { readonly [K in keyof SettingFlags]: Options.Options<SettingFlags[K]> }

/**
 * The export settings the flags ask for, with the schema's defaults for those not given; a value out
 * of its range (the parser checked the type) is bad input naming the flag.
 */
export const checkSettings = (flags: SettingFlags): Effect.Effect<ExportSettings, UsageError> =>
  Effect.gen(function*() {
    const given = Object.fromEntries(
      Struct.keys(SETTING_FLAGS).flatMap((key) => {
        const value: unknown = flags[key]
        return Option.isOption(value)
          ? Option.match(value, { onNone: () => [], onSome: (v) => [[key, v]] })
          : [[key, value]]
      })
    )
    const settings = yield* Schema.decodeUnknown(ExportSettings)(given).pipe(
      Effect.mapError((e) => {
        const key = ParseResult.ArrayFormatter.formatErrorSync(e)[0]?.path[0] as keyof SettingFields
        return new UsageError({
          message: settingSchema(key).schema === PositiveInt
            ? `--${kebab(key)} must be a positive integer, got ${given[key]}.`
            : `--${kebab(key)}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`
        })
      })
    )
    if (settings.decode === "none" && (settings.explode !== undefined || settings.schemaBundle !== undefined)) {
      return yield* new UsageError({
        message: `--${
          settings.explode !== undefined ? "explode" : "schema-bundle"
        } decodes protobuf: add --decode auto or --decode protobuf.`
      })
    }
    return settings
  })

export const positive = (name: string) => (value: number) =>
  value >= 1
    ? Effect.succeed(value)
    : Effect.fail(new UsageError({ message: `--${name} must be a positive integer, got ${value}.` }))

/**
 * Refuses an output path that is a file or cannot be written, before any data is fetched. Creates
 * nothing: a run refused later (unknown catalog, bad credentials) leaves no trace; the export
 * creates the directories it writes to. An object store (`s3://bucket/prefix`) is asked to list the
 * prefix: an unknown bucket, refused credentials or a missing permission stop the run here.
 */
export const checkOutputDir = (out: string) =>
  isObjectStore(out) ? Effect.asVoid(Effect.flatMap(destination(out), (dest) => dest.list(""))) : checkLocalDir(out)

const checkLocalDir = (out: string) =>
  Effect.try({
    try: () => {
      let existing = path.resolve(out)
      while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing)
      if (!fs.statSync(existing).isDirectory()) {
        throw Object.assign(new Error(`${existing} is a file`), {
          code: existing === path.resolve(out) ? "EEXIST" : "ENOTDIR",
          file: existing
        })
      }
      fs.accessSync(existing, fs.constants.W_OK)
    },
    catch: (e) => {
      const code = (e as NodeJS.ErrnoException).code
      const reason = code === "EEXIST"
        ? "is a file, not a directory"
        : code === "ENOTDIR"
        ? `cannot be created: ${(e as { file?: string }).file} is a file`
        : code === "EACCES" || code === "EPERM" || code === "EROFS"
        ? `is not writable (${code})`
        : `cannot be created (${code ?? String(e)})`
      return new UsageError({ message: `Output directory ${out} ${reason}; choose a writable directory with --out.` })
    }
  })

export const versionArg = (raw: string) =>
  raw === "latest"
    ? Effect.succeed("latest" as const)
    : /^\d+$/.test(raw)
    ? Effect.succeed(Number(raw))
    : Effect.fail(new UsageError({ message: `--version must be a non-negative integer or 'latest', got '${raw}'.` }))

/** The flags of export and backfill: the export settings, how long to retry, progress. */
export const writeOptions = { ...settingFlags, ...retryOptions, ...progressOptions }
