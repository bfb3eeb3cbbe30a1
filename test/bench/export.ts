/**
 * The throughput benchmark (`npm run bench`): the figures of issues 10, 22, 23 and 25 against their targets, as ratios
 * measured in one run. Each variant runs in its own process under test/bench/measured.mjs, which
 * records that process's own CPU time (user+sys, start-up included) and peak RSS; the blob server
 * runs in a process of its own too.
 *
 *   1. CPU per partition: 100,000 x 1-2 KiB, concurrency 64, fast server; ours (Parquet zstd,
 *      checksums verified) vs the hand-written exporter (undici + p-limit + parquetjs-lite, test/bench/naive.ts).
 *   2. Wall time and peak RSS: 20,000 x ~1.7 KiB, concurrency 32, fast server; ours vs the hand-written one
 *      (medians of three alternating rounds).
 *   3. Latency-bound: blobs answered after 50 ms, concurrency 256; ours vs concurrency / latency, and vs the
 *      machine's ceiling (the hand-written client only fetching, timed over its fetching alone).
 *   4. Large blobs: 64 KiB; ours vs the standalone Parquet writer (test/bench/writers.ts, same process tree).
 *   5. Flat memory: peak RSS of ours at 20,000 and at 200,000 partitions.
 *   6. The local service: test/bench/service.ts (blob GET CPU vs a bare node:http server, listing rate).
 *   7. Start-up: `catalog-export --version` and `export --dry-run`.
 *   9. Publishing large files: test/bench/publish.ts (6 x 200 MB through multipart uploads vs the transfer's floor).
 *  10. Adaptive concurrency: blobs answered after 50 ms, defaults (no --concurrency); vs 0.9 x 256 / latency.
 *  11. A limited service: 50 ms, 429 + Retry-After: 1 past 64 reads in flight, defaults; vs 0.8 x 64 / latency,
 *      throttled reads <= 5 %. Sections 10 and 11 time the whole export minus a --dry-run's (the user's view).
 *  12-14. Iceberg tables: test/bench/iceberg.ts (the local service, 200,000 partitions: CPU of --format iceberg vs
 *      parquet; a changes run over 1 % vs a full export; reading a tag after 30 changes runs and compaction vs a
 *      fresh export, through icebird); ~6 min on a quiet machine, the largest share of the run.
 *  15. Against the official SDK: 5,000 partitions answered after 50 ms, defaults, the whole export minus a
 *      --dry-run's vs @here/olp-sdk-dataservice-read only reading the blobs (test/bench/sdk-read.ts); ~40 s.
 *  16. Large blobs, opt-in: 64 x 50 MB from the local service, defaults: peak RSS <= 1 GB, MB/s (wall minus a dry
 *      run's) >= 0.8x the standalone writer's at 50 MB rows; ~3 min quiet, 3.2 GB of service data and as much output.
 *  17. One 512 MiB blob, opt-in: peak RSS <= 2 GB, exact (DuckDB's sha1(data) and size = the blob the service
 *      serves); ~1 min quiet. Sections 16 and 17 keep their data in a temporary directory, removed after.
 * The fast server is test/bench/fast-server.ts: node:http, everything from memory. Every output is read
 * back (DuckDB: row count and sha1(data) = checksum on every row) after its timing.
 *
 *   npm run bench                 the sizes above
 *   npm run bench -- --quick      a fifth of the partitions (Iceberg: 20,000 and 5 changes runs; 16: 8 blobs;
 *                                 17: 128 MiB)
 *   npm run bench -- --record     also rewrite the export section of test/bench/RESULTS.md
 *   npm run bench -- --only=1,3   some of the sections (opt-in ones too)
 *   npm run bench -- --large      also the opt-in sections (16, 17: large blobs)
 *   npm run bench -- --help       this text
 * Run it on a quiet machine: the client and the server share the cores.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  bearerToken,
  BENCH,
  CLI,
  DEMO_CATALOG,
  exportLayer,
  measure,
  median,
  ROOT,
  stop,
  TMP,
  TS_LOADER,
  TSX,
  type Usage,
  waitForLine,
  withLocalService
} from "./support.ts"

interface FastServer {
  readonly child: ChildProcess
  readonly url: string
  readonly lookupUrl: string
  readonly catalog: string
  readonly layer: string
  readonly credentials: string
}

const args = process.argv.slice(2)
if (args.includes("--help")) {
  // The comment at the top of this file is the usage.
  const source = fs.readFileSync(new URL(import.meta.url), "utf8")
  console.log(source.slice(0, source.indexOf("*/")).replace(/^\s*\/?\*+ ?/gm, "").trim())
  process.exit(0)
}
const quick = args.includes("--quick")
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",").map(Number)
const large = args.includes("--large")
/** Sections named in --only, else all but the opt-in ones (those run with --large too). */
const wanted = (section: number, options: { readonly optIn?: boolean } = {}) =>
  only === undefined ? options.optIn !== true || large : only.includes(section)
const scale = (n: number) => (quick ? Math.max(1000, Math.round(n / 5)) : n)

const lines: Array<string> = []
const say = (s = "") => {
  console.log(s)
  lines.push(s)
}
const verdict = (met: boolean) => (met ? "met" : "NOT met")
const fmt = (n: number, digits = 0) => n.toFixed(digits)

const startFastServer = async (
  partitions: number,
  minBytes: number,
  maxBytes: number,
  latencyMs = 0,
  limit = 0
): Promise<FastServer> => {
  const credentials = path.join(TMP, `fast-${process.pid}.properties`)
  const child = spawn(process.execPath, [
    TSX,
    path.join(BENCH, "fast-server.ts"),
    "--partitions",
    String(partitions),
    "--min-bytes",
    String(minBytes),
    "--max-bytes",
    String(maxBytes),
    "--latency-ms",
    String(latencyMs),
    "--limit",
    String(limit),
    "--credentials-out",
    credentials
  ], { stdio: ["ignore", "pipe", "inherit"] })
  const line = await waitForLine(child, "fast-server")
  return { child, url: line.url!, lookupUrl: line.lookupUrl!, catalog: line.catalog!, layer: line.layer!, credentials }
}

const naiveBundle = path.join(TMP, "naive.mjs")

/** The hand-written exporter, bundled as plain JavaScript (a user's script runs without a TypeScript loader). */
const bundleNaive = async () => {
  const { build } = await import("esbuild")
  await build({
    entryPoints: [path.join(BENCH, "naive.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    packages: "external",
    outfile: naiveBundle,
    logLevel: "warning"
  })
}

const naive = (server: FastServer, out: string, concurrency: number, mode: "export" | "fetch-only" = "export") => {
  fs.rmSync(out, { recursive: true, force: true })
  fs.mkdirSync(out, { recursive: true })
  return measure(naiveBundle, [
    server.lookupUrl,
    server.credentials,
    server.catalog,
    server.layer,
    path.join(out, "naive.parquet"),
    String(concurrency),
    mode
  ])
}

/** `export` of the fast server's layer; `concurrency` undefined: the default (found as it runs). */
const ours = (
  server: FastServer,
  out: string,
  concurrency: number | undefined,
  extra: ReadonlyArray<string> = []
) => {
  fs.rmSync(out, { recursive: true, force: true })
  return exportLayer(server, out, [
    "--format",
    "parquet",
    "--compression",
    "zstd",
    ...(concurrency === undefined ? [] : ["--concurrency", String(concurrency)]),
    ...extra
  ])
}

/** The standalone Parquet writer (test/bench/writers.ts) writing `total` bytes of `rowBytes` rows into `dir`. */
const standaloneWriter = (rowBytes: number, total: number, dir: string) =>
  JSON.parse(
    execFileSync(process.execPath, [
      TSX,
      path.join(BENCH, "writers.ts"),
      "--child-named",
      "RollingWriter parquet (defaults, encoder thread)",
      String(rowBytes),
      String(total),
      dir
    ], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"]
    }).trim().split("\n").at(-1)!
  ) as { seconds: number; payloadBytes: number; peakRssBytes: number }

/** What DuckDB reads from an export's Parquet files: rows, data bytes, and the first row's sha1(data). */
const readBack = async (out: string) => {
  const { DuckDBInstance } = await import("@duckdb/node-api")
  const db = await DuckDBInstance.create()
  const c = await db.connect()
  const glob = path.join(out, "**", "*.parquet").replace(/'/g, "''")
  const [row] = (await c.runAndReadAll(
    `SELECT count(*) AS n, sum(octet_length(data)) AS bytes, min(sha1(data)) AS sha1 FROM read_parquet('${glob}')`
  )).getRowObjectsJS()
  c.closeSync()
  db.closeSync()
  return { rows: Number(row!.n), bytes: Number(row!.bytes), sha1: String(row!.sha1) }
}

/** The size and sha1 of the blob the service holds for the layer's first partition, streamed from its blob API. */
const heldBlob = async (service: { readonly lookupUrl: string; readonly credentials: string }, layer: string) => {
  const origin = new URL(service.lookupUrl).origin
  const headers = { authorization: `Bearer ${await bearerToken(service.credentials)}` }
  const metadata = `${origin}/metadata/v1/catalogs/${DEMO_CATALOG}`
  const latest = (await (await fetch(`${metadata}/versions/latest`, { headers })).json()) as { version: number }
  const listed = (await (await fetch(`${metadata}/layers/${layer}/partitions?version=${latest.version}`, { headers }))
    .json()) as { partitions: Array<{ dataHandle: string }> }
  const res = await fetch(
    `${origin}/blobstore/v1/catalogs/${DEMO_CATALOG}/layers/${layer}/data/${listed.partitions[0]!.dataHandle}`,
    { headers }
  )
  if (res.status !== 200 || res.body === null) throw new Error(`the service answered ${res.status} for the blob`)
  const hash = createHash("sha1")
  let bytes = 0
  for await (const chunk of res.body) {
    hash.update(chunk)
    bytes += chunk.byteLength
  }
  return { bytes, sha1: hash.digest("hex") }
}

/** Checks what a variant wrote with DuckDB: every row, and sha1(data) = checksum where the variant kept checksums. */
const verify = async (out: string, partitions: number, checksums: boolean) => {
  const { DuckDBInstance } = await import("@duckdb/node-api")
  const db = await DuckDBInstance.create()
  const c = await db.connect()
  const glob = path.join(out, "**", "*.parquet").replace(/'/g, "''")
  const bad = checksums ? "count(*) FILTER (WHERE sha1(data) <> checksum)" : "0"
  const [row] = (await c.runAndReadAll(
    `SELECT count(*) AS n, count(DISTINCT partition) AS d, ${bad} AS bad FROM read_parquet('${glob}', hive_partitioning = false)`
  )).getRowObjectsJS()
  c.closeSync()
  db.closeSync()
  if (Number(row!.n) !== partitions || Number(row!.d) !== partitions || Number(row!.bad) !== 0) {
    throw new Error(
      `${out}: DuckDB read ${row!.n} rows (${row!.d} distinct, ${row!.bad} bad checksums), expected ${partitions}`
    )
  }
}

/** The rate ours reported for the export itself (listing, fetching, writing, commit), from its summary line. */
const reportedRate = (stdout: string) => Number(/\((\d+) partitions\/s/.exec(stdout)?.[1] ?? NaN)

const withServer = async <A>(server: Promise<FastServer>, f: (server: FastServer) => Promise<A>): Promise<A> => {
  const s = await server
  try {
    return await f(s)
  } finally {
    await stop(s.child)
    fs.rmSync(s.credentials, { force: true })
  }
}

const main = async () => {
  fs.mkdirSync(TMP, { recursive: true })
  // Builds the bundle when a source is newer (the checkout's own command), before anything is measured.
  execFileSync(process.execPath, [path.join(ROOT, "src", "cli", "bin.mjs"), "--version"], { stdio: "ignore" })
  await bundleNaive()
  const load = os.loadavg()[0]!
  say(
    `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), ${
      fmt(os.totalmem() / 2 ** 30)
    } GiB, Node ${process.version}, ` +
      `${new Date().toISOString().slice(0, 10)}; load average ${fmt(load, 2)} at the start${quick ? "; --quick" : ""}.`
  )
  say()
  const out = path.join(TMP, "out")

  if (wanted(1)) {
    const n = scale(100_000)
    await withServer(startFastServer(n, 1024, 2048), async (server) => {
      const fetchOnly = naive(server, out, 64, "fetch-only")
      const script = naive(server, out, 64)
      await verify(out, n, false)
      const ourRun = ours(server, out, 64)
      await verify(out, n, true)
      const us = (u: Usage) => (u.cpuSeconds * 1e6) / n
      const ratio = us(ourRun) / us(script)
      say(`### 1. CPU per partition (${n} x 1-2 KiB, concurrency 64, fast server)`)
      say()
      say("| variant | CPU µs/partition | wall s | peak RSS MB |")
      say("|---|---|---|---|")
      say(
        `| undici fetch only (floor, no writing) | ${fmt(us(fetchOnly))} | ${fmt(fetchOnly.wallSeconds, 1)} | ${
          fmt(fetchOnly.maxRssMb)
        } |`
      )
      say(
        `| hand-written (undici + p-limit + parquetjs-lite, no checksums) | ${fmt(us(script))} | ${
          fmt(script.wallSeconds, 1)
        } | ${fmt(script.maxRssMb)} |`
      )
      say(
        `| catalog-export (Parquet zstd, checksums verified) | ${fmt(us(ourRun))} | ${fmt(ourRun.wallSeconds, 1)} | ${
          fmt(ourRun.maxRssMb)
        } |`
      )
      say()
      say(`ours / hand-written CPU = ${fmt(ratio, 2)} (target <= 0.5: ${verdict(ratio <= 0.5)})`)
      say()
    })
  }

  if (wanted(2)) {
    const n = scale(20_000)
    await withServer(startFastServer(n, 1536, 2048), async (server) => {
      // Three rounds, alternating: one run of each swings by a quarter with the machine's speed from minute to minute.
      const scripts: Array<Usage> = []
      const ourRuns: Array<Usage> = []
      for (let round = 0; round < 3; round++) {
        scripts.push(naive(server, out, 32))
        await verify(out, n, false)
        ourRuns.push(ours(server, out, 32))
        await verify(out, n, true)
      }
      const row = (runs: ReadonlyArray<Usage>) =>
        `${fmt(median(runs.map((r) => r.wallSeconds)), 2)} (${runs.map((r) => fmt(r.wallSeconds, 2)).join(", ")}) | ${
          fmt(median(runs.map((r) => r.cpuSeconds)), 2)
        } | ${fmt(Math.max(...runs.map((r) => r.maxRssMb)))} |`
      const speedup = median(scripts.map((r) => r.wallSeconds)) / median(ourRuns.map((r) => r.wallSeconds))
      const rss = Math.max(...ourRuns.map((r) => r.maxRssMb)) / Math.max(...scripts.map((r) => r.maxRssMb))
      say(`### 2. Wall time and memory (${n} x ~1.7 KiB, concurrency 32, fast server; start-up included)`)
      say()
      say("| variant | wall s, median (rounds) | CPU s, median | peak RSS MB, highest |")
      say("|---|---|---|---|")
      say(`| hand-written | ${row(scripts)}`)
      say(`| catalog-export | ${row(ourRuns)}`)
      say()
      say(
        `speed-up = ${fmt(speedup, 2)}x (target >= 1.5: ${verdict(speedup >= 1.5)}); peak RSS ours / hand-written = ` +
          `${fmt(rss, 2)} (target <= 1: ${verdict(rss <= 1)})`
      )
      say()
    })
  }

  if (wanted(3)) {
    // Issue 23, target 3, as the issue measures it: the whole export's wall time minus a dry run's.
    const n = scale(20_000)
    const latency = 50
    const concurrency = 256
    await withServer(startFastServer(n, 1024, 2048, latency), async (server) => {
      const dry = ours(server, out, concurrency, ["--dry-run"])
      const ourRun = ours(server, out, concurrency)
      await verify(out, n, true)
      const ideal = (concurrency * 1000) / latency
      /**
       * The fetch as the server saw it (counted afresh after): blobs per second from the first blob request to the
       * last answer, and in its steady middle (the second to the ninth tenth of the answers); how long the first
       * tenth took from the first request (the ramp) and the last tenth (the tail), in ms.
       */
      const window = async () => {
        const stats = (await (await fetch(`${server.url}/bench/stats?reset=1`)).json()) as {
          blobs: number
          first: number
          last: number
          answered: number
          tenth: number
          ninthTenth: number
        }
        return {
          rate: (stats.blobs * 1000) / (stats.last - stats.first),
          steady: (stats.answered * 0.8 * 1000) / (stats.ninthTenth - stats.tenth),
          ramp: stats.tenth - stats.first,
          tail: stats.last - stats.ninthTenth
        }
      }
      const ourWindow = await window()
      // The most this machine gives any client at this concurrency while the server shares its cores: a client that
      // only fetches (nothing written, nothing verified), timed over its fetching alone.
      const bare = naive(server, out, concurrency, "fetch-only")
      const bareWindow = await window()
      // The same client by the target's own measure: from its listing request to its last blob (what a dry run leaves
      // out), its exit left out too, which is kinder to it than the export's measure.
      const { listingAt, doneAt } = JSON.parse(bare.stdout.trim().split("\n").at(-1)!) as {
        listingAt: number
        doneAt: number
      }
      const bareWhole = (n * 1000) / (doneAt - listingAt)
      const shape = (w: typeof ourWindow) =>
        `steady middle ${fmt(w.steady)}/s (ratio ${fmt(w.steady / ideal, 2)}), first tenth of the answers ${
          fmt(w.ramp)
        } ms after the first request, last tenth ${fmt(w.tail)} ms`
      const rate = n / (ourRun.wallSeconds - dry.wallSeconds)
      say(`### 3. Latency-bound (${n} partitions, blobs answered after ${latency} ms, concurrency ${concurrency})`)
      say()
      say(
        `catalog-export: ${fmt(rate)} partitions/s (${fmt(ourRun.wallSeconds, 1)} s wall minus ${
          fmt(dry.wallSeconds, 1)
        } s of a dry run; ${
          fmt(ourWindow.rate)
        }/s from the first blob request to the last answer, as the server saw them); ` +
          `concurrency / latency = ${fmt(ideal)}/s; ratio ${fmt(rate / ideal, 2)} (target >= 0.9: ${
            verdict(rate >= 0.9 * ideal)
          }). The machine's ceiling: the hand-written client fetching only, at the same concurrency, ${
            fmt(bareWindow.rate)
          }/s from its first blob request to its last answer (ratio ${
            fmt(bareWindow.rate / ideal, 2)
          }); ours / ceiling ${
            fmt(rate / bareWindow.rate, 2)
          }; by the target's measure (from its listing request to its last blob) that client makes ${
            fmt(bareWhole)
          }/s (ratio ${fmt(bareWhole / ideal, 2)}). Where the time goes, as the server saw it: catalog-export ${
            shape(ourWindow)
          }; the hand-written client ${shape(bareWindow)}`
      )
      say()
    })
  }

  // The whole export's wall time minus a dry run's (start-up, token, lookup, plan), with the defaults.
  const adaptive = async (
    section: number,
    title: string,
    limit: number,
    target: (rate: number, throttled: number) => string
  ) => {
    const n = scale(20_000)
    const latency = 50
    await withServer(startFastServer(n, 1024, 2048, latency, limit), async (server) => {
      const dry = ours(server, out, undefined, ["--dry-run"])
      const run = ours(server, out, undefined)
      await verify(out, n, true)
      const stats = (await (await fetch(`${server.url}/bench/stats`)).json()) as {
        blobs: number
        throttled: number
        peakInFlight: number
      }
      const rate = n / (run.wallSeconds - dry.wallSeconds)
      say(`### ${section}. ${title} (${n} partitions, blobs answered after ${latency} ms, defaults)`)
      say()
      say(
        `catalog-export: ${fmt(rate)} partitions/s (${fmt(run.wallSeconds, 1)} s wall minus ${
          fmt(dry.wallSeconds, 1)
        } s of a dry run; ${fmt(run.cpuSeconds, 1)} s CPU, ${fmt(run.maxRssMb)} MB peak RSS); ` +
          `at most ${stats.peakInFlight} reads in flight at the server, ${stats.throttled} of ${stats.blobs} throttled (${
            fmt((100 * stats.throttled) / stats.blobs, 1)
          } %); ${target(rate, stats.throttled / stats.blobs)}`
      )
      say()
    })
  }
  if (wanted(10)) {
    await adaptive(10, "Adaptive concurrency", 0, (rate) => {
      const ideal = (256 * 1000) / 50
      return `ratio to 256 / latency = ${fmt(rate / ideal, 2)} (target >= 0.9: ${verdict(rate >= 0.9 * ideal)})`
    })
  }
  if (wanted(11)) {
    await adaptive(11, "A service that throttles past 64 reads in flight", 64, (rate, throttled) => {
      const ideal = (64 * 1000) / 50
      return `ratio to 64 / latency = ${fmt(rate / ideal, 2)} (target >= 0.8 with <= 5 % throttled: ${
        verdict(rate >= 0.8 * ideal && throttled <= 0.05)
      })`
    })
  }

  if (wanted(15)) {
    // Issue 23, target 5: whole export at the defaults minus its dry run, vs the SDK's reading time alone.
    const n = quick ? 1000 : 5000
    const latency = 50
    await withServer(startFastServer(n, 1024, 2048, latency), async (server) => {
      const dry = ours(server, out, undefined, ["--dry-run"])
      const run = ours(server, out, undefined)
      await verify(out, n, true)
      const sdkRun = measure(path.join(BENCH, "sdk-read.ts"), [
        server.lookupUrl,
        server.credentials,
        server.catalog,
        server.layer
      ], TS_LOADER)
      const sdk = JSON.parse(sdkRun.stdout.trim().split("\n").at(-1)!) as { blobs: number; seconds: number }
      if (sdk.blobs !== n) throw new Error(`the SDK read ${sdk.blobs} blobs, expected ${n}`)
      const oursSeconds = run.wallSeconds - dry.wallSeconds
      const speedup = sdk.seconds / oursSeconds
      say(`### 15. Against the official SDK (${n} partitions, blobs answered after ${latency} ms, defaults)`)
      say()
      say(
        `catalog-export: ${fmt(oursSeconds, 2)} s (${fmt(run.wallSeconds, 1)} s wall minus ${
          fmt(dry.wallSeconds, 1)
        } s of a dry run; ${fmt(run.maxRssMb)} MB peak RSS); @here/olp-sdk-dataservice-read only reading the blobs ` +
          `(getData, all at once; its start-up, token and listing not counted): ${fmt(sdk.seconds, 2)} s (${
            fmt(sdkRun.maxRssMb)
          } MB peak RSS); speed-up ${fmt(speedup, 2)}x (target >= 5: ${verdict(speedup >= 5)})`
      )
      say()
    })
  }

  if (wanted(4)) {
    const n = scale(4000)
    const bytes = 65_536
    await withServer(startFastServer(n, bytes, bytes), async (server) => {
      const ourRun = ours(server, out, 32)
      await verify(out, n, true)
      const writer = standaloneWriter(bytes, n * bytes, TMP)
      const writerMbps = writer.payloadBytes / 1e6 / writer.seconds
      const exportSeconds = n / reportedRate(ourRun.stdout)
      const ourMbps = (n * bytes) / 1e6 / exportSeconds
      say(`### 4. Large blobs (${n} x 64 KiB, concurrency 32, fast server)`)
      say()
      say(
        `catalog-export: ${fmt(ourMbps)} MB/s over the export (${fmt(ourRun.cpuSeconds, 1)} s CPU, ${
          fmt(ourRun.maxRssMb)
        } MB peak RSS); ` +
          `standalone Parquet writer (RollingWriter, zstd, encoder thread): ${fmt(writerMbps)} MB/s; ratio ${
            fmt(ourMbps / writerMbps, 2)
          } ` +
          `(target >= 0.8: ${verdict(ourMbps >= 0.8 * writerMbps)})`
      )
      say()
    })
  }

  // Issue 25: blobs of tens and hundreds of MB from the local service (`serve --seed-blob-bytes`), exported at
  // the defaults. Opt-in (--large, or named in --only): gigabytes go through a temporary directory, removed after.
  if (wanted(16, { optIn: true })) {
    const n = quick ? 8 : 64
    const bytes = 50_000_000
    await withLocalService(n, bytes, async (service, work) => {
      const target = { ...service, catalog: DEMO_CATALOG, layer: "places" }
      const dry = exportLayer(target, path.join(work, "dry"), ["--dry-run"])
      const run = exportLayer(target, path.join(work, "out"))
      await verify(path.join(work, "out"), n, true)
      fs.rmSync(path.join(work, "out"), { recursive: true, force: true })
      const writer = standaloneWriter(bytes, n * bytes, work)
      const writerMbps = writer.payloadBytes / 1e6 / writer.seconds
      const exportSeconds = run.wallSeconds - dry.wallSeconds
      const ourMbps = (n * bytes) / 1e6 / exportSeconds
      say(`### 16. Large blobs: ${n} x 50 MB (local service, defaults)`)
      say()
      say(
        `catalog-export: ${fmt(ourMbps)} MB/s (${fmt(run.wallSeconds, 1)} s wall minus ${
          fmt(dry.wallSeconds, 1)
        } s of a dry run; ${fmt(run.cpuSeconds, 1)} s CPU); peak RSS ${fmt(run.maxRssMb)} MB (target <= 1024: ${
          verdict(run.maxRssMb <= 1024)
        }); standalone Parquet writer (RollingWriter, zstd, encoder thread) at 50 MB rows: ${fmt(writerMbps)} MB/s (${
          fmt(writer.peakRssBytes / 2 ** 20)
        } MB peak RSS); ratio ${fmt(ourMbps / writerMbps, 2)} (target >= 0.8: ${verdict(ourMbps >= 0.8 * writerMbps)})`
      )
      say()
    })
  }

  if (wanted(17, { optIn: true })) {
    const bytes = (quick ? 128 : 512) * 2 ** 20
    await withLocalService(1, bytes, async (service, work) => {
      const target = { ...service, catalog: DEMO_CATALOG, layer: "places" }
      const run = exportLayer(target, path.join(work, "out"))
      const read = await readBack(path.join(work, "out"))
      const held = await heldBlob(service, "places")
      const exact = read.rows === 1 && read.bytes === held.bytes && read.sha1 === held.sha1
      say(`### 17. One blob of ${fmt(bytes / 2 ** 20)} MiB (local service, defaults)`)
      say()
      say(
        `catalog-export: ${fmt(run.wallSeconds, 1)} s wall, ${fmt(run.cpuSeconds, 1)} s CPU, peak RSS ${
          fmt(run.maxRssMb)
        } MB (target <= 2048: ${verdict(run.maxRssMb <= 2048)}); DuckDB read back ${read.rows} row of ${read.bytes} ` +
          `bytes, sha1 ${read.sha1.slice(0, 12)}…; the service holds ${held.bytes} bytes, sha1 ${
            held.sha1.slice(0, 12)
          }… (exact: ${verdict(exact)})`
      )
      say()
    })
  }

  if (wanted(5)) {
    const small = scale(20_000)
    const large = scale(200_000)
    const runs = new Map<number, { rss: number; cpu: number }>()
    for (const n of [small, large]) {
      await withServer(startFastServer(n, 1536, 2048), async (server) => {
        const ourRun = ours(server, out, 32)
        await verify(out, n, true)
        runs.set(n, { rss: ourRun.maxRssMb, cpu: ourRun.cpuSeconds })
      })
    }
    const growth = runs.get(large)!.rss / runs.get(small)!.rss
    say(`### 5. Flat memory (~1.7 KiB, concurrency 32)`)
    say()
    say(
      `peak RSS: ${fmt(runs.get(small)!.rss)} MB at ${small} partitions, ${fmt(runs.get(large)!.rss)} MB at ${large} ` +
        `(${fmt(runs.get(large)!.cpu, 1)} s CPU); ratio ${fmt(growth, 2)} (target <= 1.2: ${
          verdict(growth <= 1.2)
        }; <= 250 MB: ${verdict(runs.get(large)!.rss <= 250)})`
    )
    say()
  }

  if (wanted(6) && fs.existsSync(path.join(BENCH, "service.ts"))) {
    say(`### 6. The local service (test/bench/service.ts)`)
    say()
    const report = execFileSync(
      process.execPath,
      [TSX, path.join(BENCH, "service.ts"), ...(quick ? ["--quick"] : [])],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    for (const line of report.trim().split("\n")) say(line)
    say()
  }

  if (wanted(7)) {
    const time = (cliArgs: ReadonlyArray<string>) => {
      return median(Array.from({ length: 5 }, () => measure(CLI, cliArgs).wallSeconds))
    }
    await withServer(startFastServer(1000, 1024, 1024), async (server) => {
      const version = time(["--version"])
      const dryRun = time([
        "export",
        "--dry-run",
        "--lookup-url",
        server.lookupUrl,
        "--credentials",
        server.credentials,
        "--catalog",
        server.catalog,
        "--layer",
        server.layer,
        "--out",
        out
      ])
      // What Node itself takes to start and exit on this machine at this moment: the floor.
      const bare = median(
        Array.from({ length: 5 }, () => {
          const started = performance.now()
          execFileSync(process.execPath, ["-e", "0"])
          return (performance.now() - started) / 1000
        })
      )
      say(`### 7. Start-up (median of 5)`)
      say()
      say(
        `catalog-export --version: ${fmt(version, 2)} s; export --dry-run: ${fmt(dryRun, 2)} s (target <= 0.4 s: ${
          verdict(version <= 0.4 && dryRun <= 0.4)
        }); node -e 0 on this machine: ${fmt(bare, 2)} s`
      )
      say()
    })
  }

  if (!quick && wanted(8)) {
    const { listingHeapGrowth } = await import("../support/listing.ts")
    const started = performance.now()
    const listing = await listingHeapGrowth(1_000_000)
    say(`### Listing ${listing.count} partitions through the client`)
    say()
    say(
      `Live heap growth (after full collections, sampled every 100,000 partitions): ${fmt(listing.growthMb, 1)} MB; ` +
        `in order: ${listing.ordered}; publish + list took ${fmt((performance.now() - started) / 1000)} s.`
    )
    say()
  }

  const icebergSections = [12, 13, 14].filter((section) => wanted(section))
  if (icebergSections.length > 0) {
    const report = execFileSync(
      process.execPath,
      [TSX, path.join(BENCH, "iceberg.ts"), `--only=${icebergSections.join(",")}`, ...(quick ? ["--quick"] : [])],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    say(`### 12-14. Iceberg tables (test/bench/iceberg.ts)`)
    say()
    for (const line of report.trim().split("\n")) say(line)
    say()
  }

  if (wanted(9)) {
    say(`### 9. Publishing large files (test/bench/publish.ts)`)
    say()
    const report = execFileSync(
      process.execPath,
      [TSX, path.join(BENCH, "publish.ts"), ...(quick ? ["--quick"] : [])],
      {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    for (const line of report.trim().split("\n")) say(line)
    say()
  }

  fs.rmSync(out, { recursive: true, force: true })
  if (args.includes("--record")) {
    const file = path.join(BENCH, "RESULTS.md")
    const previous = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
    const marker = "## Export benchmark (npm run bench)"
    const start = previous.indexOf(marker)
    const next = start < 0 ? -1 : previous.indexOf("\n## ", start + marker.length)
    const before = start < 0 ? previous.trimEnd() : previous.slice(0, start).trimEnd()
    const after = next < 0 ? "" : previous.slice(next)
    fs.writeFileSync(file, `${before}\n\n${marker}\n\n${lines.join("\n").trimEnd()}\n${after}`)
  }
}

await main()
