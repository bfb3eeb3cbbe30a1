import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ConfigApi } from "../client/ConfigApi.ts"
import { MetadataApi } from "../client/MetadataApi.ts"
import { MANIFEST, Manifest } from "../export/Manifest.ts"
import { tableAt } from "../sinks/iceberg/Location.ts"
import { loadTable, taggedVersions } from "../sinks/iceberg/Table.ts"
import { type ExportLocation, exportLocation } from "./ExportLocation.ts"
import { RetentionRefused } from "./Policy.ts"

/**
 * The proof that raising the minimum version loses nothing: for every listed layer, each version
 * about to be deleted has its data in some committed export. An export of version w holds the
 * layer's state of every version whose last change (`layerVersions`) is the same as w's: back to
 * that change, and forward until the next one. A version at which the layer has no data needs no
 * export.
 */

/** An export whose manifest names files that are not there as recorded: it proves nothing. */
export interface Damaged {
  readonly version: number
  readonly reason: string
}

/** Every file the manifest names is in the location with the size it records; else why not. */
const damage = (location: ExportLocation, dir: string, manifest: Manifest) =>
  Effect.gen(function*() {
    for (const file of manifest.files) {
      const size = yield* location.size(`${dir}/${file.path}`)
      if (Option.isNone(size)) return `the manifest names ${file.path}, which is missing`
      if (
        size.value !== file.bytes
      ) return `the manifest says ${file.path} has ${file.bytes} bytes, but it has ${size.value}`
    }
    return undefined
  })

/**
 * Versions of a layer whose state the location holds: a committed full export, or a committed
 * changes export whose base version is itself held (a chain of deltas down to a full export). A delta
 * whose chain is broken (its base export was removed) proves nothing: the state cannot be rebuilt
 * from it. Nor does an export whose files are missing or of another size than its manifest says.
 */
export const committedVersions = (location: ExportLocation, catalogHrn: string, catalogId: string, layerId: string) =>
  Effect.gen(function*() {
    const layerDir = `${catalogId}/${layerId}`
    // An Iceberg table (--format iceberg): every version tagged v<N> is a whole snapshot of it.
    const table = yield* loadTable(tableAt(location.dest, layerDir), { catalogHrn, layerId }).pipe(
      Effect.catchTag("IcebergError", (e) => (e.reason === "Mismatch" ? Effect.succeed(undefined) : Effect.fail(e)))
    )
    if (table?.metadata !== undefined) {
      return { held: taggedVersions(table.metadata).map((t) => t.version), damaged: [] as Array<Damaged> }
    }
    const committed: Array<{ readonly version: number; readonly base: number | undefined }> = []
    const damaged: Array<Damaged> = []
    for (const entry of yield* location.list(layerDir)) {
      const m = /^version=(\d+)$/.exec(entry)
      if (m === null) continue
      const version = Number(m[1])
      const dir = `${layerDir}/${entry}`
      const manifest = yield* location.readJson(`${dir}/${MANIFEST}`, Manifest)
      if (
        Option.isNone(manifest) || manifest.value.catalogHrn !== catalogHrn || manifest.value.layerId !== layerId ||
        manifest.value.version !== version
      ) continue
      const reason = yield* damage(location, dir, manifest.value)
      if (reason !== undefined) {
        damaged.push({ version, reason })
        continue
      }
      committed.push({ version, base: manifest.value.mode === "full" ? undefined : manifest.value.baseVersion ?? -1 })
    }
    const held = new Set<number>()
    for (const c of committed.sort((a, b) => a.version - b.version)) {
      if (c.base === undefined || held.has(c.base)) held.add(c.version)
    }
    return { held: [...held], damaged }
  })

export interface Uncovered {
  readonly version: number
  readonly layer: string
  /** The nearest export at or above the version that would have counted but is damaged. */
  readonly damaged: Damaged | undefined
}

/** The oldest version in [minimum, below) whose data of some listed layer no export in the location holds. */
export const firstUncovered = (
  location: ExportLocation,
  catalog: { readonly hrn: string; readonly id: string },
  layers: ReadonlyArray<string>,
  minimum: number,
  below: number
) =>
  Effect.gen(function*() {
    const metadata = yield* MetadataApi
    const layerVersionsAt = (version: number) =>
      Effect.map(metadata.layerVersions(catalog.hrn, version), (r) => r.layerVersions)
    let oldest: Uncovered | undefined
    for (const layer of layers) {
      const { held, damaged } = yield* committedVersions(location, catalog.hrn, catalog.id, layer)
      const intervals: Array<readonly [number, number]> = []
      /** The states the exports hold, by the version in which the layer last changed. */
      const states = new Set<number>()
      for (const w of held.filter((w) => w >= minimum)) {
        const changed = (yield* layerVersionsAt(w)).find((l) => l.layer === layer)?.version
        // No data at w: the export holds nothing older; versions without data are checked one by one below.
        if (changed === undefined) continue
        intervals.push([changed, w])
        states.add(changed)
      }
      let v = minimum
      while (v < below) {
        const cover = intervals.find(([from, to]) => from <= v && v <= to)
        if (cover !== undefined) {
          v = cover[1] + 1
          continue
        }
        // Held too when the layer has not changed since an exported version (or has no data yet).
        const changed = (yield* layerVersionsAt(v)).find((l) => l.layer === layer)?.version
        if (changed !== undefined && !states.has(changed)) break
        v++
      }
      if (v < below && (oldest === undefined || v < oldest.version)) {
        const nearest = damaged.filter((d) => d.version >= v).sort((a, b) => a.version - b.version)[0]
        oldest = { version: v, layer, damaged: nearest }
      }
    }
    return oldest
  })

/** The versioned layers whose data the guard protects: the listed ones, else every versioned layer. */
export const guardedLayers = (catalogHrn: string, listed: ReadonlyArray<string> | undefined) =>
  Effect.gen(function*() {
    const catalog = yield* (yield* ConfigApi).getCatalog(catalogHrn)
    const versioned = catalog.layers.filter((l) => l.layerType === "versioned").map((l) => l.id)
    const unknown = (listed ?? []).find((id) => !versioned.includes(id))
    if (unknown !== undefined) {
      return yield* new RetentionRefused({
        message: `Catalog ${catalogHrn} has no versioned layer '${unknown}' (its versioned layers: ${
          versioned.join(", ") || "none"
        }).`
      })
    }
    return { catalog, layers: listed ?? versioned }
  })

/**
 * Refuses a minimum that would delete data no committed export holds, naming the version and layer.
 * Shared by `retention --require-exported` and `export --raise-minimum`.
 */
export const guard = (
  catalogHrn: string,
  target: number,
  minimum: number,
  location: ExportLocation,
  layers?: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const { catalog, layers: checked } = yield* guardedLayers(catalogHrn, layers)
    const gap = yield* firstUncovered(location, catalog, checked, minimum, target)
    if (gap === undefined) return
    const head =
      `Refusing to raise the minimum version of ${catalogHrn} to ${target}: version ${gap.version} of layer '${gap.layer}'`
    if (gap.damaged !== undefined) {
      return yield* new RetentionRefused({
        message:
          `${head} has no intact export in ${location.name}: in the export of version ${gap.damaged.version}, ${gap.damaged.reason}. ` +
          `Export it again (catalog-export export --catalog ${catalogHrn} --layer ${gap.layer} --version ${gap.damaged.version} --out ${location.name} --force), or set a lower minimum.`
      })
    }
    return yield* new RetentionRefused({
      message:
        `${head} has no committed export in ${location.name}. Export it first (catalog-export backfill --catalog ${catalogHrn} --layer ${gap.layer} ` +
        `--from ${gap.version} --to ${target - 1} --out ${location.name}), or set a lower minimum.`
    })
  })

/**
 * How the deletion is proven safe: the exports in a location (of the listed layers, else every
 * versioned layer), deliberately not at all, or not said, which refuses the run: deleting versions
 * cannot be undone, so the guard is on unless switched off by name.
 */
export type ExportCheck =
  | {
    readonly _tag: "RequireExported"
    readonly location: ExportLocation
    readonly layers?: ReadonlyArray<string> | undefined
  }
  | { readonly _tag: "Skip" }
  | { readonly _tag: "Missing"; readonly how: string }

/** The export check a job config or the flags ask for; both or a bad location is bad input. */
export const exportCheckOf = (options: {
  readonly requireExported: string | undefined
  readonly skipExportCheck: boolean
  readonly layers: ReadonlyArray<string> | undefined
  /** The names of the two settings, for messages (flags or config fields). */
  readonly names: { readonly require: string; readonly skip: string }
}): Effect.Effect<ExportCheck, RetentionRefused> => {
  const { names } = options
  if (options.requireExported !== undefined && options.skipExportCheck) {
    return Effect.fail(new RetentionRefused({ message: `Give either ${names.require} or ${names.skip}, not both.` }))
  }
  if (options.skipExportCheck) return Effect.succeed({ _tag: "Skip" })
  if (options.requireExported === undefined) {
    return Effect.succeed({
      _tag: "Missing",
      how:
        `give ${names.require} (where the exports of this catalog are), or ${names.skip} to delete versions whether or not they were exported`
    })
  }
  return exportLocation(options.requireExported).pipe(
    Effect.mapError((e) => new RetentionRefused({ message: e.message })),
    Effect.map((location) => ({ _tag: "RequireExported" as const, location, layers: options.layers }))
  )
}
