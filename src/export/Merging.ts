import * as Effect from "effect/Effect"
import type { Destination } from "../sinks/Destination.ts"
import { type Layout, readLayout, writeMerged } from "../sinks/Merge.ts"
import type { RecordedFile } from "../sinks/WrittenFile.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"

/**
 * The files of an export sized by bytes, not by metadata parts. Parts are the unit of listing and of
 * resume, so each writes its own files (a part's last one mostly small, a part that listed nothing
 * an empty one); once a shard's parts are all checkpointed, its files without rows go and its small
 * files are merged into files of up to `maxFileBytes` (sinks/Merge.ts: row groups and record batches
 * copied, nothing encoded again). The shard manifest then names the merged files; the parts' files
 * stay until the commit's tidying removes what the manifest does not name. A run killed while
 * merging leaves the checkpoints as they were: the next one merges again, and the commit removes
 * the first run's merged files with the other leftovers.
 */

/** The files that hold rows; an export without any keeps its first file of each format, so readers still see its columns. */
export const withoutEmptyFiles = <F extends Pick<RecordedFile, "rows" | "format">>(
  files: ReadonlyArray<F>
): ReadonlyArray<F> =>
  files.some((f) => f.rows > 0)
    ? files.filter((f) => f.rows > 0)
    : files.filter((f, i) => files.findIndex((g) => g.format === f.format) === i)

export interface MergeOptions {
  readonly maxFileBytes: number
  /** The name of the `seq`th merged file, without its extension (it carries the run id: see Checkpoints.ts). */
  readonly name: (seq: number) => string
}

/**
 * A file this large stays as its part wrote it, whatever `maxFileBytes` is. Below it, a reader's per-file costs
 * (a request of tens of milliseconds to an object store, a footer) outweigh reading its bytes (4 MiB at ~100 MB/s:
 * ~40 ms); above it, merging would cost the export a read, a write and an fsync of the file for little gain: four
 * part files of 8.5 MB merged made bench section 2's export ~5% slower (0.13 s), four of 62 MiB section 4's ~8%.
 */
export const MERGE_BELOW_BYTES = 4 * 1024 * 1024

/**
 * `files` (a shard's, in part order) with the empty ones left out and the small ones merged: files
 * below half of `maxFileBytes` (and below MERGE_BELOW_BYTES) of one format and schema are merged in
 * order while their sum stays within `maxFileBytes`.
 */
export const mergeSmallFiles = Effect.fn("Export.mergeFiles")(
  function*(dest: Destination, dir: string, files: ReadonlyArray<RecordedFile>, options: MergeOptions) {
    const kept = withoutEmptyFiles(files)
    // A file of half the size or more stays as it is (a part's full files roll over just below the size).
    const mergeBelow = Math.min(options.maxFileBytes / 2, MERGE_BELOW_BYTES)
    const small = kept.filter((f) => f.rows > 0 && f.bytes < mergeBelow)
    if (small.length < 2) return kept
    const layouts = yield* Effect.forEach(small, (f) => readLayout(dest, dir, f), { concurrency: 8 })
    // Per format and schema, the groups of files each merged file is made of, filled in order.
    const groups = new Map<string, Array<{ layouts: Array<Layout>; bytes: number }>>()
    for (const layout of layouts) {
      if (layout.format === "arrow" && layout.dictionaries) continue
      const key = `${layout.format}\n${layout.schema}`
      const packed = groups.get(key) ?? []
      groups.set(key, packed)
      const last = packed.at(-1)
      if (last !== undefined && last.bytes + layout.file.bytes <= options.maxFileBytes) {
        last.layouts.push(layout)
        last.bytes += layout.file.bytes
      } else packed.push({ layouts: [layout], bytes: layout.file.bytes })
    }
    const probe = yield* CrashProbe
    const merged = new Map<string, RecordedFile>()
    let seq = 0
    for (const { layouts: group } of [...groups.values()].flat()) {
      if (group.length < 2) continue
      const file = yield* writeMerged(dest, dir, `${options.name(seq++)}.${group[0]!.format}`, group)
      probe.reached("merged")
      for (const layout of group) merged.set(layout.file.path, file)
    }
    // Each merged file where its first file was; the files it holds gone.
    const result: Array<RecordedFile> = []
    for (const f of kept) {
      const into = merged.get(f.path)
      if (into === undefined) result.push(f)
      else if (!result.includes(into)) result.push(into)
    }
    return result
  }
)
