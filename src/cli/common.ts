import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Struct from "effect/Struct"
import * as fs from "node:fs"
import * as path from "node:path"
import * as DataClient from "../client/DataClient.ts"
import type { CredentialsError } from "../client/Errors.ts"
import type { RetryPolicyShape } from "../client/Retry.ts"
import { DurationString } from "../domain/DurationString.ts"
import { UsageError } from "../domain/ExitCode.ts"
import * as Hrn from "../domain/Hrn.ts"
import { ExportSettings, PositiveInt } from "../export/Settings.ts"
import { destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import { loggerLayer } from "./Logging.ts"

const invalidValue = (sentence: string) => ValidationError.invalidValue(HelpDoc.p(sentence))

/**
 * An integer flag whose error names the flag (@effect/cli's own says only "'x' is not a integer").
 * Ranges are checked by the commands.
 */
export const integerOption = (name: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("integer"),
    Options.mapEffect((raw) =>
      /^[-+]?\d+$/.test(raw.trim())
        ? Effect.succeed(Number(raw))
        : Effect.fail(invalidValue(`--${name} must be an integer, got '${raw}'.`))
    )
  )

/** A flag taking one of `choices`, whose error names the flag and the choices. */
export const choiceOption = <const A extends string>(name: string, choices: ReadonlyArray<A>) =>
  Options.text(name).pipe(
    Options.withPseudoName(choices.join("|")),
    Options.mapEffect((raw) =>
      (choices as ReadonlyArray<string>).includes(raw)
        ? Effect.succeed(raw as A)
        : Effect.fail(invalidValue(`--${name} must be one of ${choices.join(", ")}, got '${raw}'.`))
    )
  )

/**
 * A duration flag (`90s`, `10m`, `1h`, `30d`, `"7 days"`: the DurationString schema job configs use
 * too); `valid` bounds it, and the error names the flag and what it `takes`.
 */
export const durationOption = (name: string, takes: string, valid: (d: Duration.Duration) => boolean = () => true) =>
  Options.text(name).pipe(
    Options.withPseudoName("DURATION"),
    Options.withSchema(DurationString.pipe(
      Schema.filter(valid),
      Schema.annotations({
        message: (issue) => ({
          message: `--${name} takes ${takes}, got ${JSON.stringify(issue.actual)}.`,
          override: true
        })
      })
    ))
  )

/**
 * How long transient failures (429, 5xx, cut connections) are retried, for commands that move data
 * (export, backfill, run). Each request retries until one of the two is spent, then the run stops
 * with exit code 5: safe to run again.
 */
export const retryOptions = {
  retryBudget: durationOption(
    "retry-budget",
    "a positive duration such as 90s, 10m or 1h",
    Duration.greaterThan(Duration.zero)
  ).pipe(
    Options.optional,
    Options.withDescription(
      "Longest time one request keeps retrying transient failures (429, 5xx, cut connections), Retry-After waits included; then the run stops with exit code 5. Default 10m."
    )
  ),
  maxRetries: integerOption("max-retries").pipe(
    Options.mapEffect((n) =>
      n >= 0 ? Effect.succeed(n) : Effect.fail(invalidValue(`--max-retries must be 0 or more, got ${n}.`))
    ),
    Options.optional,
    Options.withDescription("Retries of one request before the run stops with exit code 5. Default 20.")
  )
}

export interface RetryFlags {
  readonly retryBudget?: Option.Option<Duration.Duration>
  readonly maxRetries?: Option.Option<number>
}

/** The retry policy the flags ask for (the client's defaults for what they leave out). */
export const retryPolicyOf = (flags: RetryFlags): Partial<RetryPolicyShape> => ({
  ...(flags.retryBudget !== undefined && Option.isSome(flags.retryBudget)
    ? { maxElapsed: flags.retryBudget.value }
    : {}),
  ...(flags.maxRetries !== undefined && Option.isSome(flags.maxRetries) ? { maxRetries: flags.maxRetries.value } : {})
})

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

/** Off switch of the failover of multi-region catalogs, for the commands that export (export, run). */
export const noFailover = Options.boolean("no-failover").pipe(
  Options.withDescription(
    "Multi-region catalogs: do not go on in the other region when the selected one keeps failing (5xx or no connection, 5 times in a row for one request); retry there until the retry budget is spent."
  )
)

/** `--json` of the commands that run a job (export, backfill, run, retention): the summary on stdout as JSON. */
export const summaryJson = Options.boolean("json").pipe(
  Options.withDescription("Print the summary on stdout as one JSON object (logs and progress stay on stderr).")
)

/**
 * What `--help` says of the flag of each export setting, in the order it lists them. The flag is
 * named after the setting (`listConcurrency`: `--list-concurrency`) and parses as the setting's
 * schema says (ExportSettings: its type and default); a setting without a line here does not compile.
 */
const SETTING_FLAGS: {
  readonly [K in keyof typeof ExportSettings.fields]: { readonly description: string; readonly pseudoName?: string }
} = {
  out: {
    description:
      "Output directory or object store (s3://bucket/prefix); files go to OUT/<catalog-id>/<layer-id>/version=<V>/."
  },
  format: { description: "parquet, arrow or both." },
  compression: { description: "Parquet page compression." },
  concurrency: { description: "Blob downloads in flight at once." },
  listConcurrency: { description: "Metadata parts listed and written at once." },
  parts: { description: "Metadata parts to ask for (the unit of parallel listing and of resume)." },
  maxFileBytes: { description: "Start a new file once one reaches this size (default 256 MiB)." },
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
  return flag.pipe(
    (f) => (pseudoName === undefined ? f : Options.withPseudoName(f, pseudoName)),
    (f) => (optional ? Options.optional(f) : f),
    Options.withDescription(description)
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

/** Options every command that talks to a catalog service takes (DESIGN.md "CLI"). */
export const globalOptions = {
  lookupUrl: Options.text("lookup-url").pipe(
    Options.withFallbackConfig(Config.nonEmptyString("CATALOG_LOOKUP_URL")),
    Options.optional,
    Options.withDescription(
      "Lookup API base URL (env CATALOG_LOOKUP_URL). Default: derived from the catalog HRN's partition (hrn:here → the HERE platform, hrn:local → http://localhost:31005/lookup/v1)."
    )
  ),
  // Text, not Options.file: the credentials loader explains a missing, unreadable or directory path (exit 3).
  credentials: Options.text("credentials").pipe(
    Options.withPseudoName("FILE"),
    Options.optional,
    Options.withDescription(
      "credentials.properties (env HERE_CREDENTIALS_FILE, default ~/.here/credentials.properties)."
    )
  ),
  region: Options.text("region").pipe(
    Options.optional,
    Options.withDescription(
      "Region of a multi-region catalog to read from (lookup's region, e.g. us-oregon); default: the catalog's primary region."
    )
  ),
  logFormat: choiceOption("log-format", ["text", "json"]).pipe(
    Options.optional,
    Options.withDescription("Progress and log lines: text (the default on a terminal) or json (the default otherwise).")
  ),
  quiet: Options.boolean("quiet").pipe(Options.withDescription("Print only errors and the final result."))
}

export interface GlobalOptions extends RetryFlags {
  readonly lookupUrl: Option.Option<string>
  readonly credentials: Option.Option<string>
  readonly region: Option.Option<string>
  readonly logFormat: Option.Option<"text" | "json">
  readonly quiet: boolean
}

/** Lookup URLs per HRN partition, as the HERE SDKs know them (facts §1). */
const LOOKUP_BY_PARTITION: Record<string, string> = {
  here: "https://api-lookup.data.api.platform.here.com/lookup/v1",
  "here-dev": "https://api-lookup.data.api.platform.sit.here.com/lookup/v1",
  "here-cn": "https://api-lookup.data.api.platform.hereolp.cn/lookup/v1",
  "here-cn-dev": "https://api-lookup.data.api.platform.in.hereolp.cn/lookup/v1",
  local: "http://localhost:31005/lookup/v1"
}

/** The lookup URL given (flag, `CATALOG_LOOKUP_URL` or job config), else the one the catalog's HRN partition implies. */
export const lookupUrlFor = (given: string | undefined, catalog: string | undefined): string => {
  if (given !== undefined) return given
  const partition = catalog === undefined ? undefined : Either.getOrUndefined(Hrn.parse(catalog))?.partition
  return LOOKUP_BY_PARTITION[partition ?? "here"] ?? LOOKUP_BY_PARTITION.here!
}

/** How a job config reaches the service (lookupUrl, credentials, region); flags override it. */
export interface Connection {
  readonly lookupUrl?: string | undefined
  readonly credentials?: string | undefined
  readonly region?: string | undefined
}

/**
 * Where flags and a job config meet, field by field: the flag (or its environment variable, read by
 * Options.withFallbackConfig), else the job config's value; the defaults come after (`clientFor`).
 */
export const connectionOf = (
  flags: GlobalOptions,
  file: Connection = {}
): { readonly [K in keyof Connection]-?: Connection[K] } => ({
  lookupUrl: Option.getOrElse(flags.lookupUrl, () => file.lookupUrl),
  credentials: Option.getOrElse(flags.credentials, () => file.credentials),
  region: Option.getOrElse(flags.region, () => file.region)
})

export interface ClientSettings {
  readonly lookupUrl: string
  readonly credentials: string | undefined
  readonly concurrency: number
  readonly retry?: Partial<RetryPolicyShape>
  /** Lookup's `region` for every catalog-bound API. */
  readonly region?: string | undefined
}

const isHttpUrl = (url: string) => /^https?:\/\/[^\s]+$/i.test(url) && URL.canParse(url)

/** The Data API client for a command; a lookup URL that is no http(s) URL is bad input (exit 2), not a network failure. */
export const clientLayer = (
  settings: ClientSettings
): Layer.Layer<DataClient.DataClient, CredentialsError | UsageError> =>
  isHttpUrl(settings.lookupUrl)
    ? DataClient.layer({
      lookupUrl: settings.lookupUrl,
      ...(settings.credentials === undefined ? {} : { credentialsPath: settings.credentials }),
      concurrency: settings.concurrency,
      ...(settings.retry === undefined ? {} : { retry: settings.retry }),
      ...(settings.region === undefined ? {} : { region: settings.region })
    })
    : Layer.fail(
      new UsageError({
        message:
          `The lookup URL '${settings.lookupUrl}' is not an http(s) URL; check --lookup-url, CATALOG_LOOKUP_URL or the job config's lookupUrl.`
      })
    )

/** The Data API client for a catalog (its HRN implies the lookup service unless one is given). */
export const clientFor = (
  connection: Connection,
  catalog: string | undefined,
  options: { readonly concurrency: number; readonly retry?: Partial<RetryPolicyShape> }
) =>
  clientLayer({
    lookupUrl: lookupUrlFor(connection.lookupUrl, catalog),
    credentials: connection.credentials,
    concurrency: options.concurrency,
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    region: connection.region
  })

/** Runs a command's effect with the client (lookup derived from the catalog HRN unless given) and the logger. */
export const withClient = <A, E, R>(o: GlobalOptions, catalogHrn: string | undefined, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provide(clientFor(connectionOf(o), catalogHrn, { concurrency: 4, retry: retryPolicyOf(o) })),
    Effect.provide(loggerLayer(o))
  )
