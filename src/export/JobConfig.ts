import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"
import { describeIssues, type FileUnreadable, JsonInvalid, readJsonFile } from "./Json.ts"

/** A job config file that cannot be used: the message names the file and the field. */
export class JobConfigError extends Schema.TaggedError<JobConfigError>()("JobConfigError", { message: Schema.String }) {
  get exitCode() {
    return ExitCode.usage
  }
}

/** How a job reaches the catalog service; flags (and their environment variables) override them. */
export const ConnectionFields = {
  lookupUrl: Schema.optional(Schema.String),
  credentials: Schema.optional(Schema.String),
  /** Lookup's `region` (a multi-region catalog's secondary region). */
  region: Schema.optional(Schema.String)
}

/** The jobs a job config can run: its `job` field. */
export const JobKind = Schema.Struct({ job: Schema.Literal("nightly-export", "backfill", "retention") })

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
