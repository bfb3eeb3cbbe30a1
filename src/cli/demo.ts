import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import demoJob from "../../config/demo.json" with { type: "json" }
import { NightlyJob } from "../../pipelines/nightly-export.ts"
import { decode, load } from "../export/JobConfig.ts"
import { fromCause } from "../sinks/SinkError.ts"
import { globalOptions } from "./common.ts"
import { loadServer } from "./lazy.ts"
import { loggerLayer } from "./Logging.ts"
import { runNightlyJob } from "./nightly.ts"

/**
 * `npm start`: the embedded default. Starts the local service with the demo seed on a free port,
 * runs the nightly job of config/demo.json against it and prints what was written.
 */
export const demoCommand = Command.make(
  "demo",
  {
    ...globalOptions,
    config: Options.file("config").pipe(
      Options.optional,
      Options.withDescription("Nightly job config to run (default: the embedded config/demo.json).")
    ),
    out: Options.text("out").pipe(
      Options.optional,
      Options.withDescription("Output directory (default: the config's out).")
    )
  },
  (o) =>
    Effect.gen(function*() {
      const started = Date.now()
      const job = Option.isSome(o.config)
        ? yield* load(NightlyJob, o.config.value)
        : yield* decode(NightlyJob, demoJob, "config/demo.json")
      const { LocalService, defaultSeed, defaultServiceOptions } = yield* loadServer
      const service = yield* LocalService.start({ ...defaultServiceOptions, port: 0, seed: defaultSeed })
      const dir = yield* Effect.acquireRelease(
        Effect.try({
          try: () => fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-demo-")),
          catch: (e) => fromCause(os.tmpdir(), "create a directory in", e)
        }),
        (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
      )
      const credentials = path.join(dir, "credentials.properties")
      yield* LocalService.writeCredentials(credentials, yield* service.credentialsFor())
      yield* Console.log(
        `Local catalog service with the demo catalog at ${service.url} (seeded in ${
          ((Date.now() - started) / 1000).toFixed(1)
        } s).`
      )
      const out = Option.getOrElse(o.out, () => job.out)
      const global = {
        ...o,
        lookupUrl: Option.some({ url: service.lookupUrl, from: "is the demo service's" }),
        credentials: Option.some(credentials)
      }
      yield* runNightlyJob({ ...job, out }, global, true)
      // One layer also as an Apache Iceberg table (docs/iceberg-tables.md), in a directory of its own.
      const places = job.layers.find((l) => l.layer === "places")
      if (places !== undefined) {
        yield* Console.log(`The places layer as an Iceberg table (a snapshot tagged v<N> per version):`)
        yield* runNightlyJob(
          { ...job, out: `${out.replace(/\/+$/, "")}/tables`, format: "iceberg", layers: [places] },
          global,
          true
        )
      }
      yield* Console.log(
        `Done in ${((Date.now() - started) / 1000).toFixed(1)} s. Run it again: finished exports are skipped.`
      )
    }).pipe(Effect.scoped, Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Start the local service with demo data and run the nightly export against it (what npm start runs)."
  )
)
