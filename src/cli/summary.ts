import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import { fileURLToPath } from "node:url"
import { decodeCounts } from "../../pipelines/backfill.ts"
import type { LayerOutcome, LayerPreview, LayerResult, MinimumRaised } from "../../pipelines/nightly-export.ts"
import { ExitCode } from "../domain/ExitCode.ts"
import { plural } from "../domain/Plural.ts"
import { TOOL } from "../domain/Tool.ts"
import type { Failover } from "../export/Failover.ts"
import { writeJson } from "../export/Json.ts"
import type { Manifest } from "../export/Manifest.ts"
import { type Counters, rate } from "../export/Progress.ts"
import { destination } from "../sinks/Destination.ts"
import { exitCodeOf, exitMeaning, sentenceOf } from "./Exit.ts"
import { duration, megabytes } from "./progress.ts"
import type { Renderer } from "./render.ts"

const RUN_REPORT = "_run.json"
const RUN_REPORTS = "_runs"

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`

const what = (
  m: {
    catalogHrn: string
    layerId: string
    layerType: string
    version: number
    snapshot?: string | undefined
    mode: string
  }
) =>
  `${m.catalogHrn} ${m.layerId} ${m.layerType === "volatile" ? `snapshot ${m.snapshot}` : `version ${m.version}`}${
    m.mode === "changes" ? " (changes)" : ""
  }`

/** What decoding made of an export, for its summary line; empty for raw exports. */
export const describeDecode = (
  d: { readonly kind: string; readonly rows: number; readonly failed: number } | undefined
): string => {
  if (d === undefined) return ""
  const failed = d.failed === 0 ? "" : `, ${d.failed} did not decode`
  return `, decoded as ${d.kind} into ${d.rows} rows${failed}`
}

/** One line per export, for humans and for cron mail. */
export const describeResult = (result: LayerResult, elapsedMs: number, retries: number): string => {
  if (result._tag === "UpToDate") {
    return `Up to date: ${result.catalogHrn} ${result.layerId} was exported through version ${result.version}; nothing to do.`
  }
  const m = result.manifest
  if (result._tag === "AlreadyExported") {
    const record = result.table === undefined ? `${result.dir}/_manifest.json` : `tag ${result.table.tag} of the table`
    return `Already exported ${what(m)} (${record}); nothing to do. Use --force to export again.`
  }
  const reused = result.counters.skippedParts > 0
    ? `, ${plural(result.counters.skippedParts, "part")} reused from an interrupted run`
    : ""
  const files = result.table === undefined
    ? plural(m.files.length, "file")
    : `${result.table.dataFiles} data and ${plural(result.table.deleteFiles, "delete file")}`
  const fetching = result.counters.fetching
  const limit = fetching === undefined
    ? ""
    : `, ${fetching.adaptive ? "found" : "pinned"} ${fetching.current} in flight${
      fetching.throttled === 0 ? "" : `, ${fetching.throttled} throttled`
    }`
  return `Exported ${what(m)}: ${plural(m.partitions, "partition")} (${m.deleted} deleted)${
    describeDecode(m.decode)
  }, ${mb(m.bytes)}, ${files} ` +
    `in ${(elapsedMs / 1000).toFixed(1)} s (${rate(m.partitions, elapsedMs).toFixed(0)} partitions/s, ` +
    `${
      (m.bytes / 1e6 / Math.max(elapsedMs / 1000, 0.001)).toFixed(1)
    } MB/s, ${retries} retries${limit}${reused}) -> ${result.dir}`
}

/** An export into an Iceberg table: the table, the metadata file engines open, the tag (docs/iceberg-tables.md). */
export const describeTable = (result: LayerResult): string | undefined => {
  if (result._tag === "UpToDate" || result.table === undefined) return undefined
  const t = result.table
  return `table ${t.location}, tag ${t.tag}, metadata ${t.metadataFile}`
}

/** A query a user can paste to look at what was written. */
export const duckdbHint = (result: LayerResult): string | undefined => {
  if (result._tag === "UpToDate") return undefined
  if (result.table !== undefined) {
    const file = result.table.metadataFile
    const local = file.startsWith("file://") ? fileURLToPath(file) : file
    return `duckdb -c "INSTALL iceberg; LOAD iceberg; SELECT count(*) FROM iceberg_scan('${local}')"`
  }
  if (!result.manifest.files.some((f) => f.format === "parquet")) return undefined
  const glob = `${result.dir}/*.parquet`
  return result.manifest.decode === undefined
    ? `duckdb -c "SELECT partition, partition_version, data_size, octet_length(data) AS bytes, checksum FROM read_parquet('${glob}') LIMIT 5"`
    : `duckdb -c "DESCRIBE SELECT * FROM read_parquet('${glob}')"`
}

/**
 * Which region served which parts of a multi-region catalog's export, and the failover that moved
 * it, when there was one.
 */
export const describeRegions = (regions: Manifest["regions"], failover: Failover | undefined): string | undefined => {
  if (regions === undefined || regions.length === 0) return undefined
  const byRegion = new Map<string, Array<number>>()
  for (const { part, region } of regions) byRegion.set(region, [...(byRegion.get(region) ?? []), part])
  const served = [...byRegion].map(([region, parts]) =>
    `${region} (part${parts.length === 1 ? "" : "s"} ${parts.join(", ")})`
  ).join(" and ")
  return `read from ${served}${
    failover === undefined ? "" : `; failed over from ${failover.from} to ${failover.to} after: ${failover.reason}`
  }`
}

/** What the blob downloads of a run found: pinned or adaptive, the limit at the end and at its highest, throttled answers. */
const concurrencyJson = (f: NonNullable<Counters["fetching"]>) => ({
  adaptive: f.adaptive,
  limit: f.current,
  highest: f.highest,
  throttled: f.throttled
})

/** One layer's outcome as JSON: the `--json` summary of `export` and, per layer, of `run` (and their `_run.json`). */
export const outcomeJson = (o: LayerOutcome) => {
  const c = o.counters
  const common = {
    catalog: o.catalog,
    layer: o.layer,
    elapsedMs: o.elapsedMs,
    retries: c.retries,
    ...(c.retries === 0 ? {} : { retriesByReason: c.retriesByReason }),
    ...(c.fetching === undefined ? {} : { concurrency: concurrencyJson(c.fetching) }),
    ...(c.buffer === undefined ? {} : { buffer: { limit: c.buffer.limit, peak: c.buffer.peak } })
  }
  if (Either.isLeft(o.result)) {
    const exitCode = exitCodeOf(o.result.left)
    return {
      ...common,
      status: "failed",
      exitCode,
      retry: exitCode === ExitCode.transient,
      message: sentenceOf(o.result.left),
      exitMeaning: exitMeaning(exitCode),
      // What it had fetched when it stopped (not committed: the next run keeps only finished parts).
      ...(o.failover === undefined ? {} : { failover: o.failover }),
      done: { partitions: c.partitions, bytes: c.bytes, total: c.total ?? null }
    }
  }
  const r = o.result.right
  if (r._tag === "UpToDate") return { ...common, status: "up-to-date", exitCode: ExitCode.ok, version: r.version }
  const m = r.manifest
  return {
    ...common,
    status: r._tag === "Exported" ? "exported" : "already-exported",
    exitCode: ExitCode.ok,
    version: m.version,
    ...(m.snapshot === undefined ? {} : { snapshot: m.snapshot }),
    mode: m.mode,
    ...(m.baseVersion === undefined ? {} : { baseVersion: m.baseVersion }),
    dir: r.dir,
    ...(r.table === undefined ? {} : { table: r.table }),
    partitions: m.partitions,
    deleted: m.deleted,
    bytes: m.bytes,
    files: m.files.length,
    ...(m.regions === undefined ? {} : { regions: m.regions }),
    ...(o.failover === undefined ? {} : { failover: o.failover }),
    ...decodeCounts(m),
    ...(o.note === undefined ? {} : { note: o.note }),
    ...(o.pruned.length === 0 ? {} : { removedSnapshots: o.pruned }),
    ...(o.compacted === undefined ? {} : { compacted: o.compacted })
  }
}

/** The text summary of one layer: its note, its result line, the query hint, removed snapshots. */
export const outcomeLines = (o: LayerOutcome, showHints: boolean): ReadonlyArray<string> => {
  if (Either.isLeft(o.result)) {
    return [
      `Failed ${o.catalog} ${o.layer} (exit ${exitCodeOf(o.result.left)}): ${sentenceOf(o.result.left)}`,
      ...(o.failover === undefined
        ? []
        : [`  after failing over from ${o.failover.from} to ${o.failover.to} (${o.failover.reason})`])
    ]
  }
  const hint = showHints ? duckdbHint(o.result.right) : undefined
  const table = describeTable(o.result.right)
  const regions = o.result.right._tag === "UpToDate"
    ? undefined
    : describeRegions(o.result.right.manifest.regions, o.failover)
  return [
    ...(o.note === undefined ? [] : [`${o.catalog} ${o.layer}: ${o.note}`]),
    describeResult(o.result.right, o.elapsedMs, o.counters.retries),
    ...(table === undefined ? [] : [`  ${table}`]),
    ...(regions === undefined ? [] : [`  ${regions}`]),
    ...(hint === undefined ? [] : [`  query it: ${hint}`]),
    ...(o.pruned.length === 0
      ? []
      : [`  removed ${plural(o.pruned.length, "older snapshot")} (keeping the newest): ${o.pruned.join(", ")}`]),
    ...(o.compacted === undefined
      ? []
      : [
        `  compacted the table: ${
          plural(o.compacted.rewritten, "data file")
        } rewritten, delete files ${o.compacted.deleteFilesBefore} -> ${o.compacted.deleteFilesAfter}`
      ])
  ]
}

export const describeRaised = (r: MinimumRaised) =>
  `Raised the minimum version of ${r.catalogHrn} from ${r.from} to ${r.to}: versions ${r.from}..${
    r.to - 1
  } are deleted.`

/** A minimum version raised after a commit (`commit --raise-minimum`): a line of text; nothing more with --json. */
export const raisedMinimum: Renderer<MinimumRaised> = {
  json: () => undefined,
  text: (r) => [describeRaised(r)]
}

/** What a run of one export or of a nightly job shows: every layer's outcome, the minimums raised, its run report. */
export interface RunShown {
  readonly outcomes: ReadonlyArray<LayerOutcome>
  readonly raised: ReadonlyArray<MinimumRaised>
  readonly report: { readonly exitCode: ExitCode }
}

/** `export`: the layer's lines, the run report's table on a terminal, the minimum raised; the run report with --json. */
export const exported: Renderer<RunShown> = {
  json: (r) => r.report,
  text: (r, terminal) => [
    ...r.outcomes.flatMap((o) => outcomeLines(o, false)),
    ...(terminal ? ["", ...reportTable(r.outcomes, r.report.exitCode)] : []),
    ...r.raised.map(describeRaised)
  ]
}

/** A nightly job (`run`, `demo`, which adds a query hint per layer): every layer's lines, the minimums raised, the table on a terminal. */
export const nightlyRun = (showHints: boolean): Renderer<RunShown> => ({
  json: (r) => r.report,
  text: (r, terminal) => [
    ...r.outcomes.flatMap((o) => outcomeLines(o, showHints)),
    ...r.raised.map(describeRaised),
    ...(terminal ? ["", ...reportTable(r.outcomes, r.report.exitCode)] : [])
  ]
})

/**
 * The run report for a person at a terminal: a row per layer (outcome, partitions, bytes, files,
 * duration, retries) and what the exit code means.
 */
export const reportTable = (outcomes: ReadonlyArray<LayerOutcome>, exitCode: ExitCode): ReadonlyArray<string> => {
  const rows = outcomes.map((o) => {
    const retries = o.counters.retries === 0
      ? "0"
      : `${o.counters.retries} (${
        Object.entries(o.counters.retriesByReason).map(([reason, n]) => `${reason}: ${n}`).join(", ")
      })`
    const row = (
      outcome: string,
      partitions: string,
      bytes: string,
      files: string
    ) => [`${o.catalog} ${o.layer}`, outcome, partitions, bytes, files, duration(o.elapsedMs / 1000, true), retries]
    if (Either.isLeft(o.result)) {
      const c = o.counters
      const done = c.partitions === 0 && c.total === undefined
        ? "-"
        : `${c.partitions.toLocaleString("en-US")}/${c.total?.toLocaleString("en-US") ?? "?"}`
      return row(`failed (exit ${exitCodeOf(o.result.left)})`, done, c.bytes === 0 ? "-" : megabytes(c.bytes), "-")
    }
    const r = o.result.right
    if (r._tag === "UpToDate") return row(`up to date (v${r.version})`, "-", "-", "-")
    const m = r.manifest
    const which = m.layerType === "volatile" ? "snapshot" : `v${m.version}${m.mode === "changes" ? " changes" : ""}`
    return row(
      `${r._tag === "Exported" ? "exported" : "already exported"} ${which}`,
      m.partitions.toLocaleString("en-US"),
      megabytes(m.bytes),
      String(m.files.length)
    )
  })
  const header = ["LAYER", "OUTCOME", "PARTITIONS", "BYTES", "FILES", "DURATION", "RETRIES"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  // Text columns to the left, numbers to the right.
  const cell = (value: string, i: number) => (i < 2 || i === 6 ? value.padEnd(widths[i]!) : value.padStart(widths[i]!))
  const line = (cells: ReadonlyArray<string>) => cells.map(cell).join("  ").trimEnd()
  return [line(header), ...rows.map(line), `Exit ${exitCode}: ${exitMeaning(exitCode)}.`]
}

/** The run report as one JSON document: what `--json` prints and `_runs/` and `_run.json` hold. */
export const reportDocument = <F extends { readonly exitCode: ExitCode }>(fields: F, startedAt: number) => ({
  ...fields,
  exitMeaning: exitMeaning(fields.exitCode),
  startedAt: new Date(startedAt).toISOString(),
  finishedAt: new Date().toISOString(),
  elapsedMs: Date.now() - startedAt,
  tool: { name: TOOL.name, version: TOOL.version }
})

/** `_runs/20261125T184217.123Z-nightly-export.json`: one report per run, in the order they started. */
export const runReportKey = (report: { readonly job: string; readonly startedAt: string }) =>
  `${RUN_REPORTS}/${report.startedAt.replace(/[-:]/g, "")}-${report.job}.json`

/**
 * Writes the run report as `OUT/_runs/<UTC start>-<job>.json`, and as `OUT/_run.json` (replaced
 * whole: the newest run's), when the output location exists: a run refused before it wrote anything
 * leaves no trace, nor does one whose output failed (a full disk: nothing more is written there).
 * Runs of several jobs into one output keep their reports apart. A report that cannot be written
 * does not change the run's outcome; it is logged.
 */
export const writeRunReport = (
  out: string,
  document: { readonly job: string; readonly startedAt: string },
  outcomes: ReadonlyArray<Pick<LayerOutcome, "result">> = []
) =>
  Effect.gen(function*() {
    if (outcomes.some((o) => Either.isLeft(o.result) && Predicate.isTagged(o.result.left, "SinkError"))) return
    const dest = yield* destination(out)
    if (!dest.remote && Option.isNone(yield* dest.stat(""))) return
    yield* writeJson(dest, runReportKey(document), document)
    yield* writeJson(dest, RUN_REPORT, document)
  }).pipe(
    Effect.catchAll((e) => Effect.logWarning(`could not write the run report ${RUN_REPORT} in ${out}: ${e.message}`))
  )

/** What a run would do with a layer (a dry run), or how it would fail. */
export type Previewed =
  & { readonly catalog: string; readonly layer: string }
  & (
    | LayerPreview
    | { readonly action: "fail"; readonly exitCode: ExitCode; readonly error: string }
  )

export const describePreview = (p: Previewed) => {
  const name = `${p.catalog} ${p.layer}`
  switch (p.action) {
    case "export":
      return `Would export ${name} version ${p.version} (${
        p.mode === "changes" ? `the changes since version ${p.baseVersion}` : "full"
      }, ${p.partitions === undefined ? "" : `${plural(p.partitions, "partition")} in `}${
        plural(p.parts, "metadata part")
      })${p.note === undefined ? "" : `: ${p.note}`}.`
    case "up-to-date":
      return `${name}: up to date at version ${p.version}, nothing to export.`
    case "already-exported":
      return `${name}: version ${p.version} is already exported, nothing to export.`
    case "fail":
      return `${name} would fail (exit ${p.exitCode}): ${p.error}`
  }
}

/** A nightly job's dry run: what each layer would do; one JSON object with --json. */
export const previewed: Renderer<ReadonlyArray<Previewed>> = {
  json: (layers) => ({ dryRun: true, layers }),
  text: (layers) => [...layers.map(describePreview), "Dry run: nothing was changed."]
}
