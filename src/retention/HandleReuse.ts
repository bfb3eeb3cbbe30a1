import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { MetadataApi } from "../client/MetadataApi.ts"

/**
 * The interface's data-handle rule 3: a data handle reused across versions makes partitions
 * reference data that no longer exists once the version that published it is deleted. A blob
 * belongs to the partition entry that first published its handle; when that entry lives only in
 * versions a retention deletes, its blob goes with them, although a surviving version still
 * references the handle.
 */
export interface SharedHandle {
  readonly layer: string
  /** The surviving partition entry that references the handle. */
  readonly partition: string
  readonly version: number
  readonly dataHandle: string
  /** The deleted entry that published the handle first. */
  readonly publishedBy: { readonly partition: string; readonly version: number }
}

interface Entry {
  readonly partition: string
  readonly version: number
  readonly dataHandle: string
}

/**
 * Entries of `layer` that survive a raise of the minimum from `minimum` to `target` and reference a
 * handle first published by an entry that does not survive. It reads each version's changes from
 * `minimum` to `latest` (what changed in each version, so memory follows the churn, not the layer's
 * size); handles published before `minimum` are not seen.
 */
export const sharedHandles = (catalogHrn: string, layer: string, minimum: number, target: number, latest: number) =>
  Effect.gen(function*() {
    const metadata = yield* MetadataApi
    /** Per handle, the entry that published it first. */
    const owner = new Map<string, Entry>()
    /** Per partition, its entry as of the version read last. */
    const current = new Map<string, Entry>()
    /** Entries replaced at or before `target`: visible only in deleted versions. */
    const deletedOnly = new Set<Entry>()
    const surviving: Array<Entry> = []
    for (let version = minimum; version <= latest; version++) {
      const changed = yield* metadata.changes(catalogHrn, layer, { startVersion: version - 1, endVersion: version })
        .pipe(Stream.runCollect)
      for (const p of changed) {
        const entry: Entry = { partition: p.partition, version: p.version, dataHandle: p.dataHandle }
        const previous = current.get(p.partition)
        if (previous !== undefined && version <= target) deletedOnly.add(previous)
        current.set(p.partition, entry)
        if (entry.dataHandle === "") continue
        if (!owner.has(entry.dataHandle)) owner.set(entry.dataHandle, entry)
        if (version >= target) surviving.push(entry)
      }
      // Entries changed before the target and still visible at it survive too.
      if (version === target) {
        for (const entry of current.values()) {
          if (entry.version < target && entry.dataHandle !== "") surviving.push(entry)
        }
      }
    }
    const shared: Array<SharedHandle> = []
    for (const entry of surviving) {
      const first = owner.get(entry.dataHandle)!
      if (first !== entry && deletedOnly.has(first)) {
        shared.push({
          layer,
          partition: entry.partition,
          version: entry.version,
          dataHandle: entry.dataHandle,
          publishedBy: { partition: first.partition, version: first.version }
        })
      }
    }
    return shared.sort((a, b) => a.version - b.version || (a.partition < b.partition ? -1 : 1))
  })
