import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type Compacted, compactLayer, orphanAgeDefault } from "../../pipelines/tables.ts"
import { plural } from "../domain/Plural.ts"
import { choiceOption, durationOption, summaryJson } from "./common.ts"
import { loggerLayer } from "./Logging.ts"
import { render, type Renderer } from "./render.ts"

/**
 * `catalog-export compact --out OUT --catalog HRN --layer ID`: compaction of a layer's Iceberg table
 * (docs/iceberg-tables.md "Compaction"): data files with most rows deleted are written again without
 * them and the delete files folded into one, a snapshot of operation `replace` on `main`; then the
 * files no snapshot uses that stopped runs left (older than --orphans-older-than) are removed.
 */

const compacted: Renderer<Compacted> = {
  json: (c) => c,
  text: (c) => [
    c.metadataFile === undefined
      ? `Nothing to compact in ${c.location}: no data file has enough deleted rows, and at most one delete file.`
      : `Compacted ${c.location}: ${
        plural(c.rewritten, "data file")
      } rewritten, delete files ${c.deleteFilesBefore} -> ${c.deleteFilesAfter}; metadata ${c.metadataFile}`,
    ...(c.swept.length === 0 ? [] : [`  removed ${plural(c.swept.length, "file")} no snapshot used`])
  ]
}

export const compactCommand = Command.make(
  "compact",
  {
    out: Options.text("out").pipe(
      Options.withDescription("Where the table is: the --out of its exports (a directory or s3://bucket/prefix).")
    ),
    catalog: Options.text("catalog").pipe(Options.withPseudoName("HRN"), Options.withDescription("The catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withPseudoName("ID"), Options.withDescription("The layer id.")),
    orphansOlderThan: durationOption("orphans-older-than", "a duration such as 3d or 12h").pipe(
      Options.optional,
      Options.withDescription(
        "Files of stopped commits that no snapshot uses are removed once this old (default 3d: younger ones may belong to a commit in progress)."
      )
    ),
    logFormat: choiceOption("log-format", ["text", "json"]).pipe(
      Options.optional,
      Options.withDescription("Log lines: text (the default on a terminal) or json (the default otherwise).")
    ),
    quiet: Options.boolean("quiet").pipe(Options.withDescription("Print only errors and the final result.")),
    json: summaryJson
  },
  (o) =>
    Effect.gen(function*() {
      const done = yield* compactLayer({
        out: o.out,
        catalog: o.catalog,
        layer: o.layer,
        orphanAge: Option.getOrElse(o.orphansOlderThan, () => orphanAgeDefault)
      })
      yield* render(compacted, done, o.json)
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Compact a layer's Iceberg table: rewrite data files whose rows are mostly deleted, fold the delete files."
  )
)
