import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as path from "node:path"
import * as DurationString from "../domain/DurationString.ts"
import { UsageError } from "../domain/ExitCode.ts"
import { regionOf, SELECTABLE_REGIONS } from "../domain/Region.ts"
import { MAX_TOKEN_SECONDS, SEED_DEFAULTS } from "../server/Defaults.ts"
import { loadServer } from "./lazy.ts"

/** A bound of `--latency` in milliseconds: a duration (DurationString), or a bare number of milliseconds. */
const millisOf = (bound: string) =>
  /^\d+(\.\d+)?$/.test(bound)
    ? Option.some(Number(bound))
    : Option.map(DurationString.parse(bound), Duration.toMillis)

/** `--latency`: fixed, or uniform within MIN-MAX, in milliseconds. */
const latencyRange = (raw: string) => {
  const bounds = raw.split("-").map((b) => millisOf(b.trim()))
  const [min, max = min] = bounds
  const invalid = (sentence: string) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(sentence)))
  if (bounds.length > 2 || min === undefined || Option.isNone(min) || max === undefined || Option.isNone(max)) {
    return invalid(
      `--latency takes a duration or a range MIN-MAX such as 20ms, 1s or 5ms-20ms (a bare number is milliseconds), got '${raw}'.`
    )
  }
  return max.value < min.value
    ? invalid(`--latency range ${raw} has its maximum below its minimum.`)
    : Effect.succeed([min.value, max.value] as const)
}

const options = {
  port: Options.integer("port").pipe(
    Options.withDefault(31005),
    Options.withDescription(
      "TCP port; 0 picks a free one (default 31005, the port HERE SDKs use for a local lookup service)."
    )
  ),
  host: Options.text("host").pipe(Options.withDefault("127.0.0.1"), Options.withDescription("Address to listen on.")),
  data: Options.directory("data").pipe(
    Options.optional,
    Options.withDescription(
      "Directory for SQLite metadata and blob files; survives restarts. A temporary directory when absent."
    )
  ),
  seed: Options.choice("seed", ["demo", "none"]).pipe(
    Options.withDefault("demo" as const),
    Options.withDescription("Seed the demo catalogs (skipped when --data already holds them).")
  ),
  seedPartitions: Options.integer("seed-partitions").pipe(
    Options.withDefault(SEED_DEFAULTS.partitions),
    Options.withDescription("Partitions of the demo 'places' layer at its first version.")
  ),
  seedVersions: Options.integer("seed-versions").pipe(
    Options.withDefault(SEED_DEFAULTS.versions),
    Options.withDescription("Catalog versions the demo seed creates.")
  ),
  seedBlobBytes: Options.integer("seed-blob-bytes").pipe(
    Options.withDefault(SEED_DEFAULTS.blobBytes),
    Options.withDescription("Bytes of each 'places' blob.")
  ),
  credentialsOut: Options.file("credentials-out").pipe(
    Options.optional,
    Options.withDescription(
      "Write a credentials.properties for the demo application (read and write on every seeded catalog)."
    )
  ),
  faults: Options.text("faults").pipe(
    Options.optional,
    Options.withDescription("Fault rates per request, e.g. 429=0.1,503=0.03,reset=0.02,truncate=0.01.")
  ),
  faultSeed: Options.integer("fault-seed").pipe(
    Options.withDefault(1),
    Options.withDescription("Seed of the fault generator; the same seed gives the same sequence.")
  ),
  latency: Options.text("latency").pipe(
    Options.withPseudoName("DURATION[-DURATION]"),
    Options.mapEffect(latencyRange),
    Options.optional,
    Options.withDescription(
      "Added latency per request: a duration (20ms, 1s) or a range MIN-MAX (5ms-20ms); a bare number is milliseconds."
    )
  ),
  retryAfter: Options.integer("retry-after").pipe(
    Options.withDefault(1),
    Options.withDescription("Seconds announced in Retry-After on injected 429/503.")
  ),
  faultsIncludeAuth: Options.boolean("faults-include-auth").pipe(
    Options.withDescription("Inject faults into token and lookup requests too.")
  ),
  tokenLifetime: Options.integer("token-lifetime").pipe(
    Options.withDefault(MAX_TOKEN_SECONDS),
    Options.withDescription("Longest token lifetime the service grants, in seconds (at most 86400).")
  ),
  regionsDown: Options.text("regions-down").pipe(
    Options.withPseudoName("REGION[,REGION]"),
    Options.optional,
    Options.withDescription(
      "Start with these regions down (eu-ireland, us-oregon): their catalog-bound APIs answer 503 until `catalog-export regions up`."
    )
  ),
  replicationDelay: Options.integer("replication-delay").pipe(
    Options.withDefault(1000),
    Options.withDescription(
      "Milliseconds a volatile or stream write to one region of a multi-region catalog takes to reach the other (default 1000)."
    )
  )
}

const positive = (name: string, value: number, min = 1) =>
  value >= min
    ? Effect.succeed(value)
    : Effect.fail(new UsageError({ message: `--${name} must be at least ${min}, got ${value}.` }))

export const serve = Command.make("serve", options, (o) =>
  Effect.gen(function*() {
    if (o.port < 0 || o.port > 65535) {
      return yield* new UsageError({ message: `--port must be within 0..65535, got ${o.port}.` })
    }
    yield* positive("seed-partitions", o.seedPartitions, 0)
    yield* positive("seed-versions", o.seedVersions)
    yield* positive("seed-blob-bytes", o.seedBlobBytes, 0)
    yield* positive("token-lifetime", o.tokenLifetime)
    yield* positive("replication-delay", o.replicationDelay, 0)
    const regionsDown = yield* Effect.forEach(
      Option.getOrElse(o.regionsDown, () => "").split(",").filter((r) => r.trim() !== ""),
      (raw) => {
        const region = regionOf(raw)
        return region === undefined
          ? Effect.fail(
            new UsageError({
              message: `--regions-down: unknown region '${raw.trim()}'; the regions are ${
                SELECTABLE_REGIONS.join(" and ")
              }.`
            })
          )
          : Effect.succeed(region)
      }
    )
    const { Faults, LocalService, defaultSeed, noSeed, defaultServiceOptions } = yield* loadServer
    const faults = yield* Effect.try({
      try: () => Option.match(o.faults, { onNone: () => ({}), onSome: Faults.parseFaults }),
      catch: (e) => new UsageError({ message: (e as Error).message })
    })
    const service = yield* LocalService.start({
      ...defaultServiceOptions,
      port: o.port,
      host: o.host,
      dataDir: Option.getOrUndefined(o.data),
      seed: o.seed === "demo"
        ? { ...defaultSeed, partitions: o.seedPartitions, versions: o.seedVersions, blobBytes: o.seedBlobBytes }
        : noSeed,
      faults: {
        ...Faults.noFaults,
        ...faults,
        latencyMs: Option.getOrElse(o.latency, () => Faults.noFaults.latencyMs),
        seed: o.faultSeed,
        retryAfterSeconds: o.retryAfter,
        includeAuthAndLookup: o.faultsIncludeAuth
      },
      auth: { maxTokenSeconds: Math.min(o.tokenLifetime, 86_400) },
      regionsDown,
      replicationDelayMs: o.replicationDelay
    })
    if (Option.isSome(o.credentialsOut)) {
      yield* LocalService.writeCredentials(o.credentialsOut.value, yield* service.credentialsFor())
    }
    yield* Console.log(LocalService.listeningLine(service))
    // For a person: the command that exports from it (stdout keeps the one JSON line scripts read).
    const credentials = Option.match(o.credentialsOut, {
      onNone: () => "FILE (write one with serve --credentials-out FILE)",
      onSome: (file) => path.resolve(file)
    })
    yield* Console.error(
      `Export from it: catalog-export export --catalog ${
        o.seed === "demo" ? "hrn:local:data:::demo --layer places" : "HRN --layer LAYER"
      } --out out --lookup-url ${service.lookupUrl} --credentials ${credentials}`
    )
    return yield* Effect.never
  }).pipe(Effect.scoped)).pipe(
    Command.withDescription(
      "Run the local catalog service (lookup, config, metadata, query, blob, publish, token) on loopback."
    )
  )
