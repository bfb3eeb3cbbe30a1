import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * Crash points: the stages of an export where a process may die, which the kill tests
 * (test/reliability/kills.test.ts) stop a real run at to prove that nothing looks finished and the
 * next run completes. A run tells the `CrashProbe` each time it passes one; the probe does nothing
 * unless something asks for it: the CLI sets one from `CATALOG_EXPORT_CRASH_AT=<point>:<n>` (SIGKILL
 * the n-th time, 1-based, the run reaches <point>), in-process tests provide their own. Points:
 *   listed     a partition was listed
 *   fetched    a blob was downloaded
 *   written    a batch of rows went to a part's open `.partial` files (or uploads)
 *   renamed    a finished data file became visible under its final name (renamed, or its upload completed)
 *   checkpoint a part's checkpoint (`_parts/part-<i>.json`) was written
 *   merged     a file merged from a shard's small files became visible; its shard manifest is not written yet
 *   manifest   every shard is done (`_shards/shard-<i>.json`); the manifest is about to be written
 *   committed  the manifest is written; the cursor (`_state.json`) and the tidying are next
 *   staged     an Iceberg commit wrote its manifests and manifest list; the table's next metadata file is next
 *   versioned  the table's next metadata file exists; `version-hint.text` is next
 * Per partition and per blob the probe is a plain call on a probe read once per stage, no Effect.
 */
export const CRASH_POINTS = [
  "listed",
  "fetched",
  "written",
  "renamed",
  "checkpoint",
  "merged",
  "manifest",
  "committed",
  "staged",
  "versioned"
] as const
export type CrashPoint = (typeof CRASH_POINTS)[number]

export interface CrashProbeShape {
  /** Called synchronously each time a run passes `point`. */
  readonly reached: (point: CrashPoint) => void
}

const none: CrashProbeShape = { reached: () => {} }

/** The environment variable of the CLI's probe. */
export const CRASH_AT = "CATALOG_EXPORT_CRASH_AT"

export class CrashProbe extends Context.Reference<CrashProbe>()("catalog-export/telemetry/CrashProbe", {
  defaultValue: (): CrashProbeShape => none
}) {
  /** A probe that kills the process with SIGKILL the n-th time a run reaches the point of `<point>:<n>`; none for anything else. */
  static readonly killAt = (spec: string): CrashProbeShape => {
    const m = /^([a-z]+):(\d+)$/.exec(spec.trim())
    if (m === null) return none
    const [, point, at] = m
    let reached = 0
    return {
      reached: (p) => {
        if (p === point && ++reached >= Number(at)) process.kill(process.pid, "SIGKILL")
      }
    }
  }

  /** The probe the environment asks for (CATALOG_EXPORT_CRASH_AT), for the CLI to provide. */
  static readonly fromEnv: Layer.Layer<CrashProbe> = Layer.effect(
    CrashProbe,
    Effect.map(
      Effect.orElseSucceed(Config.option(Config.string(CRASH_AT)), () => Option.none<string>()),
      Option.match({ onNone: () => none, onSome: (spec) => CrashProbe.killAt(spec) })
    )
  )
}
