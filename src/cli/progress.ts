import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { Progress, type ProgressStyle, type Snapshot, type Tracked } from "../export/Progress.ts"
import type { GlobalOptions } from "./common.ts"
import type { ProgressFlags } from "./exporting.ts"

/**
 * The progress of running exports, on stderr: on a terminal a bar per export redrawn in place (four
 * times a second), otherwise a JSON line per export every `--progress-interval`. Both read the
 * exports' counters on a timer; nothing is done per partition.
 */

export const progressStyle = (global: GlobalOptions): ProgressStyle => {
  if (global.quiet) return "none"
  const format = Option.getOrElse(global.logFormat, () => (process.stderr.isTTY ? "text" : "json"))
  return format === "text" ? (process.stderr.isTTY ? "tty" : "none") : "json"
}

/** The Progress view the flags ask for, for as long as the command runs. */
export const progressLayer = (global: GlobalOptions & ProgressFlags): Layer.Layer<never> => {
  const style = progressStyle(global)
  if (style === "none") return Layer.empty
  if (style === "json") {
    const every = global.progressInterval !== undefined && Option.isSome(global.progressInterval)
      ? global.progressInterval.value
      : Duration.seconds(10)
    return Layer.succeed(Progress, {
      track: (tracked) =>
        Effect.asVoid(Effect.forkScoped(Effect.schedule(
          Effect.sync(() => writeJsonLine(tracked)),
          Schedule.spaced(every)
        )))
    })
  }
  return Layer.scoped(Progress, terminalBoard)
}

const writeJsonLine = (t: Tracked) => {
  const s = t.counters.snapshot()
  const line = {
    event: "progress",
    export: t.label,
    catalog: t.catalog,
    layer: t.layer,
    ...s,
    percent: s.percent === null ? null : Math.floor(s.percent * 10) / 10,
    rate: Math.round(s.rate),
    bytesRate: Math.round(s.bytesRate)
  }
  process.stderr.write(JSON.stringify(line) + "\n")
}

const ERASE_LINE = "\x1b[2K"
const ERASE_DOWN = "\x1b[J"

/**
 * One bar per running export, redrawn in place. Whatever else is written to stderr meanwhile (a log
 * line, a warning) is written above the bars: they are erased first and drawn again after it.
 */
const terminalBoard = Effect.gen(function*() {
  const bars = new Set<Tracked>()
  const stderr = process.stderr
  const write = stderr.write.bind(stderr) as (chunk: string) => boolean
  let drawn = 0
  const erase = () => {
    if (drawn > 0) write(`\r${drawn > 1 ? `\x1b[${drawn - 1}A` : ""}${ERASE_DOWN}`)
    drawn = 0
  }
  const draw = () => {
    erase()
    if (bars.size === 0) return
    // A terminal that does not tell its size (columns 0) gets 120.
    const width = Math.max(40, (stderr.columns || 120) - 1)
    const labelWidth = Math.min(Math.max(...[...bars].map((b) => b.label.length)), Math.floor(width / 3))
    const lines = [...bars].map((b) =>
      fit(barLine(b.label.padEnd(labelWidth).slice(0, labelWidth), b.counters.snapshot()), width)
    )
    write(lines.map((l) => ERASE_LINE + l).join("\n"))
    drawn = lines.length
  }
  const intercepted = ((chunk: unknown, ...rest: Array<unknown>) => {
    const had = drawn > 0
    erase()
    const result = (write as (...args: Array<unknown>) => boolean)(chunk, ...rest)
    if (had) draw()
    return result
  }) as typeof stderr.write
  yield* Effect.acquireRelease(
    Effect.sync(() => {
      stderr.write = intercepted
    }),
    () =>
      Effect.sync(() => {
        erase()
        stderr.write = write as typeof stderr.write
      })
  )
  yield* Effect.forkScoped(Effect.repeat(Effect.sync(draw), Schedule.spaced("250 millis")))
  return {
    track: (tracked: Tracked) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          bars.add(tracked)
          draw()
        }),
        () =>
          Effect.sync(() => {
            bars.delete(tracked)
            draw()
          })
      )
  }
})

const BAR_WIDTH = 20

/** `label ██████░░░░  52% 968/1,860  1.0 MB  484/s  0.5 MB/s  eta 2s  0 retries  256 in flight (limit 256)  3 throttled` */
export const barLine = (label: string, s: Snapshot): string => {
  const filled = s.percent === null ? 0 : Math.round((s.percent / 100) * BAR_WIDTH)
  const bar = "█".repeat(filled) + "░".repeat(BAR_WIDTH - filled)
  const percent = s.percent === null ? "  ?%" : `${Math.floor(s.percent)}%`.padStart(4)
  const total = s.total === null ? "?" : count(s.total)
  return `${label} ${bar} ${percent} ${count(s.partitions)}/${total}  ${megabytes(s.bytes)}  ${
    count(Math.round(s.rate))
  }/s  ` +
    `${(s.bytesRate / 1e6).toFixed(1)} MB/s  eta ${
      s.etaSeconds === null ? "?" : duration(s.etaSeconds)
    }  ${s.retries} ${s.retries === 1 ? "retry" : "retries"}${
      s.limit === null ? "" : `  ${count(s.inFlight)} in flight (limit ${count(s.limit)})`
    }${s.throttled === 0 ? "" : `  ${count(s.throttled)} throttled`}`
}

const count = (n: number) => n.toLocaleString("en-US")

export const megabytes = (
  bytes: number
) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`)

/** `45s`, `3m05s`, `2h04m`; `precise`: `2.4s` below a minute. */
export const duration = (seconds: number, precise = false): string => {
  if (precise && seconds < 59.95) return `${seconds.toFixed(1)}s`
  const s = Math.round(seconds)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`
}

const fit = (line: string, width: number) => (line.length <= width ? line : line.slice(0, width - 1) + "…")
