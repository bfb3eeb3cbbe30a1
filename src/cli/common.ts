import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as DataClient from "../client/DataClient.ts"
import type { CredentialsError } from "../client/Errors.ts"
import type { RetryPolicyShape } from "../client/Retry.ts"
import { DurationString } from "../domain/DurationString.ts"
import { UsageError } from "../domain/ExitCode.ts"
import * as Hrn from "../domain/Hrn.ts"
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

/** A lookup URL as given, and where it came from: what an error about it names. */
export interface GivenLookupUrl {
  readonly url: string
  /** "came from --lookup-url", "came from CATALOG_LOOKUP_URL", ... */
  readonly from: string
}

/** Options every command that talks to a catalog service takes (DESIGN.md "CLI"). */
export const globalOptions = {
  lookupUrl: Options.text("lookup-url").pipe(
    Options.withPseudoName("URL"),
    Options.map((url): GivenLookupUrl => ({ url, from: "came from --lookup-url" })),
    Options.withFallbackConfig(
      Config.map(
        Config.nonEmptyString("CATALOG_LOOKUP_URL"),
        (url): GivenLookupUrl => ({ url, from: "came from CATALOG_LOOKUP_URL" })
      )
    ),
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
  readonly lookupUrl: Option.Option<GivenLookupUrl>
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

const partitionOf = (catalog: string | undefined) =>
  (catalog === undefined ? undefined : Either.getOrUndefined(Hrn.parse(catalog))?.partition) ?? "here"

/** The lookup URL given (flag, `CATALOG_LOOKUP_URL` or job config), else the one the catalog's HRN partition implies. */
export const lookupUrlFor = (given: string | undefined, catalog: string | undefined): string =>
  given ?? LOOKUP_BY_PARTITION[partitionOf(catalog)] ?? LOOKUP_BY_PARTITION.here!

/** How a job config reaches the service (lookupUrl, credentials, region); flags override it. */
export interface Connection {
  readonly lookupUrl?: string | undefined
  readonly credentials?: string | undefined
  readonly region?: string | undefined
}

/** A connection decided: the flags over a job config, and where the lookup URL came from, if one was given. */
export interface ResolvedConnection extends Required<Connection> {
  readonly lookupFrom: string | undefined
}

/**
 * Where flags and a job config meet, field by field: the flag (or its environment variable, read by
 * Options.withFallbackConfig), else the job config's value; the defaults come after (`clientFor`).
 */
export const connectionOf = (flags: GlobalOptions, file: Connection = {}): ResolvedConnection => ({
  lookupUrl: Option.match(flags.lookupUrl, { onNone: () => file.lookupUrl, onSome: (given) => given.url }),
  lookupFrom: Option.match(flags.lookupUrl, {
    onNone: () => (file.lookupUrl === undefined ? undefined : `came from the job config's "lookupUrl"`),
    onSome: (given) => given.from
  }),
  credentials: Option.getOrElse(flags.credentials, () => file.credentials),
  region: Option.getOrElse(flags.region, () => file.region)
})

type Given = Connection & { readonly lookupFrom?: string | undefined }

/** Where a client's lookup URL came from, for the errors that say it is wrong (`lookupUrl` is the one used). */
export const lookupFromOf = (connection: Given, lookupUrl: string): string => {
  if (connection.lookupUrl !== undefined) return connection.lookupFrom ?? "was given"
  const partition = Object.keys(LOOKUP_BY_PARTITION).find((p) => LOOKUP_BY_PARTITION[p] === lookupUrl) ?? "here"
  return `is the default for hrn:${partition} catalogs, as none was given`
}

/** The lookup URL of a catalog's client and where it came from (the HRN implies one when none is given). */
export const lookupOf = (connection: Given, catalog: string | undefined) => {
  const lookupUrl = lookupUrlFor(connection.lookupUrl, catalog)
  return { lookupUrl, lookupFrom: lookupFromOf(connection, lookupUrl) }
}

export interface ClientSettings {
  readonly lookupUrl: string
  /** Where the lookup URL came from, for the errors that say it is wrong. */
  readonly lookupFrom?: string | undefined
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
      ...(settings.lookupFrom === undefined ? {} : { lookupFrom: settings.lookupFrom }),
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
  connection: Given,
  catalog: string | undefined,
  options: { readonly concurrency: number; readonly retry?: Partial<RetryPolicyShape> }
) =>
  clientLayer({
    ...lookupOf(connection, catalog),
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
