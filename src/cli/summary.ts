import * as path from "node:path"
import { Either } from "effect"
import { decodeCounts } from "../../pipelines/backfill.ts"
import type { LayerOutcome, LayerResult, MinimumRaised } from "../../pipelines/nightly-export.ts"
import { rate } from "../export/Progress.ts"
import { ExitCode, exitCodeOf, sentenceOf } from "./Exit.ts"

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`

const what = (m: { catalogHrn: string; layerId: string; layerType: string; version: number; snapshot?: string | undefined; mode: string }) =>
  `${m.catalogHrn} ${m.layerId} ${m.layerType === "volatile" ? `snapshot ${m.snapshot}` : `version ${m.version}`}${m.mode === "changes" ? " (changes)" : ""}`

/** What decoding made of an export, for its summary line; empty for raw exports. */
export const describeDecode = (d: { readonly kind: string; readonly rows: number; readonly failed: number } | undefined): string => {
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
    return `Already exported ${what(m)} (${path.join(result.dir, "_manifest.json")}); nothing to do. Use --force to export again.`
  }
  const reused = result.counters.skippedParts > 0 ? `, ${result.counters.skippedParts} part(s) reused from an interrupted run` : ""
  return `Exported ${what(m)}: ${m.partitions} partitions (${m.deleted} deleted)${describeDecode(m.decode)}, ${mb(m.bytes)}, ${m.files.length} file(s) ` +
    `in ${(elapsedMs / 1000).toFixed(1)} s (${rate(m.partitions, elapsedMs).toFixed(0)} partitions/s, ` +
    `${(m.bytes / 1e6 / Math.max(elapsedMs / 1000, 0.001)).toFixed(1)} MB/s, ${retries} retries${reused}) -> ${result.dir}`
}

/** A query a user can paste to look at what was written. */
export const duckdbHint = (result: LayerResult): string | undefined => {
  if (result._tag === "UpToDate") return undefined
  if (!result.manifest.files.some((f) => f.format === "parquet")) return undefined
  const glob = path.join(result.dir, "*.parquet")
  return result.manifest.decode === undefined
    ? `duckdb -c "SELECT partition, partition_version, data_size, octet_length(data) AS bytes, checksum FROM read_parquet('${glob}') LIMIT 5"`
    : `duckdb -c "DESCRIBE SELECT * FROM read_parquet('${glob}')"`
}

/** One layer's outcome as JSON: the `--json` summary of `export` and, per layer, of `run`. */
export const outcomeJson = (o: LayerOutcome) => {
  const common = { catalog: o.catalog, layer: o.layer, elapsedMs: o.elapsedMs }
  if (Either.isLeft(o.result)) {
    const exitCode = exitCodeOf(o.result.left)
    return { ...common, status: "failed", exitCode, retry: exitCode === ExitCode.transient, message: sentenceOf(o.result.left) }
  }
  const r = o.result.right
  if (r._tag === "UpToDate") return { ...common, status: "up-to-date", exitCode: 0, version: r.version }
  const m = r.manifest
  return {
    ...common,
    status: r._tag === "Exported" ? "exported" : "already-exported",
    exitCode: 0,
    version: m.version,
    ...(m.snapshot === undefined ? {} : { snapshot: m.snapshot }),
    mode: m.mode,
    ...(m.baseVersion === undefined ? {} : { baseVersion: m.baseVersion }),
    dir: r.dir,
    partitions: m.partitions,
    deleted: m.deleted,
    bytes: m.bytes,
    files: m.files.length,
    ...decodeCounts(m),
    ...(o.note === undefined ? {} : { note: o.note }),
    ...(o.pruned.length === 0 ? {} : { removedSnapshots: o.pruned })
  }
}

/** The text summary of one layer: its note, its result line, the query hint, removed snapshots. */
export const outcomeLines = (o: LayerOutcome, retries: number, showHints: boolean): ReadonlyArray<string> => {
  if (Either.isLeft(o.result)) return [`Failed ${o.catalog} ${o.layer} (exit ${exitCodeOf(o.result.left)}): ${sentenceOf(o.result.left)}`]
  const hint = showHints ? duckdbHint(o.result.right) : undefined
  return [
    ...(o.note === undefined ? [] : [`${o.catalog} ${o.layer}: ${o.note}`]),
    describeResult(o.result.right, o.elapsedMs, retries),
    ...(hint === undefined ? [] : [`  query it: ${hint}`]),
    ...(o.pruned.length === 0 ? [] : [`  removed ${o.pruned.length} older snapshot(s) (keeping the newest): ${o.pruned.join(", ")}`])
  ]
}

export const describeRaised = (r: MinimumRaised) => `Raised the minimum version of ${r.catalogHrn} from ${r.from} to ${r.to}: versions ${r.from}..${r.to - 1} are deleted.`
