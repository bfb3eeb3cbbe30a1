import * as Schema from "effect/Schema"
import * as Struct from "effect/Struct"
import { DEFAULT_MAX_CONCURRENCY } from "../client/Concurrency.ts"
import { decodeModes, onDecodeErrors } from "../decode/Shared.ts"
import { OutputFormat } from "../sinks/WrittenFile.ts"
import { defaultBufferBytes } from "./Budget.ts"
import type { DecodeRequest } from "./Decoding.ts"

export const PositiveInt = Schema.Int.pipe(Schema.positive())

// Spelled out, not imported from ParquetCodecs: that module carries the codecs (hysnappy's WebAssembly), which command start-up does not need.
export const Compression = Schema.Literal("zstd", "snappy", "gzip", "none")

/**
 * `--format`: files (Parquet, Arrow or both, `version=<V>/` per export), or `iceberg`: one Apache
 * Iceberg table per layer, a snapshot per exported version (Parquet data files; export/Tables.ts).
 */
export const ExportFormat = Schema.Literal(...OutputFormat.literals, "iceberg")
export type ExportFormat = typeof ExportFormat.Type

export const DecodeMode = Schema.Literal(...decodeModes)
export const OnDecodeError = Schema.Literal(...onDecodeErrors)

/**
 * The settings of an export, each declared once: its type and its default. Job configs decode them
 * (unknown fields stay errors), the CLI derives a flag from each (`cli/Flags.ts`), and what a
 * stage needs is a Pick of the decoded type. Flags override a job config, which overrides these
 * defaults.
 */
export const ExportSettings = Schema.Struct({
  /** A local directory or an object store (`s3://bucket/prefix`). */
  out: Schema.String,
  format: Schema.optionalWith(ExportFormat, { default: () => "parquet" as const }),
  compression: Schema.optionalWith(Compression, { default: () => "zstd" as const }),
  /** Blob requests in flight at once, across all parts, pinned; absent: found as the export runs (client/Concurrency.ts). */
  concurrency: Schema.optional(PositiveInt),
  /** The most blob requests the adaptive limit allows in flight. */
  maxConcurrency: Schema.optionalWith(PositiveInt, { default: () => DEFAULT_MAX_CONCURRENCY }),
  /** Blob bytes held in memory at once (export/Budget.ts); absent: chosen from the memory available. */
  bufferBytes: Schema.optional(PositiveInt),
  /** Parts listed at once. */
  listConcurrency: Schema.optionalWith(PositiveInt, { default: () => 4 }),
  /** Metadata parts to ask for: the unit of parallel listing and of resume. */
  parts: Schema.optionalWith(PositiveInt, { default: () => 4 }),
  /** A new file once one reaches this size (the writers' default: 256 MiB); parts share files up to it. */
  maxFileBytes: Schema.optional(PositiveInt),
  /** Raw bytes unless asked: the columns of existing exports never change under their users (docs/decoding.md). */
  decode: Schema.optionalWith(DecodeMode, { default: () => "none" as const }),
  explode: Schema.optional(Schema.String),
  schemaBundle: Schema.optional(Schema.String),
  onDecodeError: Schema.optionalWith(OnDecodeError, { default: () => "fail" as const })
})
export type ExportSettings = typeof ExportSettings.Type

/** The decoding settings, as a nightly job's layer may give them instead of the job's. */
export const DecodeOverrides = {
  decode: Schema.optional(DecodeMode),
  explode: Schema.optional(Schema.String),
  schemaBundle: Schema.optional(Schema.String),
  onDecodeError: Schema.optional(OnDecodeError)
}
export type DecodeOverrides = Schema.Struct.Type<typeof DecodeOverrides>

/** Every setting's default (all but `out`, which has none). */
export const defaults = Schema.decodeSync(Schema.Struct(Struct.omit(ExportSettings.fields, "out")))({})

/** How an export writes, every setting decided: all but where to (`out`), decoding as one request. */
export type WriteSettings =
  & Omit<ExportSettings, "out" | keyof DecodeOverrides>
  & { readonly decode: DecodeRequest }

/** The decode request of the settings (`over`: a nightly layer's own decoding, which wins field by field). */
export const decodeRequest = (
  settings: Pick<ExportSettings, keyof DecodeOverrides>,
  over: DecodeOverrides = {}
): DecodeRequest => ({
  mode: over.decode ?? settings.decode,
  onError: over.onDecodeError ?? settings.onDecodeError,
  explode: over.explode ?? settings.explode,
  schemaBundle: over.schemaBundle ?? settings.schemaBundle
})

const WRITE_KEYS = Struct.keys(ExportSettings.fields).filter((key): key is keyof WriteSettings & keyof ExportSettings =>
  key !== "out" && !(key in DecodeOverrides)
)

/** The write settings of export settings (`over`: a nightly layer's own decoding). */
export const writeSettingsOf = (settings: ExportSettings, over: DecodeOverrides = {}): WriteSettings => ({
  ...Struct.pick(settings, ...WRITE_KEYS),
  decode: decodeRequest(settings, over)
})

/** Connections per origin the client keeps for an export with these settings (listings get theirs on top). */
export const connectionsFor = (settings: Pick<ExportSettings, "concurrency" | "maxConcurrency">): number =>
  settings.concurrency ?? settings.maxConcurrency

/**
 * The settings of each of `atOnce` exports that run side by side (a nightly job's layers, a backfill's
 * versions): they share the downloads in flight and the byte budget.
 */
export const sharedBy = <S extends Partial<Pick<ExportSettings, "concurrency" | "maxConcurrency" | "bufferBytes">>>(
  settings: S,
  atOnce: number
): S => ({
  ...settings,
  concurrency: settings.concurrency === undefined ? undefined : Math.max(1, Math.floor(settings.concurrency / atOnce)),
  maxConcurrency: Math.max(1, Math.floor((settings.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY) / atOnce)),
  bufferBytes: Math.max(1, Math.floor((settings.bufferBytes ?? defaultBufferBytes()) / atOnce))
})
