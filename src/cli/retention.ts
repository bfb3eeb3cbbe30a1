import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { Console, Effect, Option } from "effect"
import { type Policy, parseAge } from "../retention/Policy.ts"
import { applyRetention, planRetention, policyOfJob, type RetentionJob, type RetentionPlan, setAutomaticDeletion } from "../../pipelines/retention.ts"
import { clientLayer, type GlobalOptions, globalOptions, loggerLayer, resolveLookupUrl } from "./common.ts"
import { UsageError } from "./Exit.ts"

const date = (ms: number) => new Date(ms).toISOString()

const describePlan = (plan: RetentionPlan) => {
  const head = `Catalog ${plan.catalogHrn}: minimum version ${plan.minimum}, latest ${plan.latest}. Policy: ${plan.policy}.`
  if (plan.target <= plan.minimum) return `${head}\nNothing to delete: the minimum version stays ${plan.minimum}.`
  const first = plan.deleted[0]
  const last = plan.deleted[plan.deleted.length - 1]
  const span = first === undefined || last === undefined ? "" : `, created ${date(first.timestamp)} to ${date(last.timestamp)}`
  return `${head}\nRaising the minimum version to ${plan.target} deletes versions ${plan.minimum}..${plan.target - 1} ` +
    `(${plan.deleted.length} version(s)${span}).\n` +
    `This cannot be undone: deleted versions, their partition metadata and their data are removed permanently.`
}

interface RetentionSettings {
  readonly catalog: string
  readonly policy: Policy
  readonly requireExported: Option.Option<string>
  readonly layers: ReadonlyArray<string>
  readonly dryRun: boolean
}

const retention = (s: RetentionSettings, global: GlobalOptions, lookupFromConfig?: string, credentialsFromConfig?: string) =>
  Effect.gen(function*() {
    const plan = yield* planRetention({
      catalog: s.catalog,
      policy: s.policy,
      requireExported: Option.isSome(s.requireExported)
        ? { out: s.requireExported.value, layers: s.layers.length === 0 ? undefined : s.layers }
        : undefined
    })
    yield* Console.log(describePlan(plan))
    if (plan.target <= plan.minimum) return
    if (s.dryRun) return yield* Console.log("Dry run: nothing was changed.")
    yield* applyRetention(plan)
    yield* Console.log(`Done: the minimum version of ${plan.catalogHrn} is now ${plan.target}.`)
  }).pipe(Effect.provide(clientLayer({
    lookupUrl: resolveLookupUrl(global.lookupUrl, lookupFromConfig, s.catalog),
    credentials: Option.getOrElse(global.credentials, () => credentialsFromConfig),
    concurrency: 4
  })))

export const runRetentionJob = (job: RetentionJob, file: string, global: GlobalOptions) =>
  Effect.gen(function*() {
    const policy = yield* policyOfJob(job, file)
    yield* retention({
      catalog: job.catalog,
      policy,
      requireExported: Option.fromNullable(job.requireExported),
      layers: job.layers ?? [],
      dryRun: job.dryRun ?? false
    }, global, job.lookupUrl, job.credentials)
  })

const catalog = Options.text("catalog").pipe(Options.withDescription("Catalog HRN."))

const auto = Command.make(
  "auto",
  {
    ...globalOptions,
    catalog,
    keep: Options.integer("keep").pipe(Options.optional, Options.withDescription("Keep this many versions: each new version deletes the oldest beyond it (1..50000).")),
    disable: Options.boolean("disable").pipe(Options.withDescription("Turn automatic version deletion off."))
  },
  (o) =>
    Effect.gen(function*() {
      if (Option.isSome(o.keep) === o.disable) return yield* new UsageError({ message: "Give exactly one of --keep N and --disable." })
      if (Option.isSome(o.keep) && (o.keep.value < 1 || o.keep.value > 50_000)) {
        return yield* new UsageError({ message: `--keep must be within 1..50000, got ${o.keep.value}.` })
      }
      yield* setAutomaticDeletion(o.catalog, Option.isSome(o.keep) ? o.keep.value : "disable").pipe(
        Effect.provide(clientLayer({ lookupUrl: resolveLookupUrl(o.lookupUrl, undefined, o.catalog), credentials: Option.getOrUndefined(o.credentials), concurrency: 2 }))
      )
      yield* Console.log(
        Option.isSome(o.keep)
          ? `Automatic version deletion is on for ${o.catalog}: each new version keeps the last ${o.keep.value} and deletes older ones permanently.`
          : `Automatic version deletion is off for ${o.catalog}.`
      )
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(Command.withDescription("Turn automatic version deletion on (--keep N) or off (--disable)."))

export const retentionCommand = Command.make(
  "retention",
  {
    ...globalOptions,
    // Optional here only so that `retention auto --catalog X` parses (@effect/cli requires a parent's
    // required options even when a subcommand runs); checked below.
    catalog: catalog.pipe(Options.optional),
    keepLast: Options.integer("keep-last").pipe(Options.optional, Options.withDescription("Keep the newest N versions.")),
    olderThan: Options.text("older-than").pipe(Options.optional, Options.withDescription("Delete versions created longer ago than this (30d, 12h, \"7 days\").")),
    minimum: Options.integer("minimum").pipe(Options.optional, Options.withDescription("Raise the minimum version to exactly V.")),
    requireExported: Options.directory("require-exported").pipe(Options.optional, Options.withDescription("Refuse to delete a version whose data is not in a committed export under DIR.")),
    layers: Options.text("layer").pipe(Options.repeated, Options.withDescription("With --require-exported: the layers whose exports count (default: every versioned layer).")),
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("Print what would be deleted and change nothing."))
  },
  (o) =>
    Effect.gen(function*() {
      if (Option.isNone(o.catalog)) return yield* new UsageError({ message: "Give the catalog with --catalog HRN." })
      const given = [Option.isSome(o.keepLast), Option.isSome(o.olderThan), Option.isSome(o.minimum)].filter(Boolean).length
      if (given !== 1) return yield* new UsageError({ message: "Give exactly one of --keep-last N, --older-than DURATION, --minimum V." })
      let policy: Policy
      if (Option.isSome(o.keepLast)) {
        if (o.keepLast.value < 1) return yield* new UsageError({ message: `--keep-last must be at least 1, got ${o.keepLast.value}.` })
        policy = { _tag: "KeepLast", count: o.keepLast.value }
      } else if (Option.isSome(o.minimum)) {
        if (o.minimum.value < 0) return yield* new UsageError({ message: `--minimum must be a version (>= 0), got ${o.minimum.value}.` })
        policy = { _tag: "Minimum", version: o.minimum.value }
      } else {
        const age = parseAge(Option.getOrThrow(o.olderThan))
        if (age === undefined) return yield* new UsageError({ message: `--older-than '${Option.getOrThrow(o.olderThan)}' is not a duration; use for example 30d, 12h or "7 days".` })
        policy = { _tag: "OlderThan", age }
      }
      yield* retention({ catalog: o.catalog.value, policy, requireExported: o.requireExported, layers: o.layers, dryRun: o.dryRun }, o)
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription("Raise a catalog's minimum version (deleting older versions) by a policy, only past versions already exported."),
  Command.withSubcommands([auto])
)
