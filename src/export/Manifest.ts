import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Column as ColumnModel, ColumnType as ColumnTypeModel, ScalarKind } from "../sinks/Columns.ts"
import type { Destination } from "../sinks/Destination.ts"
import { WrittenFile } from "../sinks/WrittenFile.ts"
import { OutputConflict } from "./Errors.ts"
import { readJson, writeJson } from "./Json.ts"

export const MANIFEST = "_manifest.json"
export const STATE = "_state.json"

/** A part of a multi-region catalog's export and the region that served it. */
export const PartRegion = Schema.Struct({ part: Schema.Number, region: Schema.String })

/** How an export decoded its blobs (`--decode`): the same for every part of it. */
export const DecodeIdentity = Schema.Struct({
  kind: Schema.Literal("protobuf", "geojson", "json"),
  explode: Schema.optional(Schema.String),
  onError: Schema.Literal("fail", "skip", "raw"),
  /** the schema (HRN) whose bundle decoded protobuf, from the artifact API */
  schema: Schema.optional(Schema.String),
  /** the bundle file given with --schema-bundle instead */
  schemaBundle: Schema.optional(Schema.String),
  bundleSha256: Schema.optional(Schema.String)
})
export type DecodeIdentity = typeof DecodeIdentity.Type

const scalarKinds: ReadonlyArray<ScalarKind> = [
  "boolean",
  "int32",
  "uint32",
  "int64",
  "uint64",
  "float",
  "double",
  "string",
  "binary",
  "json",
  "wkb"
]

const ColumnType: Schema.Schema<ColumnTypeModel> = Schema.Union(
  Schema.Struct({ kind: Schema.Literal(...scalarKinds) }),
  Schema.Struct({ kind: Schema.Literal("struct"), fields: Schema.Array(Schema.suspend(() => Column)) }),
  Schema.Struct({ kind: Schema.Literal("list"), element: Schema.suspend(() => ColumnType) })
)

/** A column of the files (sinks/Columns.ts), as a table export's shard manifests record them. */
export const Column: Schema.Schema<ColumnModel> = Schema.Struct({
  name: Schema.String,
  type: ColumnType,
  nullable: Schema.Boolean
})

/** The fields of a manifest that say what was exported, from the export's plan (export/Plan.ts). */
export const exportedOf = (plan: {
  readonly catalogHrn: string
  readonly layerId: string
  readonly layerType: "versioned" | "volatile"
  readonly version: number
  readonly snapshot?: string | undefined
  readonly contentType: string
  readonly contentEncoding?: string | undefined
}) => ({
  catalogHrn: plan.catalogHrn,
  layerId: plan.layerId,
  layerType: plan.layerType,
  version: plan.version,
  ...(plan.snapshot === undefined ? {} : { snapshot: plan.snapshot }),
  contentType: plan.contentType,
  ...(plan.contentEncoding === undefined ? {} : { contentEncoding: plan.contentEncoding })
})

/** How an export (or one part of it) decoded, and what came of it; absent from raw exports. */
export const DecodeSummary = Schema.Struct({
  ...DecodeIdentity.fields,
  /** partitions decoded (a deleted partition is a row of null decoded columns, not counted) */
  decoded: Schema.Number,
  /** partitions that did not decode: left out (`skip`) or written raw (`raw`) */
  failed: Schema.Number,
  /** rows written: one per partition, feature or exploded element */
  rows: Schema.Number,
  /** the first 100 that did not decode, and why */
  failures: Schema.Array(Schema.Struct({ partition: Schema.String, dataHandle: Schema.String, reason: Schema.String }))
})
export type DecodeSummary = typeof DecodeSummary.Type

/** Written last: a directory with a manifest is a finished export, one without is not. */
export const Manifest = Schema.Struct({
  formatVersion: Schema.Literal(1),
  catalogHrn: Schema.String,
  layerId: Schema.String,
  layerType: Schema.String,
  version: Schema.Number,
  snapshot: Schema.optional(Schema.String),
  contentType: Schema.String,
  contentEncoding: Schema.optional(Schema.String),
  mode: Schema.Literal("full", "changes"),
  baseVersion: Schema.optional(Schema.Number),
  partitions: Schema.Number,
  deleted: Schema.Number,
  bytes: Schema.Number,
  files: Schema.Array(WrittenFile),
  /** A multi-region catalog: the region that served each part (files `part-<part>-*`). */
  regions: Schema.optional(Schema.Array(PartRegion)),
  decode: Schema.optional(DecodeSummary),
  startedAt: Schema.String,
  finishedAt: Schema.String,
  tool: Schema.Struct({ name: Schema.String, version: Schema.String })
})
export type Manifest = typeof Manifest.Type

/** The cursor of incremental runs: the last version of the layer committed to this output. */
export const State = Schema.Struct({
  catalogHrn: Schema.String,
  layerId: Schema.String,
  lastVersion: Schema.Number,
  updatedAt: Schema.String
})
export type State = typeof State.Type

/** A file the export itself wrote (a plan, checkpoint, manifest): none when missing; one that does not decode is a conflict. */
export const readOwnJson = <A, I>(dest: Destination, schema: Schema.Schema<A, I>, key: string) =>
  readJson(dest, schema, key).pipe(
    Effect.catchTag("JsonInvalid", () =>
      new OutputConflict({
        message: `${dest.at(key)} is not a valid ${
          key.slice(key.lastIndexOf("/") + 1)
        }; move it away or rerun with --force.`
      }))
  )

/** A file the export wrote, none when it is missing, unreadable or invalid (a checkpoint that vouches for nothing). */
export const readOwnJsonOption = <A, I>(dest: Destination, schema: Schema.Schema<A, I>, key: string) =>
  readOwnJson(dest, schema, key).pipe(Effect.orElseSucceed(() => Option.none<A>()))

export const readManifest = (dest: Destination, dir: string) => readOwnJson(dest, Manifest, `${dir}/${MANIFEST}`)
export const readState = (dest: Destination, layerDir: string) => readOwnJson(dest, State, `${layerDir}/${STATE}`)

/**
 * Cursor updates of a layer, one at a time in this process: exports of several versions may finish
 * together (a parallel backfill), and each must read the cursor the one before it wrote.
 */
const cursorLocks = new Map<string, Effect.Semaphore>()

/** Moves the incremental cursor forward to `version`; never back (a backfill of old versions leaves it). */
export const advanceState = (dest: Destination, layerDir: string, state: State) =>
  Effect.suspend(() => {
    const lockKey = dest.at(layerDir)
    let lock = cursorLocks.get(lockKey)
    if (lock === undefined) cursorLocks.set(lockKey, lock = Effect.unsafeMakeSemaphore(1))
    return lock.withPermits(1)(Effect.gen(function*() {
      const current = yield* readState(dest, layerDir).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isSome(current) && current.value.lastVersion >= state.lastVersion) return
      yield* writeJson(dest, `${layerDir}/${STATE}`, state)
    }))
  })
