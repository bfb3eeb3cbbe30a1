import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Option } from "effect"
import { MetadataApi } from "../client/MetadataApi.ts"
import { readManifest } from "../export/Manifest.ts"

/**
 * The proof that raising the minimum version loses nothing: for every listed layer, each version
 * about to be deleted has its data in some committed export. An export of version w holds the
 * layer's state of every version v in [c, w], where c is the last version at or below w in which the
 * layer changed (`layerVersions`); a version at which the layer has no data needs no export.
 */

/**
 * Versions of a layer whose state OUT holds: a committed full export, or a committed changes export
 * whose base version is itself held (a chain of deltas down to a full export). A delta whose chain is
 * broken (its base export was removed) proves nothing: the state cannot be rebuilt from it.
 */
export const committedVersions = (out: string, catalogHrn: string, catalogId: string, layerId: string) =>
  Effect.gen(function*() {
    const layerDir = path.join(out, catalogId, layerId)
    const entries = yield* Effect.promise(() => fs.readdir(layerDir).catch(() => [] as Array<string>))
    const committed: Array<{ readonly version: number; readonly base: number | undefined }> = []
    for (const entry of entries) {
      const m = /^version=(\d+)$/.exec(entry)
      if (m === null) continue
      const manifest = yield* readManifest(path.join(layerDir, entry)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isNone(manifest) || manifest.value.catalogHrn !== catalogHrn || manifest.value.layerId !== layerId) continue
      const version = Number(m[1])
      if (manifest.value.version !== version) continue
      committed.push({ version, base: manifest.value.mode === "full" ? undefined : manifest.value.baseVersion ?? -1 })
    }
    const held = new Set<number>()
    for (const c of committed.sort((a, b) => a.version - b.version)) {
      if (c.base === undefined || held.has(c.base)) held.add(c.version)
    }
    return [...held]
  })

export interface Uncovered {
  readonly version: number
  readonly layer: string
}

/** The oldest version in [minimum, below) whose data of some listed layer no export in OUT holds. */
export const firstUncovered = (
  out: string,
  catalog: { readonly hrn: string; readonly id: string },
  layers: ReadonlyArray<string>,
  minimum: number,
  below: number
) =>
  Effect.gen(function*() {
    const metadata = yield* MetadataApi
    const layerVersionsAt = (version: number) => Effect.map(metadata.layerVersions(catalog.hrn, version), (r) => r.layerVersions)
    let oldest: Uncovered | undefined
    for (const layer of layers) {
      const exported = (yield* committedVersions(out, catalog.hrn, catalog.id, layer)).filter((w) => w >= minimum)
      const intervals: Array<readonly [number, number]> = []
      for (const w of exported) {
        const changed = (yield* layerVersionsAt(w)).find((l) => l.layer === layer)?.version
        // No data at w: the export holds nothing older; versions without data are checked one by one below.
        if (changed !== undefined) intervals.push([changed, w])
      }
      let v = minimum
      while (v < below) {
        const cover = intervals.find(([from, to]) => from <= v && v <= to)
        if (cover !== undefined) {
          v = cover[1] + 1
          continue
        }
        const hasData = (yield* layerVersionsAt(v)).some((l) => l.layer === layer)
        if (hasData) break
        v++
      }
      if (v < below && (oldest === undefined || v < oldest.version)) oldest = { version: v, layer }
    }
    return oldest
  })
