import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Effect, Option, Schema } from "effect"

/**
 * Where exports live, as the retention guard reads it: list a directory, read a JSON file, the size
 * of a file. Keys are `/`-separated paths below the location. A local directory today; object
 * stores (`s3://bucket/prefix`) implement the same three reads.
 */
export interface ExportLocation {
  /** How messages name the location (the path or URL as the user gave it). */
  readonly name: string
  /** Names directly below `dir` (empty when it does not exist). */
  readonly list: (dir: string) => Effect.Effect<ReadonlyArray<string>>
  /** The parsed JSON of a file; none when it does not exist or is no JSON. */
  readonly readJson: (file: string) => Effect.Effect<Option.Option<unknown>>
  /** A file's size in bytes; none when it does not exist. */
  readonly size: (file: string) => Effect.Effect<Option.Option<number>>
}

/** The location cannot be read as given: not a directory, or a scheme this version cannot read. */
export class ExportLocationError extends Schema.TaggedError<ExportLocationError>()("ExportLocationError", { message: Schema.String }) {}

export const localLocation = (root: string): ExportLocation => {
  const at = (key: string) => path.join(root, ...key.split("/"))
  return {
    name: root,
    list: (dir) => Effect.promise(() => fs.readdir(at(dir)).catch(() => [] as Array<string>)),
    readJson: (file) =>
      Effect.promise(() =>
        fs.readFile(at(file), "utf8").then(
          (text) => {
            try {
              return Option.some(JSON.parse(text) as unknown)
            } catch {
              return Option.none()
            }
          },
          () => Option.none()
        )
      ),
    size: (file) => Effect.promise(() => fs.stat(at(file)).then((s) => (s.isFile() ? Option.some(s.size) : Option.none()), () => Option.none()))
  }
}

/** A location as given by `--require-exported` or `requireExported`: a local directory (object stores come later). */
export const exportLocation = (spec: string): Effect.Effect<ExportLocation, ExportLocationError> => {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(spec)?.[1]
  if (scheme !== undefined && scheme.toLowerCase() !== "file") {
    return Effect.fail(new ExportLocationError({ message: `Export location ${spec}: ${scheme}:// locations are not supported yet; give the local directory the exports were written to.` }))
  }
  const local = scheme === undefined ? spec : new URL(spec).pathname
  return Effect.promise(() => fs.stat(local).then((s) => s.isDirectory(), () => false)).pipe(
    Effect.flatMap((isDirectory) =>
      isDirectory
        ? Effect.succeed(localLocation(local))
        : Effect.fail(new ExportLocationError({ message: `Export location ${spec} is not a directory; give the directory the exports were written to (the --out of the export).` }))
    )
  )
}
