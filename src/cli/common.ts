import * as Options from "@effect/cli/Options"
import { Either, Layer, Logger, LogLevel, Option } from "effect"
import * as DataClient from "../client/DataClient.ts"
import * as Hrn from "../domain/Hrn.ts"

/** Options every command that talks to a catalog service takes (DESIGN.md "CLI"). */
export const globalOptions = {
  lookupUrl: Options.text("lookup-url").pipe(
    Options.optional,
    Options.withDescription("Lookup API base URL (env CATALOG_LOOKUP_URL). Default: derived from the catalog HRN's partition (hrn:here → the HERE platform, hrn:local → http://localhost:31005/lookup/v1).")
  ),
  credentials: Options.file("credentials").pipe(
    Options.optional,
    Options.withDescription("credentials.properties (env HERE_CREDENTIALS_FILE, default ~/.here/credentials.properties).")
  ),
  logFormat: Options.choice("log-format", ["text", "json"]).pipe(
    Options.optional,
    Options.withDescription("Progress and log lines: text (the default on a terminal) or json (the default otherwise).")
  ),
  quiet: Options.boolean("quiet").pipe(Options.withDescription("Print only errors and the final result."))
}

export interface GlobalOptions {
  readonly lookupUrl: Option.Option<string>
  readonly credentials: Option.Option<string>
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

/** The flag, else `CATALOG_LOOKUP_URL`, else the job config's, else the one the catalog's HRN partition implies. */
export const resolveLookupUrl = (flag: Option.Option<string>, fromConfig: string | undefined, catalog: string | undefined): string => {
  if (Option.isSome(flag)) return flag.value
  const env = process.env.CATALOG_LOOKUP_URL
  if (env !== undefined && env !== "") return env
  if (fromConfig !== undefined) return fromConfig
  const partition = catalog === undefined ? undefined : Either.getOrUndefined(Hrn.parse(catalog))?.partition
  return LOOKUP_BY_PARTITION[partition ?? "here"] ?? LOOKUP_BY_PARTITION.here!
}

export const progressStyle = (global: GlobalOptions): "tty" | "json" | "none" => {
  if (global.quiet) return "none"
  const format = Option.getOrElse(global.logFormat, () => (process.stderr.isTTY ? "text" : "json"))
  return format === "text" ? (process.stderr.isTTY ? "tty" : "none") : "json"
}

/** Logs go to stderr (stdout carries results), as text or JSON lines. */
export const loggerLayer = (global: GlobalOptions) => {
  const format = Option.getOrElse(global.logFormat, () => (process.stderr.isTTY ? "text" : "json"))
  const logger = format === "json" ? Logger.jsonLogger : Logger.logfmtLogger
  return Layer.merge(
    Logger.replace(Logger.defaultLogger, Logger.withConsoleError(logger)),
    Logger.minimumLogLevel(global.quiet ? LogLevel.Error : LogLevel.Info)
  )
}

export interface ClientSettings {
  readonly lookupUrl: string
  readonly credentials: string | undefined
  readonly concurrency: number
}

export const clientLayer = (settings: ClientSettings) =>
  DataClient.layer({
    lookupUrl: settings.lookupUrl,
    ...(settings.credentials === undefined ? {} : { credentialsPath: settings.credentials }),
    concurrency: settings.concurrency
  })
