import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect } from "effect"
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
  Effect.promise(async () => {
    const layerDir = path.join(out, catalogId, layerId)
    const names = (await fs.readdir(layerDir).catch(() => [] as Array<string>)).filter((n) => /^snapshot=\d{8}T\d{6}Z$/.test(n)).sort()
    const committed: Array<string> = []
    for (const name of names) if (await fs.access(path.join(layerDir, name, MANIFEST)).then(() => true, () => false)) committed.push(name)
    const kept = committed.slice(-keep)
    const oldestKept = kept[0]
    if (oldestKept === undefined) return []
    const removed = names.filter((n) => n < oldestKept)
    for (const name of removed) {
      // The manifest first: a reader never finds a finished-looking snapshot with files missing.
      await fs.rm(path.join(layerDir, name, MANIFEST), { force: true })
      await fs.rm(path.join(layerDir, name), { recursive: true, force: true })
    }
    return removed.map((n) => path.join(layerDir, n))
  })
