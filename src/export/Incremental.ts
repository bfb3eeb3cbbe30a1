import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type Destination, destination } from "../sinks/Destination.ts"
import { committed } from "./Commit.ts"
import { readState } from "./Manifest.ts"
import { type Plan, type ResolvedPlan, resolvePlan, splitPlan } from "./Plan.ts"
import type { ExportFormat } from "./Settings.ts"
import { refuseTable, tableState } from "./Tables.ts"

export interface ExportRequest {
  readonly catalog: string
  readonly layer: string
  readonly version: number | "latest"
  /**
   * `changes`: only what changed since the layer's cursor in `out`: its `_state.json`, or, for an
   * Iceberg table, the newest version tagged below the one exported.
   */
  readonly mode: "full" | "changes"
  readonly out: string
  readonly parts: number
  /** `iceberg`: a snapshot of the layer's table; the other formats write files (the plan does not depend on which). */
  readonly format?: ExportFormat | undefined
}

export type Planned =
  | PlannedExport
  | { readonly _tag: "UpToDate"; readonly catalogHrn: string; readonly layerId: string; readonly version: number }

/** An export to run, and why it is not what was asked when it is not (a full export instead of changes). */
export interface PlannedExport {
  readonly _tag: "Planned"
  readonly plan: Plan
  readonly note?: string | undefined
}

/**
 * Plans a full export, or in `changes` mode a delta from the cursor to the target version. Without
 * a cursor, or with one below the minimum version (its base was deleted), it falls back to a full
 * export and says why in `note`. The layer's directory must hold what the export writes: files, or
 * this layer's Iceberg table (`format` iceberg); anything else is refused before anything is written.
 */
export const planExport = (request: ExportRequest) =>
  Effect.gen(function*() {
    const table = request.format === "iceberg"
    const { bounds, plan: full } = yield* resolvePlan({
      catalog: request.catalog,
      layer: request.layer,
      version: request.version,
      ...(table ? { format: "iceberg" as const } : {})
    })
    // Only the plan chosen is split into parts: a full plan's parts are of no use to a delta.
    const split = (choice: PlannedExport) =>
      Effect.map(splitPlan(choice.plan, request.parts), (plan): Planned => ({ ...choice, plan }))
    const dest = yield* destination(request.out)
    if (table) {
      const state = yield* tableState(dest, full)
      if (request.mode === "full" || full.layerType === "volatile") return yield* split(plannedFull(request, full))
      if (state.tagged) {
        // A run stopped after its commit left its bookkeeping: tidied here, as a re-run of it would.
        yield* committed(dest, full)
        return {
          _tag: "UpToDate",
          catalogHrn: full.catalogHrn,
          layerId: full.layerId,
          version: full.version
        } satisfies Planned
      }
      return yield* split(tableDelta(full, bounds, state.base))
    }
    yield* refuseTable(dest, full)
    if (request.mode === "full" || full.layerType === "volatile") return yield* split(plannedFull(request, full))
    const state = yield* readState(dest, `${full.catalogId}/${full.layerId}`).pipe(
      Effect.orElseSucceed(() => Option.none())
    )
    if (Option.isNone(state)) {
      return yield* split({ _tag: "Planned", plan: full, note: "no cursor (_state.json) yet: full export" })
    }
    const cursor = state.value.lastVersion
    if (cursor >= full.version) {
      return { _tag: "UpToDate", catalogHrn: full.catalogHrn, layerId: full.layerId, version: cursor } satisfies Planned
    }
    return yield* split(delta(full, bounds, cursor, `the cursor (version ${cursor})`))
  })

const plannedFull = (request: ExportRequest, full: Plan): PlannedExport => ({
  _tag: "Planned",
  plan: full,
  note: request.mode === "changes" && full.layerType === "volatile"
    ? "volatile layers have no versions to diff: exporting a snapshot"
    : undefined
})

/**
 * The changes from `base` (`subject` in notes) to the full plan's version while the catalog still has them (its
 * `bounds`, read with the full plan); else the full plan, and why. Either is still to be split into parts.
 */
const delta = (full: Plan, bounds: ResolvedPlan["bounds"], base: number, subject: string): PlannedExport =>
  bounds !== undefined && base < bounds.minimum - 1
    ? {
      _tag: "Planned",
      plan: full,
      note: `${subject} is below the minimum version ${bounds.minimum}, so its changes are gone: full export`
    }
    : { _tag: "Planned", plan: { ...full, mode: "changes", baseVersion: base } }

/**
 * A version of a layer's Iceberg table: the changes from the newest version tagged below it (`base`,
 * from tableState), else a full snapshot, and why; still to be split into parts.
 */
const tableDelta = (full: Plan, bounds: ResolvedPlan["bounds"], base: number | undefined): PlannedExport =>
  base === undefined
    ? {
      _tag: "Planned",
      plan: full,
      note: `the table has no snapshot of a version below ${full.version} yet: full export`
    }
    : delta(full, bounds, base, `the table's newest version below ${full.version} (tag v${base})`)

/**
 * A table's version for a backfill: already tagged (nothing to do), or its plan, split into parts (changes from the
 * nearest older tag where possible).
 */
export const planTableVersion = (dest: Destination, { bounds, plan: full }: ResolvedPlan, parts: number) =>
  Effect.gen(function*() {
    const state = yield* tableState(dest, full)
    if (state.tagged) return Option.none<PlannedExport>()
    const chosen = tableDelta(full, bounds, state.base)
    return Option.some({ ...chosen, plan: yield* splitPlan(chosen.plan, parts) })
  })
