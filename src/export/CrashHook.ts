import { Effect } from "effect"

/**
 * TEST HOOK, not a feature. `CATALOG_EXPORT_CRASH_AT=<point>:<n>` makes the process kill itself with
 * SIGKILL the n-th time (1-based) an export reaches <point>, so tests can crash a real run at an
 * exact stage and prove that nothing looks finished and that the next run completes. Unset (always,
 * outside tests) it does nothing. Points:
 *   listed     a partition was listed
 *   fetched    a blob was downloaded
 *   written    a batch of rows went to a part's open `.partial` files (or uploads)
 *   renamed    a finished data file became visible under its final name (renamed, or its upload completed)
 *   checkpoint a part's checkpoint (`_parts/part-<i>.json`) was written
 *   manifest   every shard is done (`_shards/shard-<i>.json`); the manifest is about to be written
 *   committed  the manifest is written; the cursor (`_state.json`) and the tidying are next
 */
export const CRASH_POINTS = ["listed", "fetched", "written", "renamed", "checkpoint", "manifest", "committed"] as const
export type CrashPoint = (typeof CRASH_POINTS)[number]

const parse = (spec: string | undefined): { readonly point: string; readonly at: number } | undefined => {
  const m = spec === undefined ? null : /^([a-z]+):(\d+)$/.exec(spec.trim())
  return m === null ? undefined : { point: m[1]!, at: Number(m[2]) }
}

const target = parse(process.env.CATALOG_EXPORT_CRASH_AT)
let reached = 0

/** Counts a pass through `point`; kills the process when it is the configured one. */
export const crashPointSync = (point: CrashPoint): void => {
  if (target === undefined || target.point !== point) return
  if (++reached >= target.at) process.kill(process.pid, "SIGKILL")
}

export const crashPoint = (point: CrashPoint): Effect.Effect<void> =>
  target === undefined ? Effect.void : Effect.sync(() => crashPointSync(point))
