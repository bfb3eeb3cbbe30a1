import { Effect, Schedule } from "effect"

/** Counters of one run, shared by every stage; plain numbers, since the fibers share one thread. */
export class Counters {
  partitions = 0
  deleted = 0
  bytes = 0
  skippedParts = 0
  readonly startedAt = Date.now()
  constructor(
    /** Partitions expected, when known. */
    public total: number | undefined = undefined
  ) {}
}

export interface Snapshot {
  readonly partitions: number
  readonly deleted: number
  readonly bytes: number
  readonly retries: number
  readonly elapsedMs: number
}

const mb = (bytes: number) => (bytes / 1e6).toFixed(1)

export const rate = (count: number, elapsedMs: number) => (elapsedMs <= 0 ? 0 : (count * 1000) / elapsedMs)

export const describeLine = (label: string, s: Snapshot, total: number | undefined) => {
  const seconds = s.elapsedMs / 1000
  const perSecond = rate(s.partitions, s.elapsedMs)
  const eta = total !== undefined && perSecond > 0 ? ` eta ${Math.max(0, (total - s.partitions) / perSecond).toFixed(0)}s` : ""
  return `${label}: ${s.partitions}${total === undefined ? "" : `/${total}`} partitions, ${mb(s.bytes)} MB, ` +
    `${perSecond.toFixed(0)}/s, ${(s.bytes / 1e6 / Math.max(seconds, 0.001)).toFixed(1)} MB/s, ${s.retries} retries${eta}`
}

export type ProgressStyle = "tty" | "json" | "none"

/**
 * Reports while `effect` runs: a live line on a TTY (redrawn in place), JSON log lines at a steady
 * interval otherwise. The final summary is the caller's.
 */
export const reporting = <A, E, R>(
  style: ProgressStyle,
  label: string,
  counters: Counters,
  retries: Effect.Effect<number>,
  effect: Effect.Effect<A, E, R>
) => {
  if (style === "none") return effect
  const snapshot = Effect.map(retries, (r): Snapshot => ({
    partitions: counters.partitions,
    deleted: counters.deleted,
    bytes: counters.bytes,
    retries: r,
    elapsedMs: Date.now() - counters.startedAt
  }))
  const report = Effect.flatMap(snapshot, (s) =>
    Effect.sync(() => {
      if (style === "tty") process.stderr.write(`\r\x1b[2K${describeLine(label, s, counters.total)}`)
      else process.stderr.write(JSON.stringify({ event: "progress", export: label, ...s, total: counters.total ?? null }) + "\n")
    }))
  const every = style === "tty" ? "250 millis" : "10 seconds"
  const clear = style === "tty" ? Effect.sync(() => process.stderr.write("\r\x1b[2K")) : Effect.void
  return Effect.scoped(
    Effect.gen(function*() {
      yield* Effect.forkScoped(Effect.repeat(Effect.delay(report, every), Schedule.spaced(every)))
      return yield* effect
    })
  ).pipe(Effect.ensuring(clear))
}
