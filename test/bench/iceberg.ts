/**
 * Iceberg tables (`npx tsx test/bench/iceberg.ts`, sections 12-14 of `npm run bench`): the targets of
 * issue 22 against the local service (`serve`, demo seed: 200,000 partitions x 1 KiB in `places`), every
 * export in its own process under measured.mjs, its table in a temporary directory removed after.
 *
 *  12. CPU per partition: `export --format iceberg` vs `--format parquet` of the same version; <= 1.1x.
 *  13. A changes run over 1 % of the partitions (published as a new version: every 100th partition points
 *      at another partition's blob) vs the full Iceberg export of 12: bytes added to the table <= 3 %,
 *      wall time <= 20 % (start-up included on both sides).
 *  14. Reading a tag after 30 such changes runs (the export compacts on its own past its threshold) and
 *      `catalog-export compact`, vs reading a fresh full export of the same version: icebird (npm, the
 *      independent reader) in this process, best of 2 each, alternating; <= 1.5x the time. Both reads are
 *      compared with the service's listing of that version (partition, handle, checksum).
 *
 *   npx tsx test/bench/iceberg.ts                 200,000 partitions, 30 changes runs (~6 min quiet)
 *   npx tsx test/bench/iceberg.ts --quick         20,000 partitions, 5 changes runs
 *   options: --only=12,13 (14 needs 13's table and runs 12's exports too)
 * Prints markdown lines (the export benchmark records them).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { type Dispatcher, request } from "undici"
import { plural } from "../../src/domain/Plural.ts"
import { icebird } from "../support/icebird.ts"
import { bearerToken, CLI, DEMO_CATALOG, exportLayer, measure, type Source, withLocalService } from "./support.ts"

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",").map(Number)
const wanted = (section: number) => only === undefined || only.includes(section)
const PARTITIONS = quick ? 20_000 : 200_000
const RUNS = quick ? 5 : 30
const BLOB_BYTES = 1024
const LAYER = "places"

const fmt = (n: number, digits = 0) => n.toFixed(digits)
const verdict = (met: boolean) => (met ? "met" : "NOT met")

interface Listed {
  readonly partition: string
  readonly dataHandle: string
  readonly checksum?: string | undefined
  readonly dataSize?: number | undefined
}

/** The Data API of the local service, as a user's script calls it. */
const api = async (service: { readonly lookupUrl: string; readonly credentials: string }) => {
  const origin = new URL(service.lookupUrl).origin
  const headers = { authorization: `Bearer ${await bearerToken(service.credentials)}` }
  // A connection per call (reset): the exports between calls outlast the service's keep-alive.
  const call = async <A>(method: Dispatcher.HttpMethod, url: string, body?: unknown): Promise<A> => {
    const res = await request(`${origin}${url}`, {
      method,
      reset: true,
      ...(body === undefined
        ? { headers }
        : { headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) })
    })
    const text = await res.body.text()
    if (res.statusCode >= 300) throw new Error(`${method} ${url} answered ${res.statusCode}: ${text.slice(0, 300)}`)
    return (text === "" ? undefined : JSON.parse(text)) as A
  }
  const listing = async (version: number) =>
    (await call<{ partitions: Array<Listed> }>(
      "GET",
      `/metadata/v1/catalogs/${DEMO_CATALOG}/layers/${LAYER}/partitions?version=${version}&additionalFields=checksum,dataSize`
    )).partitions
  /** Publishes `partitions` as the next catalog version; its number. */
  const publish = async (partitions: ReadonlyArray<Listed>) => {
    const { id } = await call<{ id: string }>("POST", `/publish/v2/catalogs/${DEMO_CATALOG}/publications`, {
      layerIds: [LAYER]
    })
    await call("POST", `/publish/v2/catalogs/${DEMO_CATALOG}/layers/${LAYER}/publications/${id}/partitions`, {
      partitions
    })
    await call("PUT", `/publish/v2/catalogs/${DEMO_CATALOG}/publications/${id}`)
    for (let i = 0; i < 600; i++) {
      const done = await call<{ catalogVersion: number; details: { state: string } }>(
        "GET",
        `/publish/v2/catalogs/${DEMO_CATALOG}/publications/${id}`
      )
      if (done.details.state === "succeeded") return done.catalogVersion
      if (done.details.state === "failed") throw new Error(`publication ${id} failed`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`publication ${id} did not succeed in 60 s`)
  }
  return { listing, publish }
}

/** Bytes of every file under `dir`. */
const bytesUnder = (dir: string): number =>
  fs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .reduce((sum, e) => sum + fs.statSync(path.join(e.parentPath, e.name)).size, 0)

/** The table of the demo layer under an export's --out. */
const tableDir = (out: string) => path.join(out, "demo", LAYER)

/** The table's current metadata file. */
const currentMetadata = (out: string) => {
  const metadataDir = path.join(tableDir(out), "metadata")
  const hint = fs.readFileSync(path.join(metadataDir, "version-hint.text"), "utf8").trim()
  return JSON.parse(fs.readFileSync(path.join(metadataDir, `v${hint}.metadata.json`), "utf8")) as {
    refs: Record<string, { "snapshot-id": number }>
    snapshots: Array<{ "snapshot-id": number; summary: Record<string, string> }>
  }
}

/** The summary of the snapshot a tag points at. */
const tagSummary = (out: string, tag: string) => {
  const m = currentMetadata(out)
  const ref = m.refs[tag]
  if (ref === undefined) throw new Error(`${tableDir(out)} has no tag ${tag}`)
  return m.snapshots.find((s) => s["snapshot-id"] === ref["snapshot-id"])!.summary
}

/** Compactions the table went through: its snapshots of operation `replace`. */
const compactions = (out: string) =>
  currentMetadata(out).snapshots.filter((s) => s.summary.operation === "replace").length

/** The next version's changes: every 100th partition (shifted by `round`) points at its neighbour's blob. */
const onePercent = (layer: ReadonlyArray<Listed>, round: number): Array<Listed> =>
  layer.flatMap((p, i) => {
    if (i % 100 !== round % 100) return []
    const other = layer[(i + 1) % layer.length]!
    return [{
      partition: p.partition,
      dataHandle: other.dataHandle,
      checksum: other.checksum,
      dataSize: other.dataSize
    }]
  })

const key = (r: { partition: unknown; handle: unknown; checksum: unknown }) =>
  `${r.partition} ${r.handle} ${r.checksum}`

const main = async () => {
  await withLocalService(PARTITIONS, BLOB_BYTES, async (service, work) => {
    const source: Source = { ...service, catalog: DEMO_CATALOG, layer: LAYER }
    const dataApi = await api(service)
    const parquetOut = path.join(work, "parquet")
    const tableOut = path.join(work, "table")
    console.log(
      `${PARTITIONS} partitions x ${BLOB_BYTES} B (local service, demo seed), defaults; load ${
        os.loadavg().map((l) => l.toFixed(2)).join(" ")
      }.`
    )
    console.log("")

    // 12: the same version as Parquet and as a table.
    const parquet = exportLayer(source, parquetOut, ["--format", "parquet"])
    fs.rmSync(parquetOut, { recursive: true, force: true })
    const full = exportLayer(source, tableOut, ["--format", "iceberg"])
    const fullBytes = bytesUnder(tableDir(tableOut))
    const fullRecords = Number(tagSummary(tableOut, "v0")["total-records"])
    if (fullRecords !== PARTITIONS) throw new Error(`the table's v0 holds ${fullRecords} rows, expected ${PARTITIONS}`)
    if (wanted(12)) {
      const us = (cpuSeconds: number) => (cpuSeconds * 1e6) / PARTITIONS
      const ratio = full.cpuSeconds / parquet.cpuSeconds
      console.log(`#### 12. Iceberg: CPU per partition of a full export (${PARTITIONS} partitions)`)
      console.log("")
      console.log("| variant | CPU µs/partition | wall s | peak RSS MB |")
      console.log("|---|---|---|---|")
      console.log(
        `| --format parquet | ${fmt(us(parquet.cpuSeconds))} | ${fmt(parquet.wallSeconds, 1)} | ${
          fmt(parquet.maxRssMb)
        } |`
      )
      console.log(
        `| --format iceberg | ${fmt(us(full.cpuSeconds))} | ${fmt(full.wallSeconds, 1)} | ${fmt(full.maxRssMb)} |`
      )
      console.log("")
      console.log(`iceberg / parquet CPU = ${fmt(ratio, 2)} (target <= 1.1: ${verdict(ratio <= 1.1)})`)
      console.log("")
    }
    if (!wanted(13) && !wanted(14)) return

    // 13: one changes run over 1 % of the partitions.
    let layer = await dataApi.listing(0)
    let version = 0
    const changesRun = async (round: number) => {
      const changed = onePercent(layer, round)
      version = await dataApi.publish(changed)
      layer = await dataApi.listing(version)
      const before = bytesUnder(tableDir(tableOut))
      const run = exportLayer(source, tableOut, ["--format", "iceberg", "--mode", "changes"])
      const summary = tagSummary(tableOut, `v${version}`)
      return { run, changed: changed.length, bytes: bytesUnder(tableDir(tableOut)) - before, summary }
    }
    const first = await changesRun(0)
    if (wanted(13)) {
      const bytesRatio = first.bytes / fullBytes
      const timeRatio = first.run.wallSeconds / full.wallSeconds
      console.log(
        `#### 13. Iceberg: a changes run over 1 % of ${PARTITIONS} partitions (${first.changed} changed, version ${version})`
      )
      console.log("")
      console.log("| run | wall s | CPU s | bytes written | peak RSS MB |")
      console.log("|---|---|---|---|---|")
      console.log(
        `| full export (v0) | ${fmt(full.wallSeconds, 2)} | ${fmt(full.cpuSeconds, 2)} | ${fullBytes} | ${
          fmt(full.maxRssMb)
        } |`
      )
      console.log(
        `| changes run (v${version}: ${first.summary["catalog-export.mode"]}, ${
          first.summary["added-records"]
        } rows added, ${first.summary["added-position-deletes"] ?? 0} position deletes) | ${
          fmt(first.run.wallSeconds, 2)
        } | ${fmt(first.run.cpuSeconds, 2)} | ${first.bytes} | ${fmt(first.run.maxRssMb)} |`
      )
      console.log("")
      console.log(
        `bytes changes / full = ${fmt(100 * bytesRatio, 2)} % (target <= 3 %: ${verdict(bytesRatio <= 0.03)}); ` +
          `time changes / full = ${fmt(100 * timeRatio, 1)} % (target <= 20 %: ${verdict(timeRatio <= 0.2)})`
      )
      console.log("")
    }
    if (!wanted(14)) return

    // 14: RUNS changes runs in all, then compaction; the last tag read against a fresh full export of it.
    for (let round = 1; round < RUNS; round++) await changesRun(round)
    const compactedByExports = compactions(tableOut)
    const compact = measure(CLI, [
      "compact",
      "--out",
      tableOut,
      "--catalog",
      DEMO_CATALOG,
      "--layer",
      LAYER,
      "--quiet"
    ])
    const freshOut = path.join(work, "fresh")
    exportLayer(source, freshOut, ["--format", "iceberg", "--version", String(version)])
    const tag = `v${version}`
    const expected = layer.map((p) => key({ partition: p.partition, handle: p.dataHandle, checksum: p.checksum }))
      .sort()
    const reader = await icebird()
    try {
      const read = async (out: string) => {
        const started = performance.now()
        const rows = await reader.read(pathToFileURL(tableDir(out)).href, tag)
        const seconds = (performance.now() - started) / 1000
        const got = rows.map((r) => key({ partition: r.partition, handle: r.data_handle, checksum: r.checksum })).sort()
        if (got.length !== expected.length || got.some((k, i) => k !== expected[i])) {
          throw new Error(`icebird read ${got.length} rows of ${tag} in ${out}, not the service's ${expected.length}`)
        }
        return seconds
      }
      const times = { fresh: [] as Array<number>, changed: [] as Array<number> }
      for (let i = 0; i < 2; i++) {
        times.fresh.push(await read(freshOut))
        times.changed.push(await read(tableOut))
      }
      const fresh = Math.min(...times.fresh)
      const changed = Math.min(...times.changed)
      const ratio = changed / fresh
      const rate = (seconds: number) => fmt(layer.length / seconds)
      console.log(
        `#### 14. Iceberg: reading ${tag} after ${RUNS} changes runs and compaction (${layer.length} rows, icebird)`
      )
      console.log("")
      console.log(
        `the exports compacted the table ${plural(compactedByExports, "time")} on their own; \`compact\` took ${
          fmt(compact.wallSeconds, 1)
        } s (${compactions(tableOut) - compactedByExports} compaction); ` +
          `the table holds ${bytesUnder(tableDir(tableOut))} bytes, a fresh full export of ${tag} ${
            bytesUnder(tableDir(freshOut))
          }.`
      )
      console.log("")
      console.log(
        `icebird: ${rate(changed)} rows/s (${fmt(changed, 2)} s) after the changes runs, ${rate(fresh)} rows/s (${
          fmt(fresh, 2)
        } s) from the fresh export; time ratio ${fmt(ratio, 2)} (target <= 1.5: ${verdict(ratio <= 1.5)})`
      )
      console.log("")
    } finally {
      await reader.close()
    }
  })
}

await main()
