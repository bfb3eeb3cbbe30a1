import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { decodeModes, onDecodeErrors } from "../decode/Shared.ts"
import { OutputFormat } from "../sinks/WrittenFile.ts"
import type { DecodeRequest } from "./Decoding.ts"
import { describeIssues, type FileUnreadable, JsonInvalid, readJsonFile } from "./Json.ts"

/** A job config file that cannot be used: the message names the file and the field. */
export class JobConfigError
  extends Schema.TaggedError<JobConfigError>()("JobConfigError", { message: Schema.String })
{}

export const PositiveInt = Schema.Int.pipe(Schema.positive())

// Spelled out, not imported from ParquetCodecs: that module loads the native codecs, which command start-up does not need.
export const Compression = Schema.Literal("zstd", "snappy", "gzip", "none")

/** Decoding (`--decode` and its companions): job-wide, and per layer in a nightly job's `layers`. */
export const DecodeConfig = {
  decode: Schema.optional(Schema.Literal(...decodeModes)),
  explode: Schema.optional(Schema.String),
  schemaBundle: Schema.optional(Schema.String),
  onDecodeError: Schema.optional(Schema.Literal(...onDecodeErrors))
}
export type DecodeConfig = Schema.Struct.Type<typeof DecodeConfig>

/** Export knobs shared by job configs and flags. Flags override the file, which overrides the defaults. */
export const ExportSettings = {
  lookupUrl: Schema.optional(Schema.String),
  credentials: Schema.optional(Schema.String),
  /** Lookup's `region` (a multi-region catalog's secondary region). */
  region: Schema.optional(Schema.String),
  out: Schema.String,
  format: Schema.optional(OutputFormat),
  compression: Schema.optional(Compression),
  concurrency: Schema.optional(PositiveInt),
  listConcurrency: Schema.optional(PositiveInt),
  parts: Schema.optional(PositiveInt),
  maxFileBytes: Schema.optional(PositiveInt),
  ...DecodeConfig
}

export const defaults = {
  format: "parquet",
  compression: "zstd",
  concurrency: 32,
  listConcurrency: 4,
  parts: 4,
  /** Raw bytes unless asked: the columns of existing exports never change under their users (docs/decoding.md). */
  decode: "none",
  onDecodeError: "fail"
} as const

/** The decode request of job config fields (`over` wins, field by field), with the defaults. */
export const decodeRequest = (fields: DecodeConfig, over: DecodeConfig = {}): DecodeRequest => ({
  mode: over.decode ?? fields.decode ?? defaults.decode,
  onError: over.onDecodeError ?? fields.onDecodeError ?? defaults.onDecodeError,
  explode: over.explode ?? fields.explode,
  schemaBundle: over.schemaBundle ?? fields.schemaBundle
})

/** The jobs a job config can run: its `job` field. */
export const JobKind = Schema.Struct({ job: Schema.Literal("nightly-export", "backfill", "retention") })

/** How an export writes, every knob decided: the flags' values (their defaults are `defaults`), or a job config's by `writeSettingsOf`. */
export interface WriteSettings {
  readonly format: typeof OutputFormat.Type
  readonly compression: typeof Compression.Type
  readonly concurrency: number
  readonly listConcurrency: number
  readonly parts: number
  readonly maxFileBytes: number | undefined
  readonly decode: DecodeRequest
}

/** A job config's write settings (`over`: a nightly layer's own decoding), with the defaults for what it leaves out. */
export const writeSettingsOf = (
  job: Partial<Omit<Schema.Struct.Type<typeof ExportSettings>, "out">>,
  over: DecodeConfig = {}
): WriteSettings => ({
  format: job.format ?? defaults.format,
  compression: job.compression ?? defaults.compression,
  concurrency: job.concurrency ?? defaults.concurrency,
  listConcurrency: job.listConcurrency ?? defaults.listConcurrency,
  parts: job.parts ?? defaults.parts,
  maxFileBytes: job.maxFileBytes,
  decode: decodeRequest(job, over)
})

const strict = { onExcessProperty: "error", errors: "all" } as const

/** The words for a job config that cannot be used: the message names the file and the field. */
const jobConfigError = (file: string) => (e: FileUnreadable | JsonInvalid) =>
  new JobConfigError({
    message: e._tag === "FileUnreadable"
      ? `Cannot read job config ${file}: ${e.why}. Check the path.`
      : e.notJson
      ? `Job config ${file} is not valid JSON: ${e.detail}.`
      : `Job config ${file} is invalid: ${e.detail}.`
  })

/** Reads and validates a JSON job config; unknown fields are errors, so a typo never goes unnoticed. */
export const load = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
  readJsonFile(file, schema, strict).pipe(Effect.mapError(jobConfigError(file)))

/** Validates a job config already parsed (`source` names it in errors). */
export const decode = <A, I>(schema: Schema.Schema<A, I>, json: unknown, source: string) =>
  Schema.decodeUnknown(schema, strict)(json).pipe(
    Effect.mapError((e) => jobConfigError(source)(new JsonInvalid({ notJson: false, detail: describeIssues(e) })))
  )

/** Which job a job config runs (its other fields are checked by `load` with that job's schema). */
export const jobKindOf = (file: string) =>
  readJsonFile(file, JobKind).pipe(
    Effect.mapError((e) =>
      e._tag === "JsonInvalid" && !e.notJson
        ? new JobConfigError({
          message: `Job config ${file}: the field "job" must be one of ${JobKind.fields.job.literals.join(", ")}.`
        })
        : jobConfigError(file)(e)
    ),
    Effect.map((config) => config.job)
  )
