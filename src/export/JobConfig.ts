import * as fs from "node:fs"
import { Effect, Either, ParseResult, Schema } from "effect"
import { decodeModes, onDecodeErrors } from "../decode/Shared.ts"
import { OutputFormat } from "../sinks/WrittenFile.ts"
import type { DecodeRequest } from "./Decoding.ts"

/** A job config file that cannot be used: the message names the file and the field. */
export class JobConfigError extends Schema.TaggedError<JobConfigError>()("JobConfigError", { message: Schema.String }) {}

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
  /** Raw bytes unless asked: the columns of existing exports never change under their users (README "Decoding"). */
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

const describeIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "(top level)" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

/** Reads and validates a JSON job config; unknown fields are errors, so a typo never goes unnoticed. */
export const load = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => fs.readFileSync(file, "utf8"),
      catch: (e) => new JobConfigError({ message: `Cannot read job config ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}. Check the path.` })
    })
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (e) => new JobConfigError({ message: `Job config ${file} is not valid JSON: ${(e as Error).message}.` })
    })
    return yield* decode(schema, json, file)
  })

/** Validates a job config already parsed (`source` names it in errors). */
export const decode = <A, I>(schema: Schema.Schema<A, I>, json: unknown, source: string) => {
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "all" })(json)
  return Either.isLeft(decoded)
    ? Effect.fail(new JobConfigError({ message: `Job config ${source} is invalid: ${describeIssues(decoded.left)}.` }))
    : Effect.succeed(decoded.right)
}
