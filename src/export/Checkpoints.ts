import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Destination, Entry } from "../sinks/Destination.ts"
import { RecordedFile } from "../sinks/WrittenFile.ts"
import { sameDecoding } from "./Decoding.ts"
import { type DecodeIdentity, DecodeSummary, readOwnJsonOption } from "./Manifest.ts"

/**
 * The parts of one export and what they leave in `_parts/` of its directory: per finished part a
 * checkpoint naming its files, the proof that lets a resumed run (or another run of the same shard)
 * skip it. Data files carry the id of the run that wrote them (`part-<part>-<run>-<seq>`), so two runs
 * of one part at once (a pod retried while the first still runs) never write the same file; each
 * checkpoint names one run's files, and commit removes the files no manifest names.
 */

const PARTS_DIR = "_parts"

/** What one finished part wrote. */
export const Checkpoint = Schema.Struct({
  part: Schema.Number,
  files: Schema.Array(RecordedFile),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number,
  /** The region of a multi-region catalog that served the part. */
  region: Schema.optional(Schema.String),
  /** How the part was decoded; absent when it was not. */
  decode: Schema.optional(DecodeSummary),
  /** An Iceberg table's export: the partitions listed as deleted (no row of theirs is written). */
  deletedPartitions: Schema.optional(Schema.Array(Schema.String))
})
export type Checkpoint = typeof Checkpoint.Type

export const partsDir = (dir: string) => `${dir}/${PARTS_DIR}`
export const checkpointKey = (dir: string, part: number) => `${partsDir(dir)}/part-${part}.json`

/** A data file of the export (finished, or `.partial`), as opposed to its JSON bookkeeping. */
export const isDataFile = (name: string) => /^part-.+\.(parquet|arrow)(\.partial)?$/.test(name)

/** What `dir` holds, by name (one listing: on a store, one request per thousand files). */
export const listing = (dest: Destination, dir: string) =>
  Effect.map(dest.list(dir), (entries) => new Map(entries.filter((e) => !e.dir).map((e) => [e.name, e])))

/** Why the files are not all there as recorded (size, and the store's ETag where recorded); undefined when they are. */
export const damage = (files: ReadonlyArray<RecordedFile>, present: ReadonlyMap<string, Entry>): string | undefined => {
  for (const f of files) {
    const entry = present.get(f.path)
    if (entry === undefined) return `${f.path} is missing`
    if (entry.size !== f.bytes) return `${f.path} has ${entry.size} bytes, not ${f.bytes}`
    if (f.etag !== undefined && entry.etag !== undefined && entry.etag !== f.etag) {
      return `${f.path} was replaced (ETag ${entry.etag}, not ${f.etag})`
    }
  }
  return undefined
}

/**
 * The checkpoints of `parts` that still hold: decoded as this run decodes (`decoding`, undefined for
 * raw), and every file they name there as recorded.
 */
export const finishedParts = (
  dest: Destination,
  dir: string,
  parts: ReadonlyArray<number>,
  decoding: DecodeIdentity | undefined
) =>
  Effect.gen(function*() {
    const finished = new Map<number, Checkpoint>()
    let present: Map<string, Entry> | undefined
    for (const part of parts) {
      const checkpoint = yield* readOwnJsonOption(dest, Checkpoint, checkpointKey(dir, part))
      if (Option.isNone(checkpoint) || !sameDecoding(checkpoint.value.decode, decoding)) continue
      present ??= yield* listing(dest, dir)
      if (damage(checkpoint.value.files, present) === undefined) finished.set(part, checkpoint.value)
    }
    return finished
  })

/**
 * After the output volume failed (disk full, I/O error): removes this run's files that no checkpoint
 * vouches for, giving the space back and leaving nothing half-written. Other runs' files (a second
 * run of the same shard) are theirs to finish.
 */
export const discardUnfinished = (dest: Destination, dir: string, run: string) =>
  Effect.gen(function*() {
    const kept = new Set<string>()
    for (const entry of yield* dest.list(partsDir(dir))) {
      const checkpoint = yield* readOwnJsonOption(dest, Checkpoint, `${partsDir(dir)}/${entry.name}`)
      if (Option.isSome(checkpoint)) { for (const f of checkpoint.value.files) kept.add(f.path) }
    }
    const mine = (yield* dest.list(dir)).filter((e) =>
      !e.dir && isDataFile(e.name) && e.name.includes(`-${run}-`) && !kept.has(e.name)
    )
    yield* dest.remove(mine.map((e) => `${dir}/${e.name}`))
  }).pipe(Effect.ignore)
