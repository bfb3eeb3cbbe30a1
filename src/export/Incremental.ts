import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { destination } from "../sinks/Destination.ts"
import { readState } from "./Manifest.ts"
import { makePlan, type Plan, versionBounds } from "./Plan.ts"

export interface ExportRequest {
  readonly catalog: string
  readonly layer: string
  readonly version: number | "latest"
  /** `changes`: only what changed since the layer's cursor (`_state.json`) in `out`. */
  readonly mode: "full" | "changes"
  readonly out: string
  readonly parts: number
}

export type Planned =
  | { readonly _tag: "Planned"; readonly plan: Plan; readonly note?: string | undefined }
  | { readonly _tag: "UpToDate"; readonly catalogHrn: string; readonly layerId: string; readonly version: number }

/**
 * Plans a full export, or in `changes` mode a delta from the cursor to the target version. Without
 * a cursor, or with one below the minimum version (its base was deleted), it falls back to a full
 * export and says why in `note`.
 */
export const planExport = (request: ExportRequest) =>
  Effect.gen(function*() {
    const full = yield* makePlan({
      catalog: request.catalog,
      layer: request.layer,
      version: request.version,
      parts: request.parts
    })
    if (request.mode === "full" || full.layerType === "volatile") {
      const note = request.mode === "changes"
        ? "volatile layers have no versions to diff: exporting a snapshot"
        : undefined
      return { _tag: "Planned", plan: full, note } satisfies Planned
    }
    const dest = yield* destination(request.out)
    const state = yield* readState(dest, `${full.catalogId}/${full.layerId}`).pipe(
      Effect.orElseSucceed(() => Option.none())
    )
    if (Option.isNone(state)) {
      return { _tag: "Planned", plan: full, note: "no cursor (_state.json) yet: full export" } satisfies Planned
    }
    const cursor = state.value.lastVersion
    if (cursor >= full.version) {
      return { _tag: "UpToDate", catalogHrn: full.catalogHrn, layerId: full.layerId, version: cursor } satisfies Planned
    }
    const { minimum } = yield* versionBounds(full.catalogHrn)
    if (cursor < minimum - 1) {
      return {
        _tag: "Planned",
        plan: full,
        note:
          `the cursor (version ${cursor}) is below the minimum version ${minimum}, so its changes are gone: full export`
      } satisfies Planned
    }
    const plan = yield* makePlan({
      catalog: full.catalogHrn,
      layer: full.layerId,
      version: full.version,
      parts: request.parts,
      mode: "changes",
      baseVersion: cursor
    })
    return { _tag: "Planned", plan } satisfies Planned
  })
