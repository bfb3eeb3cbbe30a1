import * as Effect from "effect/Effect"
import { destination } from "../sinks/Destination.ts"
import { MANIFEST } from "./Manifest.ts"

/**
 * Keep-last-N for the snapshot directories of a volatile layer: every export of one writes a new
 * `snapshot=<UTC time>` directory, which would otherwise accumulate forever. Keeps the newest `keep`
 * committed snapshots (those with a manifest), removes older committed ones, and removes unfinished
 * directories older than the oldest kept snapshot: a snapshot is never resumed (the next run takes a
 * new one), so those are leftovers of killed runs. Newer unfinished directories (a run in progress)
 * are left alone. Returns the directories removed.
 */
export const pruneSnapshots = (out: string, catalogId: string, layerId: string, keep: number) =>
  Effect.gen(function*() {
    const dest = yield* destination(out)
    const layerDir = `${catalogId}/${layerId}`
    const names = (yield* dest.list(layerDir)).filter((e) => e.dir && /^snapshot=\d{8}T\d{6}Z$/.test(e.name)).map((e) =>
      e.name
    ).sort()
    const committed: Array<string> = []
    for (const name of names) {
      if ((yield* dest.list(`${layerDir}/${name}`)).some((e) => e.name === MANIFEST)) committed.push(name)
    }
    const oldestKept = committed.slice(-keep)[0]
    if (oldestKept === undefined) return []
    const removed = names.filter((n) => n < oldestKept)
    for (const name of removed) {
      // The manifest first: a reader never finds a finished-looking snapshot with files missing.
      yield* dest.remove([`${layerDir}/${name}/${MANIFEST}`])
      yield* dest.removeAll(`${layerDir}/${name}`)
    }
    return removed.map((n) => dest.at(`${layerDir}/${n}`))
  }).pipe(Effect.orElseSucceed(() => [] as Array<string>))
