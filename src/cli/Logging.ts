import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"

const defaultLogFormat = (): "text" | "json" => (process.stderr.isTTY ? "text" : "json")

const stderrLogger = (format: "text" | "json") =>
  Logger.withConsoleError(format === "json" ? Logger.jsonLogger : Logger.logfmtLogger)

/** The logger before a command has read its flags (replaced by `loggerLayer`). */
const initialLogger = stderrLogger(defaultLogFormat())

export const defaultLoggerLayer = Layer.merge(
  Logger.replace(Logger.defaultLogger, initialLogger),
  Logger.minimumLogLevel(LogLevel.Info)
)

/**
 * Logs go to stderr once, as text or JSON lines; stdout carries only results (the summary), so a
 * cron job can keep it, and a `--json` summary stays parseable.
 */
export const loggerLayer = (
  global: { readonly logFormat: Option.Option<"text" | "json">; readonly quiet: boolean }
) =>
  Layer.mergeAll(
    Logger.remove(Logger.defaultLogger),
    Logger.replace(initialLogger, stderrLogger(Option.getOrElse(global.logFormat, defaultLogFormat))),
    Logger.minimumLogLevel(global.quiet ? LogLevel.Error : LogLevel.Info)
  )

const ANSI = /\x1b\[[0-9;]*m/g

/** @effect/cli colours help and parse errors; a file or a pipe gets them as plain text. */
export const plainWhenPiped = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.console, (console) => {
    // Help texts end in a newline of their own; Console.log adds another.
    const plain = (tty: boolean | undefined) => (args: ReadonlyArray<unknown>) =>
      args.map((a) => (typeof a === "string" ? (tty ? a : a.replace(ANSI, "")).replace(/\n$/, "") : a))
    const out = plain(process.stdout.isTTY)
    const err = plain(process.stderr.isTTY)
    return Effect.withConsole(effect, {
      ...console,
      log: (...args) => console.log(...out(args)),
      error: (...args) => console.error(...err(args))
    })
  })
