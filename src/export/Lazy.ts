import * as Effect from "effect/Effect"
import type { ExportOptions } from "./Export.ts"
import type { Plan } from "./Plan.ts"
import type { Counters } from "./Progress.ts"

/**
 * `runExport`, loaded on first use: the file writers (Parquet, Arrow, zstd) are most of the code a
 * command loads, and planning, dry runs, retention and the inspection commands never write a file.
 */
export const runExport = (plan: Plan, options: ExportOptions, counters?: Counters) =>
  Effect.flatMap(Effect.promise(() => import("./Export.ts")), (m) => m.runExport(plan, options, counters))
