import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { ParseOptions } from "effect/SchemaAST"
import * as fs from "node:fs/promises"
import { ExitCode } from "../domain/ExitCode.ts"
import type { Destination } from "../sinks/Destination.ts"
import type { SinkError } from "../sinks/SinkError.ts"

/**
 * The one reader of JSON files: text -> JSON -> `schema`. Below a destination (manifests,
 * checkpoints, plans, the cursor, the guard's reading of exports) and local files the user gives
 * (job configs, catalog configurations); each caller words its own errors.
 */

/** A JSON document that is no JSON, or not of the schema; `detail` says where and why. */
export class JsonInvalid extends Schema.TaggedError<JsonInvalid>()("JsonInvalid", {
  notJson: Schema.Boolean,
  detail: Schema.String
}) {
  get exitCode() {
    return ExitCode.failure
  }
}

/** The issues of a decoding, by path: `layers.0.catalog: is missing; ...`. */
export const describeIssues = (error: ParseResult.ParseError) =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length === 0 ? "(top level)" : issue.path.join(".")}: ${issue.message}`)
    .join("; ")

/** JSON text of `schema`. */
export const decodeJson = <A, I>(schema: Schema.Schema<A, I>, options?: ParseOptions) => {
  const decode = Schema.decodeUnknown(schema, options)
  return (text: string): Effect.Effect<A, JsonInvalid> =>
    Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (e) => new JsonInvalid({ notJson: true, detail: (e as Error).message })
    }).pipe(
      Effect.flatMap((json) =>
        Effect.mapError(decode(json), (e) => new JsonInvalid({ notJson: false, detail: describeIssues(e) }))
      )
    )
}

/** A JSON file of `schema` below a destination; none when it does not exist. */
export const readJson = <A, I>(
  dest: Destination,
  schema: Schema.Schema<A, I>,
  key: string
): Effect.Effect<Option.Option<A>, SinkError | JsonInvalid> => {
  const decode = decodeJson(schema)
  return Effect.flatMap(
    dest.read(key),
    Option.match({ onNone: () => Effect.succeedNone, onSome: (text) => Effect.asSome(decode(text)) })
  )
}

/** Writes JSON whole (readers see the old file or the new one, never half); a full disk is a SinkError naming the file. */
export const writeJson = (dest: Destination, key: string, value: unknown): Effect.Effect<void, SinkError> =>
  dest.write(key, JSON.stringify(value, null, 2) + "\n")

/** A local file that cannot be read; `why` in plain words ("the file does not exist"). */
export class FileUnreadable
  extends Schema.TaggedError<FileUnreadable>()("FileUnreadable", { file: Schema.String, why: Schema.String })
{
  get exitCode() {
    return ExitCode.failure
  }
}

const unreadable = (file: string, e: unknown) => {
  const code = (e as NodeJS.ErrnoException).code
  const why = code === "ENOENT"
    ? "the file does not exist"
    : code === "EISDIR"
    ? "this is a directory"
    : `it cannot be read (${code ?? String(e)})`
  return new FileUnreadable({ file, why })
}

/** A local JSON file the user gave (a job config, a catalog configuration). */
export const readJsonFile = <A, I>(
  file: string,
  schema: Schema.Schema<A, I>,
  options?: ParseOptions
): Effect.Effect<A, FileUnreadable | JsonInvalid> =>
  Effect.tryPromise({ try: () => fs.readFile(file, "utf8"), catch: (e) => unreadable(file, e) }).pipe(
    Effect.flatMap(decodeJson(schema, options))
  )
