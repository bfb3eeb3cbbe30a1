import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import {
  applyRetention,
  planRetention,
  policyOfJob,
  type RetentionJob,
  type RetentionPlan,
  setAutomaticDeletion
} from "../../pipelines/retention.ts"
import type { ExpiredTable } from "../../pipelines/tables.ts"
import { ExitCode, UsageError } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import { exportCheckOf } from "../retention/Guard.ts"
import type { SharedHandle } from "../retention/HandleReuse.ts"
import type { Policy } from "../retention/Policy.ts"
import {
  clientFor,
  type Connection,
  connectionOf,
  durationOption,
  type GlobalOptions,
  globalOptions
} from "./common.ts"
import { JobFailed } from "./Exit.ts"
import { loggerLayer } from "./Logging.ts"
import { canAsk, confirm, render, type Renderer } from "./render.ts"

const date = (ms: number) => new Date(ms).toISOString()

const describePlan = (plan: RetentionPlan) => {
  const head =
    `Catalog ${plan.catalogHrn}: minimum version ${plan.minimum}, latest ${plan.latest}. Policy: ${plan.policy}.`
  if (plan.target <= plan.minimum) return `${head}\nNothing to delete: the minimum version stays ${plan.minimum}.`
  const first = plan.deleted[0]
  const last = plan.deleted[plan.deleted.length - 1]
  const span = first === undefined || last === undefined
    ? ""
    : `, created ${date(first.timestamp)} to ${date(last.timestamp)}`
  return `${head}\nRaising the minimum version to ${plan.target} deletes versions ${plan.minimum}..${
    plan.target - 1
  } ` +
    `(${plural(plan.deleted.length, "version")}${span}).\n` +
    `This cannot be undone: deleted versions, their partition metadata and their data are removed permanently.`
}

const describeShared = (shared: ReadonlyArray<SharedHandle>) => {
  if (shared.length === 0) return []
  const shown = shared.slice(0, 10).map((h) =>
    `'${h.partition}' of layer '${h.layer}' (version ${h.version}, data handle ${h.dataHandle}, published by version ${h.publishedBy.version})`
  )
  return [
    `warning: ${
      plural(shared.length, "partition")
    } of the versions that stay reference data handles first published in versions this deletes; ` +
    `their data is deleted with those versions (the interface's data-handle rule 3: a handle reused across versions): ${
      shown.join(", ")
    }` +
    `${
      shared.length > shown.length ? `, and ${shared.length - shown.length} more` : ""
    }. Publish their data under new data handles before deleting, or keep those versions.`
  ]
}

/** Whether the plan is carried out (not refused, not a dry run, and it raises the minimum). */
const carriesOut = (plan: RetentionPlan, dryRun: boolean) =>
  plan.target > plan.minimum && plan.refusal === undefined && !dryRun

/** The --json document: the plan, and the tables' expiry as planned (dry run) or as carried out. */
const retentionJson = (plan: RetentionPlan, dryRun: boolean, tables: ReadonlyArray<ExpiredTable>) => ({
  catalog: plan.catalogHrn,
  policy: plan.policy,
  minimum: plan.minimum,
  latest: plan.latest,
  target: plan.target,
  deletes: plan.deleted,
  sharedHandles: plan.sharedHandles,
  refused: plan.refusal?.message ?? null,
  ...(tables.length === 0 ? {} : { tables }),
  dryRun,
  applied: carriesOut(plan, dryRun)
})

/**
 * What retention will do, printed before anything is changed. With --json it is printed here only
 * when nothing is carried out; otherwise once done, with what was applied (carriedOut).
 */
const planned: Renderer<{ readonly plan: RetentionPlan; readonly dryRun: boolean }> = {
  json: ({ dryRun, plan }) => carriesOut(plan, dryRun) ? undefined : retentionJson(plan, dryRun, plan.tables),
  text: ({ plan }) => [describePlan(plan), ...plan.tables.map((t) => describeTable(t, "expires"))]
}

/** One Iceberg table's expiry: the tags below the new minimum and the files only they use. */
const describeTable = (t: ExpiredTable, verb: string) =>
  t.failed !== undefined
    ? `  table ${t.location}: could not be expired (${t.failed}); the next retention run catches up.`
    : `  table ${t.location}: ${verb} ${plural(t.tags.length, "tag")}${
      t.tags.length === 0 ? "" : ` (${t.tags.join(", ")})`
    }, ${plural(t.files.length, "file")} only they use`

/** What retention did; with --json, the plan and the tables' expiry as applied. */
const carriedOut: Renderer<
  { readonly plan: RetentionPlan; readonly dryRun: boolean; readonly tables: ReadonlyArray<ExpiredTable> }
> = {
  json: ({ dryRun, plan, tables }) => carriesOut(plan, dryRun) ? retentionJson(plan, dryRun, tables) : undefined,
  text: ({ dryRun, plan, tables }) => [
    dryRun
      ? "Dry run: nothing was changed."
      : `Done: the minimum version of ${plan.catalogHrn} is now ${plan.target}.`,
    ...tables.map((t) => describeTable(t, "expired"))
  ]
}

interface RetentionSettings {
  readonly catalog: string
  readonly policy: Policy
  readonly requireExported: string | undefined
  readonly skipExportCheck: boolean
  readonly layers: ReadonlyArray<string>
  readonly dryRun: boolean
  /** Carry out the plan without asking (on a terminal it is asked for; elsewhere never). */
  readonly yes: boolean
  readonly json: boolean
  /** How the user gave the two guard settings (flags or job config fields), for messages. */
  readonly names: { readonly require: string; readonly skip: string }
}

/**
 * Plans, prints the plan (also when it is refused), then carries it out unless refused or a dry run,
 * on a terminal only once the person confirms it (unless --yes). Nothing is changed before the plan is printed.
 */
const retention = (s: RetentionSettings, connection: Connection) =>
  Effect.gen(function*() {
    const exportCheck = yield* exportCheckOf({
      requireExported: s.requireExported,
      skipExportCheck: s.skipExportCheck,
      layers: s.layers.length === 0 ? undefined : s.layers,
      names: s.names
    })
    const plan = yield* planRetention({ catalog: s.catalog, policy: s.policy, exportCheck })
    yield* render(planned, { plan, dryRun: s.dryRun }, s.json)
    for (const line of describeShared(plan.sharedHandles)) yield* Console.error(line)
    if (plan.refusal !== undefined) {
      if (s.dryRun) yield* render(carriedOut, { plan, dryRun: true, tables: [] }, s.json)
      return yield* plan.refusal
    }
    if (plan.target <= plan.minimum) return
    if (!s.dryRun && !s.yes && canAsk()) {
      const go = yield* confirm(
        `Delete versions ${plan.minimum}..${plan.target - 1} of ${plan.catalogHrn} permanently?`
      )
      if (!go) {
        return yield* new JobFailed({
          exitCode: ExitCode.failure,
          message: "Not confirmed: nothing was changed (answer y to delete; --yes skips the question)."
        })
      }
    }
    const tables = s.dryRun ? [] : yield* applyRetention(plan)
    yield* render(carriedOut, { plan, dryRun: s.dryRun, tables }, s.json)
  }).pipe(Effect.provide(clientFor(connection, s.catalog, { concurrency: 4 })))

export const runRetentionJob = (
  job: RetentionJob,
  file: string,
  global: GlobalOptions & { readonly json: boolean; readonly dryRun: boolean; readonly yes: boolean }
) =>
  Effect.gen(function*() {
    const policy = yield* policyOfJob(job, file)
    yield* retention({
      catalog: job.catalog,
      policy,
      requireExported: job.requireExported,
      skipExportCheck: job.skipExportCheck ?? false,
      layers: job.layers ?? [],
      dryRun: global.dryRun || (job.dryRun ?? false),
      yes: global.yes,
      json: global.json,
      names: { require: `"requireExported" in ${file}`, skip: `"skipExportCheck": true` }
    }, connectionOf(global, job))
  })

export const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("Print what would be deleted and change nothing.")
)

export const yes = Options.boolean("yes").pipe(
  Options.withDescription(
    "Delete without asking. On a terminal retention shows its plan and asks first; elsewhere (cron, a pipe) it never asks."
  )
)

const catalog = Options.text("catalog").pipe(Options.withDescription("Catalog HRN."))

const auto = Command.make(
  "auto",
  {
    ...globalOptions,
    catalog,
    keep: Options.integer("keep").pipe(
      Options.optional,
      Options.withDescription("Keep this many versions: each new version deletes the oldest beyond it (1..50000).")
    ),
    disable: Options.boolean("disable").pipe(Options.withDescription("Turn automatic version deletion off."))
  },
  (o) =>
    Effect.gen(function*() {
      if (Option.isSome(o.keep) === o.disable) {
        return yield* new UsageError({ message: "Give exactly one of --keep N and --disable." })
      }
      if (Option.isSome(o.keep) && (o.keep.value < 1 || o.keep.value > 50_000)) {
        return yield* new UsageError({ message: `--keep must be within 1..50000, got ${o.keep.value}.` })
      }
      yield* setAutomaticDeletion(o.catalog, Option.isSome(o.keep) ? o.keep.value : "disable").pipe(
        Effect.provide(clientFor(connectionOf(o), o.catalog, { concurrency: 2 }))
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
    keepLast: Options.integer("keep-last").pipe(
      Options.optional,
      Options.withDescription("Keep the newest N versions.")
    ),
    olderThan: durationOption("older-than", "a duration such as 30d, 12h or \"7 days\"").pipe(
      Options.optional,
      Options.withDescription("Delete versions created longer ago than this (30d, 12h, \"7 days\").")
    ),
    minimum: Options.integer("minimum").pipe(
      Options.optional,
      Options.withDescription("Raise the minimum version to exactly V.")
    ),
    requireExported: Options.text("require-exported").pipe(
      Options.withPseudoName("LOCATION"),
      Options.optional,
      Options.withDescription(
        "Where the exports of this catalog are (the --out of the exports): only versions whose data is in an intact committed export there may be deleted. This or --skip-export-check is required."
      )
    ),
    skipExportCheck: Options.boolean("skip-export-check").pipe(
      Options.withDescription("Delete versions whether or not they were exported (no export guard).")
    ),
    layers: Options.text("layer").pipe(
      Options.repeated,
      Options.withDescription(
        "With --require-exported: the layers whose exports count (default: every versioned layer)."
      )
    ),
    dryRun,
    yes,
    json: Options.boolean("json").pipe(Options.withDescription("Print the plan and its outcome as one JSON object."))
  },
  (o) =>
    Effect.gen(function*() {
      if (Option.isNone(o.catalog)) return yield* new UsageError({ message: "Give the catalog with --catalog HRN." })
      const given =
        [Option.isSome(o.keepLast), Option.isSome(o.olderThan), Option.isSome(o.minimum)].filter(Boolean).length
      if (given !== 1) {
        return yield* new UsageError({
          message: "Give exactly one of --keep-last N, --older-than DURATION, --minimum V."
        })
      }
      let policy: Policy
      if (Option.isSome(o.keepLast)) {
        if (o.keepLast.value < 1) {
          return yield* new UsageError({ message: `--keep-last must be at least 1, got ${o.keepLast.value}.` })
        }
        policy = { _tag: "KeepLast", count: o.keepLast.value }
      } else if (Option.isSome(o.minimum)) {
        if (o.minimum.value < 0) {
          return yield* new UsageError({ message: `--minimum must be a version (>= 0), got ${o.minimum.value}.` })
        }
        policy = { _tag: "Minimum", version: o.minimum.value }
      } else {
        policy = { _tag: "OlderThan", age: Option.getOrThrow(o.olderThan) }
      }
      yield* retention({
        catalog: o.catalog.value,
        policy,
        requireExported: Option.getOrUndefined(o.requireExported),
        skipExportCheck: o.skipExportCheck,
        layers: o.layers,
        dryRun: o.dryRun,
        yes: o.yes,
        json: o.json,
        names: { require: "--require-exported LOCATION", skip: "--skip-export-check" }
      }, connectionOf(o))
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Raise a catalog's minimum version (deleting older versions) by a policy, only past versions already exported."
  ),
  Command.withSubcommands([auto])
)
