import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { BackfillJob, backfillRequestOf, runBackfill } from "../../pipelines/backfill.ts"
import { NightlyJob, previewLayer } from "../../pipelines/nightly-export.ts"
import { planRetention, policyOfJob, RetentionJob } from "../../pipelines/retention.ts"
import { Auth } from "../client/Auth.ts"
import { BlobApi, VolatileBlobApi } from "../client/BlobApi.ts"
import { ConfigApi } from "../client/ConfigApi.ts"
import { load as loadCredentials, looseAccess, resolvePath } from "../client/Credentials.ts"
import type { DataClient } from "../client/DataClient.ts"
import { Lookup } from "../client/Lookup.ts"
import { ExitCode, type HasExitCode } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import type { Encoder } from "../encoder/Encoder.ts"
import { jobKindOf, load as loadJob } from "../export/JobConfig.ts"
import { listPart } from "../export/Listing.ts"
import { makePlan } from "../export/Plan.ts"
import { writeSettingsOf } from "../export/Settings.ts"
import { exportLocation } from "../retention/ExportLocation.ts"
import { exportCheckOf } from "../retention/Guard.ts"
import { destination } from "../sinks/Destination.ts"
import { isObjectStore } from "../sinks/ObjectStore.ts"
import {
  clientLayer,
  connectionOf,
  globalOptions,
  lookupFromOf,
  lookupUrlFor,
  retryOptions,
  retryPolicyOf,
  summaryJson
} from "./common.ts"
import { exitCodeOf, exitMeaning, JobFailed, sentenceOf } from "./Exit.ts"
import { loggerLayer } from "./Logging.ts"
import { render, type Renderer } from "./render.ts"

/**
 * `catalog-export check`: the pre-flight of a job config (or of a catalog and layers), one line per
 * check, in the order a run needs them: credentials, token (and the clock against the token
 * service's), lookup, each catalog and layer (listed, and a blob read), the output location, the
 * retention guard's export location. The exit code is the first failed check's.
 */

export type Status = "ok" | "warn" | "fail" | "skip"

export interface CheckResult {
  readonly check: string
  readonly status: Status
  readonly detail: string
  readonly exitCode?: ExitCode
}

const ok = (check: string, detail: string): CheckResult => ({ check, status: "ok", detail })
const warn = (check: string, detail: string): CheckResult => ({ check, status: "warn", detail })
const skip = (check: string, detail: string): CheckResult => ({ check, status: "skip", detail })
const failed = (check: string, subject: string, error: HasExitCode): CheckResult => ({
  check,
  status: "fail",
  detail: `${subject}${sentenceOf(error)}`,
  exitCode: exitCodeOf(error)
})

/** What to check: the targets of a job config, or of the flags. */
export interface CheckTargets {
  readonly layers: ReadonlyArray<{ readonly catalog: string; readonly layer?: string | undefined }>
  readonly out: string | undefined
  readonly exportLocation: string | undefined
  readonly lookupUrl: string | undefined
  /** Where a given lookup URL came from (`connectionOf`). */
  readonly lookupFrom?: string | undefined
  readonly credentials: string | undefined
  readonly region: string | undefined
  /**
   * A job config's decision as its run would make it, changing nothing (the retention guard's
   * verdict, the versions a backfill would export, what a nightly run would do with each layer).
   */
  readonly decide?: Effect.Effect<ReadonlyArray<CheckResult>, never, DataClient | Encoder> | undefined
}

/** A clock this far from the token service's is worth fixing, though requests are then signed with its clock. */
const SKEW_WARNING_MS = 30_000

const checkOutput = (location: string): Effect.Effect<CheckResult> =>
  isObjectStore(location) ? storeOutput(location) : Effect.sync(() => localOutput(location))

/** Writes and removes a probe object where the export will write: credentials, endpoint, bucket and permission at once. */
const storeOutput = (location: string): Effect.Effect<CheckResult> =>
  Effect.gen(function*() {
    const dest = yield* destination(location)
    const key = `.catalog-export-check-${process.pid}`
    yield* dest.write(key, "")
    yield* dest.remove([key])
    return ok("output", `${location}: writable (a probe object written and removed)`)
  }).pipe(Effect.catchAll((error) => Effect.succeed(failed("output", "", error))))

/** Writes and removes a probe file where the export will write (or, not there yet, checks the directory that will hold it). */
const localOutput = (location: string): CheckResult => {
  const target = path.resolve(location)
  let existing = target
  while (!fs.existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing)
  try {
    if (!fs.statSync(existing).isDirectory()) {
      return {
        check: "output",
        status: "fail",
        detail: `${location}: ${existing} is a file, not a directory; choose another --out.`,
        exitCode: ExitCode.usage
      }
    }
    const probe = path.join(existing, `.catalog-export-check-${process.pid}`)
    fs.writeFileSync(probe, "")
    fs.rmSync(probe)
    const free = fs.statfsSync(existing)
    const gb = (free.bavail * free.bsize) / 1e9
    return ok(
      "output",
      `${location}: ${
        existing === target ? "writable" : `does not exist yet; ${existing} is writable, so it can be created`
      } (${gb.toFixed(1)} GB free)`
    )
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? String(e)
    return {
      check: "output",
      status: "fail",
      detail: `${location}: cannot write in ${existing} (${code}); choose a writable directory with --out.`,
      exitCode: ExitCode.usage
    }
  }
}

const checkExportLocation = (spec: string) =>
  exportLocation(spec).pipe(
    Effect.flatMap((location) => location.list("")),
    Effect.map((entries) =>
      ok(
        "export location",
        `${spec}: readable (${entries.length} entr${
          entries.length === 1 ? "y" : "ies"
        }: what the retention guard reads)`
      )
    ),
    Effect.catchAll((error) =>
      Effect.succeed({
        check: "export location",
        status: "fail" as const,
        detail: error.message,
        exitCode: ExitCode.usage
      })
    )
  )

const checkCredentials = (explicit: string | undefined) =>
  Effect.gen(function*() {
    const { path: file } = yield* resolvePath(explicit)
    const loaded = yield* Effect.either(loadCredentials(explicit))
    if (Either.isLeft(loaded)) return [failed("credentials", "", loaded.left)]
    const loose = yield* looseAccess(file)
    return [
      ok("credentials", `${file}: complete (key id, key secret and token endpoint ${loaded.right.tokenEndpointUrl})`),
      ...(loose === undefined ? [] : [warn("credentials", loose)])
    ]
  })

/** Token, lookup, catalogs and layers through one client (one lookup service). */
const checkService = (lookupUrl: string, layers: CheckTargets["layers"]) =>
  Effect.gen(function*() {
    const results: Array<CheckResult> = []
    const auth = yield* Auth
    const started = Date.now()
    const token = yield* Effect.either(auth.token)
    if (Either.isLeft(token)) {
      return [failed("token", "", token.left), skip("lookup", "needs a token"), skip("catalogs", "need a token")]
    }
    const skew = yield* auth.clockSkew
    const clock = skew === undefined
      ? "the token service sent no Date to compare clocks with"
      : Math.abs(skew) < 2000
      ? "clock within a second or two of the token service's"
      : `clock skew ${(skew / 1000).toFixed(0)} s (the token service's clock minus this machine's)`
    results.push(
      skew !== undefined && Math.abs(skew) >= SKEW_WARNING_MS
        ? warn(
          "token",
          `obtained in ${
            Date.now() - started
          } ms, but this machine's ${clock}: requests are signed with the token service's clock; fix the clock (NTP)`
        )
        : ok("token", `obtained in ${Date.now() - started} ms; ${clock}`)
    )
    const apis = yield* Effect.either((yield* Lookup).apis())
    if (Either.isLeft(apis)) {
      return [...results, failed("lookup", `${lookupUrl}: `, apis.left), skip("catalogs", "need the lookup service")]
    }
    results.push(ok("lookup", `${lookupUrl}: answers (${apis.right.length} platform APIs)`))

    const byCatalog = new Map<string, Array<string>>()
    for (const t of layers) {
      const list = byCatalog.get(t.catalog) ?? []
      if (t.layer !== undefined) {
        list.push(t.layer)
      }
      byCatalog.set(t.catalog, list)
    }
    for (const [catalog, ids] of byCatalog) {
      const config = yield* Effect.either((yield* ConfigApi).getCatalog(catalog))
      if (Either.isLeft(config)) {
        results.push(failed("catalog", `${catalog}: `, config.left))
        continue
      }
      results.push(ok("catalog", `${catalog}: readable (${plural(config.right.layers.length, "layer")})`))
      for (const layer of ids) {
        results.push(yield* checkLayer(catalog, layer))
      }
    }
    return results
  })

/** The layer as an export plans it, its first listed partition, and that partition's blob (HEAD). */
const checkLayer = (catalog: string, layer: string) =>
  Effect.gen(function*() {
    const plan = yield* makePlan({ catalog, layer, version: "latest", parts: 1 })
    const first = yield* Stream.runHead(listPart(plan, undefined))
    const where = plan.layerType === "volatile" ? "volatile" : `versioned, version ${plan.version}`
    if (Option.isNone(first)) return ok("layer", `${catalog} ${layer}: readable (${where}), no partitions`)
    const blobs = plan.layerType === "volatile" ? yield* VolatileBlobApi : yield* BlobApi
    const blob = yield* blobs.head(plan.catalogHrn, plan.layerId, first.value.dataHandle)
    return ok(
      "layer",
      `${catalog} ${layer}: readable (${where}); partition '${first.value.partition}' listed and its blob ${
        blob.exists ? "found" : "answered"
      }`
    )
  }).pipe(Effect.catchAll((error) => Effect.succeed(failed("layer", `${catalog} ${layer}: `, error))))

export const runChecks = (
  targets: CheckTargets,
  retry: Parameters<typeof retryPolicyOf>[0],
  onResult: (r: CheckResult) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const results: Array<CheckResult> = []
    const report = (r: CheckResult) => Effect.zipRight(Effect.sync(() => results.push(r)), onResult(r))
    const credentials = yield* checkCredentials(targets.credentials)
    yield* Effect.forEach(credentials, report, { discard: true })
    if (credentials.some((r) => r.status === "fail")) {
      yield* report(skip("token", "needs the credentials"))
    } else if (targets.layers.length > 0 || targets.lookupUrl !== undefined) {
      // One client per lookup service, as a job builds them.
      const groups = new Map<string, Array<CheckTargets["layers"][number]>>()
      for (const t of targets.layers.length > 0 ? targets.layers : [undefined]) {
        const url = lookupUrlFor(targets.lookupUrl, t?.catalog)
        groups.set(url, [...(groups.get(url) ?? []), ...(t === undefined ? [] : [t])])
      }
      for (const [lookupUrl, layers] of groups) {
        const client = clientLayer({
          lookupUrl,
          lookupFrom: lookupFromOf(targets, lookupUrl),
          credentials: targets.credentials,
          concurrency: 2,
          retry: { maxElapsed: "15 seconds", maxRetries: 2, ...retryPolicyOf(retry) },
          region: targets.region
        })
        const checked = yield* checkService(lookupUrl, layers).pipe(
          Effect.flatMap((results) =>
            targets.decide === undefined || results.some((r) => r.status === "fail")
              ? Effect.succeed(results)
              : Effect.map(targets.decide, (decided) => [...results, ...decided])
          ),
          Effect.provide(client),
          Effect.catchAll((error) => Effect.succeed([failed("lookup", `${lookupUrl}: `, error)])),
          // What the client would log (a loose credentials file, a clock re-signed) is a check line here.
          Logger.withMinimumLogLevel(LogLevel.Error)
        )
        yield* Effect.forEach(checked, report, { discard: true })
      }
    }
    if (targets.out !== undefined) yield* report(yield* checkOutput(targets.out))
    if (targets.exportLocation !== undefined) yield* report(yield* checkExportLocation(targets.exportLocation))
    return results
  })

export const describeCheck = (r: CheckResult) =>
  `${({ ok: "ok", warn: "warn", fail: "FAIL", skip: "skip" } as const)[r.status].padEnd(4)}  ${
    r.check.padEnd(15)
  } ${r.detail}${r.exitCode === undefined ? "" : ` [exit ${r.exitCode}]`}`

/** A check's line as soon as it is done; with --json, the checks are in the one document at the end. */
const checked: Renderer<CheckResult> = { json: () => undefined, text: (r) => [describeCheck(r)] }

/** The counts and what the exit code means; with --json, every check and the exit code. */
const allChecked: Renderer<{ readonly results: ReadonlyArray<CheckResult>; readonly exitCode: ExitCode }> = {
  json: ({ exitCode, results }) => ({ checks: results, exitCode, exitMeaning: exitMeaning(exitCode) }),
  text: ({ exitCode, results }) => {
    const count = (s: Status) => results.filter((r) => r.status === s).length
    return [
      `${count("ok")} ok, ${plural(count("warn"), "warning")}, ${count("fail")} failed${
        count("skip") > 0 ? `, ${count("skip")} skipped` : ""
      }. ` +
      `Exit ${exitCode}: ${exitMeaning(exitCode)}.`
    ]
  }
}

/** What a job config asks a run to reach and write. */
const targetsOfConfig = (file: string) =>
  Effect.gen(function*() {
    // A config that says no job is checked as the nightly job, whose errors then name what is wrong.
    const kind = yield* jobKindOf(file).pipe(Effect.orElseSucceed(() => "nightly-export" as const))
    switch (kind) {
      case "nightly-export": {
        const job = yield* loadJob(NightlyJob, file)
        const settings = {
          out: job.out,
          mode: job.incremental === true ? "changes" as const : "full" as const,
          version: "latest" as const,
          parts: writeSettingsOf(job).parts,
          format: job.format
        }
        return {
          layers: job.layers,
          out: job.out,
          exportLocation: undefined,
          decide: Effect.forEach(job.layers, (target) => {
            const name = `${target.catalog} ${target.layer}: `
            return previewLayer(target, settings).pipe(
              Effect.map((p) =>
                ok(
                  "decision",
                  name + (p.action === "export"
                    ? `a run would export version ${p.version} (${
                      p.mode === "changes" ? `the changes since version ${p.baseVersion}` : "full"
                    })`
                    : p.action === "up-to-date"
                    ? `up to date at version ${p.version}`
                    : `version ${p.version} is already exported`)
                )
              ),
              Effect.catchAll((error) => Effect.succeed(failed("decision", name, error)))
            )
          }),
          lookupUrl: job.lookupUrl,
          credentials: job.credentials,
          region: job.region
        }
      }
      case "backfill": {
        const job = yield* loadJob(BackfillJob, file)
        return {
          layers: [{ catalog: job.catalog, layer: job.layer }],
          out: job.out,
          exportLocation: undefined,
          decide: Effect.gen(function*() {
            const versions: Array<number> = []
            yield* runBackfill(backfillRequestOf(job, { region: job.region, dryRun: true }), (o) =>
              Effect.sync(() => o.status === "would-export" && versions.push(o.version)))
            return [
              ok(
                "decision",
                `${job.catalog} ${job.layer} ${job.from}..${job.to}: a run would export ${
                  versions.length === 0
                    ? "no version"
                    : `${versions.length === 1 ? "version" : "versions"} ${versions.join(", ")}`
                }`
              )
            ]
          }).pipe(
            Effect.catchAll((error) =>
              Effect.succeed([failed("decision", `${job.catalog} ${job.layer}: `, error)])
            )
          ),
          lookupUrl: job.lookupUrl,
          credentials: job.credentials,
          region: job.region
        }
      }
      case "retention": {
        const job = yield* loadJob(RetentionJob, file)
        const layers = job.layers === undefined || job.layers.length === 0
          ? [{ catalog: job.catalog }]
          : job.layers.map((layer) => ({ catalog: job.catalog, layer }))
        return {
          layers,
          out: undefined,
          exportLocation: job.requireExported,
          decide: Effect.gen(function*() {
            const exportCheck = yield* exportCheckOf({
              requireExported: job.requireExported,
              skipExportCheck: job.skipExportCheck ?? false,
              layers: job.layers === undefined || job.layers.length === 0 ? undefined : job.layers,
              names: { require: `"requireExported" in ${file}`, skip: `"skipExportCheck": true` }
            })
            const plan = yield* planRetention({
              catalog: job.catalog,
              policy: yield* policyOfJob(job, file),
              exportCheck
            })
            if (plan.refusal !== undefined) return [failed("decision", "", plan.refusal)]
            return [
              ok(
                "decision",
                plan.target <= plan.minimum
                  ? `nothing to delete: the minimum version stays ${plan.minimum}`
                  : `a run would raise the minimum version of ${plan.catalogHrn} to ${plan.target}, deleting versions ${plan.minimum}..${
                    plan.target - 1
                  }`
              )
            ]
          }).pipe(Effect.catchAll((error) => Effect.succeed([failed("decision", "", error)]))),
          lookupUrl: job.lookupUrl,
          credentials: job.credentials,
          region: job.region
        }
      }
    }
  })

export const checkCommand = Command.make(
  "check",
  {
    ...globalOptions,
    ...retryOptions,
    json: summaryJson,
    config: Args.file({ name: "config.json", exists: "yes" }).pipe(
      Args.withDescription(
        "The job config to check (nightly-export, backfill or retention); or give --catalog instead."
      ),
      Args.optional
    ),
    catalog: Options.text("catalog").pipe(
      Options.optional,
      Options.withDescription("Catalog HRN to check (instead of a job config).")
    ),
    layer: Options.text("layer").pipe(
      Options.repeated,
      Options.withDescription("Layer of --catalog to check (repeat for several).")
    ),
    out: Options.text("out").pipe(Options.optional, Options.withDescription("Output location to check for writing.")),
    requireExported: Options.text("require-exported").pipe(
      Options.optional,
      Options.withDescription("Export location the retention guard reads, to check for reading.")
    )
  },
  (o) =>
    Effect.gen(function*() {
      const fromConfig: CheckTargets = Option.isSome(o.config)
        ? yield* targetsOfConfig(o.config.value)
        : {
          layers: [],
          out: undefined,
          exportLocation: undefined,
          lookupUrl: undefined,
          credentials: undefined,
          region: undefined
        }
      const flagged = Option.match(o.catalog, {
        onNone: () => [],
        onSome: (catalog) => (o.layer.length === 0 ? [{ catalog }] : o.layer.map((layer) => ({ catalog, layer })))
      })
      const targets: CheckTargets = {
        layers: flagged.length > 0 ? flagged : fromConfig.layers,
        out: Option.getOrElse(o.out, () => fromConfig.out),
        exportLocation: Option.getOrElse(o.requireExported, () => fromConfig.exportLocation),
        decide: fromConfig.decide,
        ...connectionOf(o, fromConfig)
      }
      const results = yield* runChecks(targets, o, (r) => render(checked, r, o.json))
      const failure = results.find((r) => r.status === "fail")
      const exitCode = failure?.exitCode ?? (failure === undefined ? ExitCode.ok : ExitCode.failure)
      yield* render(allChecked, { results, exitCode }, o.json)
      if (failure !== undefined) {
        return yield* new JobFailed({ exitCode, message: `check failed: ${failure.check}: ${failure.detail}` })
      }
    }).pipe(Effect.provide(loggerLayer(o)))
).pipe(
  Command.withDescription(
    "Check a job config (or --catalog/--layer/--out) before a run: credentials, token and clock, lookup, catalogs and layers, output and export locations. One line per check; the exit code is the first failure's."
  )
)
