import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"
import { readJson } from "../export/Json.ts"
import { type Destination, destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import type { SinkError } from "../sinks/SinkError.ts"

/**
 * Where exports live, as the retention guard reads it: list a directory, read a JSON file, the size
 * of a file. Keys are `/`-separated paths below the location: a local directory or an object store
 * (`s3://bucket/prefix`), read through the export's Destination.
 */
export interface ExportLocation {
  /** How messages name the location (the path or URL as the user gave it). */
  readonly name: string
  /** The destination the exports were written to: Iceberg tables are read through it. */
  readonly dest: Destination
  /** Names directly below `dir` (empty when it does not exist). */
  readonly list: (dir: string) => Effect.Effect<ReadonlyArray<string>, SinkError>
  /** A JSON file of `schema`; none when it does not exist or does not decode. */
  readonly readJson: <A, I>(file: string, schema: Schema.Schema<A, I>) => Effect.Effect<Option.Option<A>, SinkError>
  /** A file's size in bytes; none when it does not exist. */
  readonly size: (file: string) => Effect.Effect<Option.Option<number>, SinkError>
}

/** The location cannot be read as given: not a directory, a scheme this version cannot read, or the store refused. */
export class ExportLocationError
  extends Schema.TaggedError<ExportLocationError>()("ExportLocationError", { message: Schema.String })
{
  get exitCode() {
    return ExitCode.failure
  }
}

const failed = <A, E extends { readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (e) => new ExportLocationError({ message: e.message }))

/** The exports below a destination (the `--out` of the exports). */
export const locationOf = (dest: Destination): ExportLocation => ({
  name: dest.name,
  dest,
  list: (dir) => Effect.map(dest.list(dir), (entries) => entries.map((e) => e.name)),
  readJson: (file, schema) =>
    readJson(dest, schema, file).pipe(Effect.catchTag("JsonInvalid", () => Effect.succeedNone)),
  size: (file) => Effect.map(dest.stat(file), Option.flatMap((e) => (e.dir ? Option.none() : Option.some(e.size))))
})

/** A local directory as an export location. */
export const localLocation = (root: string): ExportLocation => locationOf(Effect.runSync(destination(root)))

/** A location as given by `--require-exported` or `requireExported`: a local directory or an `s3://bucket/prefix`. */
export const exportLocation = (spec: string): Effect.Effect<ExportLocation, ExportLocationError> =>
  Effect.gen(function*() {
    const dest = yield* failed(destination(spec))
    if (!isObjectStore(spec)) {
      const isDirectory = yield* dest.stat("").pipe(
        Effect.map((entry) => Option.isSome(entry) && entry.value.dir),
        Effect.orElseSucceed(() => false)
      )
      if (!isDirectory) {
        return yield* new ExportLocationError({
          message:
            `Export location ${spec} is not a directory; give the directory the exports were written to (the --out of the export).`
        })
      }
    }
    return locationOf(dest)
  })
