import * as path from "node:path"
import type { LayerResult } from "../../pipelines/nightly-export.ts"
import { rate } from "../export/Progress.ts"

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`

const what = (m: { catalogHrn: string; layerId: string; layerType: string; version: number; snapshot?: string | undefined; mode: string }) =>
  `${m.catalogHrn} ${m.layerId} ${m.layerType === "volatile" ? `snapshot ${m.snapshot}` : `version ${m.version}`}${m.mode === "changes" ? " (changes)" : ""}`

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
  return `Exported ${what(m)}: ${m.partitions} partitions (${m.deleted} deleted), ${mb(m.bytes)}, ${m.files.length} file(s) ` +
    `in ${(elapsedMs / 1000).toFixed(1)} s (${rate(m.partitions, elapsedMs).toFixed(0)} partitions/s, ` +
    `${(m.bytes / 1e6 / Math.max(elapsedMs / 1000, 0.001)).toFixed(1)} MB/s, ${retries} retries${reused}) -> ${result.dir}`
}

/** A query a user can paste to look at what was written. */
export const duckdbHint = (result: LayerResult): string | undefined => {
  if (result._tag === "UpToDate") return undefined
  if (!result.manifest.files.some((f) => f.format === "parquet")) return undefined
  const glob = path.join(result.dir, "*.parquet")
  return `duckdb -c "SELECT partition, partition_version, data_size, octet_length(data) AS bytes, checksum FROM read_parquet('${glob}') LIMIT 5"`
}
