/**
 * Export benchmark against the local service on loopback (`npm run bench`):
 *   (a) fetch only: undici at the same concurrency, blobs discarded (the ceiling)
 *   (b) a naive exporter as a user would write it: undici + p-limit + parquetjs-lite
 *   (c) catalog-export to Parquet (zstd)     (d) catalog-export to Arrow IPC
 * for N partitions at 1 KiB and at 64 KiB. Every variant runs in its own child process, so its peak
 * RSS (getrusage maxrss) is its own; the service runs in a separate process too. Each output is read
 * back (DuckDB for Parquet, apache-arrow for Arrow) and its row count checked after the timing.
 *
 *   npm run bench                      1 KiB x 20,000 and 64 KiB x 2,000, median of 3
 *   npm run bench -- --quick           1 KiB x 5,000 and 64 KiB x 500, 1 run
 *   npm run bench -- --record          also rewrite the export section of test/bench/RESULTS.md
 * Then a listing of 1,000,000 partitions (200,000 with --quick) through the client, reporting the
 * growth of the live heap: the client parses listings as they stream and must not keep them.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const CATALOG = "hrn:local:data:::demo"
const LAYER = "places"
const CONCURRENCY = 32
const VARIANTS = ["fetch-only", "naive", "ours-parquet", "ours-arrow"] as const
type Variant = (typeof VARIANTS)[number]

interface Measurement {
  readonly partitions: number
  readonly bytes: number
  readonly seconds: number
  readonly maxRssMb: number
}

// ------------------------------------------------------------------------------------------ child

const readProperties = (file: string) =>
  Object.fromEntries(
    fs.readFileSync(file, "utf8").split("\n").filter((l) => l.includes("=")).map((l) => {
      const i = l.indexOf("=")
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()]
    })
  ) as Record<string, string>

/** What a user's script does first: a signed token request, then one JSON listing. */
const tokenAndListing = async (lookupUrl: string, credentials: string) => {
  const { signRequest } = await import("../../src/domain/OAuth1.ts")
  const props = readProperties(credentials)
  const tokenUrl = props["here.token.endpoint.url"]!
  const authorization = signRequest({
    url: tokenUrl,
    keyId: props["here.access.key.id"]!,
    secret: props["here.access.key.secret"]!,
    timestamp: Math.floor(Date.now() / 1000),
    nonce: Math.random().toString(36).slice(2)
  })
  const token = ((await (await fetch(tokenUrl, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify({ grantType: "client_credentials" })
  })).json()) as { accessToken: string }).accessToken
  const headers = { authorization: `Bearer ${token}` }
  const origin = new URL(lookupUrl).origin
  const version = ((await (await fetch(`${origin}/metadata/v1/catalogs/${CATALOG}/versions/latest`, { headers })).json()) as { version: number }).version
  const listing = (await (await fetch(`${origin}/metadata/v1/catalogs/${CATALOG}/layers/${LAYER}/partitions?version=${version}&additionalFields=dataSize,checksum`, { headers })).json()) as {
    partitions: Array<{ partition: string; version: number; dataHandle: string; dataSize?: number; checksum?: string }>
  }
  return { origin, headers, partitions: listing.partitions }
}

const runChild = async (variant: Variant, lookupUrl: string, credentials: string, out: string): Promise<Measurement> => {
  // Modules load before the clock starts: the timing is of the export, not of the runtime's start.
  const { Pool } = await import("undici")
  const { default: pLimit } = await import("p-limit")
  const { Effect, Layer } = await import("effect")
  const DataClient = await import("../../src/client/DataClient.ts")
  const { Encoder } = await import("../../src/sinks/Encoder.ts")
  const { makePlan } = await import("../../src/export/Plan.ts")
  const { runExport } = await import("../../src/export/Export.ts")
  await import("../../src/domain/OAuth1.ts")
  const started = performance.now()
  let partitions = 0
  let bytes = 0
  if (variant === "fetch-only" || variant === "naive") {
    const { origin, headers, partitions: listed } = await tokenAndListing(lookupUrl, credentials)
    const pool = new Pool(origin, { connections: CONCURRENCY })
    const limit = pLimit(CONCURRENCY)
    const get = async (handle: string) => {
      const res = await pool.request({ path: `/blobstore/v1/catalogs/${CATALOG}/layers/${LAYER}/data/${handle}`, method: "GET", headers })
      return Buffer.from(await res.body.arrayBuffer())
    }
    if (variant === "fetch-only") {
      await Promise.all(listed.map((p) => limit(async () => {
        const data = await get(p.dataHandle)
        bytes += data.byteLength
        partitions++
      })))
    } else {
      const parquet = createRequire(import.meta.url)("parquetjs-lite")
      const schema = new parquet.ParquetSchema({
        partition: { type: "UTF8" },
        partition_version: { type: "INT64" },
        data_handle: { type: "UTF8" },
        data_size: { type: "INT64", optional: true },
        checksum: { type: "UTF8", optional: true },
        data: { type: "BYTE_ARRAY", optional: true }
      })
      fs.mkdirSync(out, { recursive: true })
      const writer = await parquet.ParquetWriter.openFile(schema, path.join(out, "naive.parquet"))
      // parquetjs-lite duplicates rows when appendRow calls overlap (measured: 26x the rows), so appends are chained.
      let appended: Promise<void> = Promise.resolve()
      await Promise.all(listed.map((p) => limit(async () => {
        const data = await get(p.dataHandle)
        appended = appended.then(() =>
          writer.appendRow({ partition: p.partition, partition_version: p.version, data_handle: p.dataHandle, data_size: p.dataSize, checksum: p.checksum, data })
        )
        await appended
        bytes += data.byteLength
        partitions++
      })))
      await writer.close()
    }
    await pool.close()
  } else {
    const result = await Effect.runPromise(
      Effect.gen(function*() {
        const plan = yield* makePlan({ catalog: CATALOG, layer: LAYER, version: "latest", parts: 4 })
        return yield* runExport(plan, {
          out,
          format: variant === "ours-parquet" ? "parquet" : "arrow",
          compression: "zstd",
          concurrency: CONCURRENCY,
          listConcurrency: 4,
          force: true
        })
      }).pipe(Effect.provide(Layer.merge(DataClient.layer({ lookupUrl, credentialsPath: credentials, concurrency: CONCURRENCY }), Encoder.worker)))
    )
    partitions = result.manifest.partitions
    bytes = result.manifest.bytes
  }
  return { partitions, bytes, seconds: (performance.now() - started) / 1000, maxRssMb: process.resourceUsage().maxRSS / 1024 }
}

/** Counts the rows an independent reader finds in what a variant wrote. */
const rowsWritten = async (variant: Variant, out: string): Promise<number | undefined> => {
  if (variant === "fetch-only") return undefined
  const files = fs.readdirSync(out, { recursive: true }).map(String).map((f) => path.join(out, f))
  if (variant === "ours-arrow") {
    const { tableFromIPC } = await import("apache-arrow")
    return files.filter((f) => f.endsWith(".arrow")).reduce((n, f) => n + tableFromIPC(fs.readFileSync(f)).numRows, 0)
  }
  const { DuckDBInstance } = await import("@duckdb/node-api")
  const db = await DuckDBInstance.create()
  const c = await db.connect()
  const glob = path.join(out, "**", "*.parquet").replace(/'/g, "''")
  const rows = (await c.runAndReadAll(`SELECT count(*) AS n FROM read_parquet('${glob}', hive_partitioning = false)`)).getRowObjectsJS()
  c.closeSync()
  db.closeSync()
  return Number(rows[0]!.n)
}

// ----------------------------------------------------------------------------------------- parent

const waitForLine = (child: ChildProcess) =>
  new Promise<Record<string, string>>((resolve, reject) => {
    let buffer = ""
    child.stdout!.on("data", (chunk) => {
      buffer += chunk
      const line = buffer.split("\n").find((l) => l.startsWith("{"))
      if (line !== undefined) resolve(JSON.parse(line))
    })
    child.on("exit", (code) => reject(new Error(`serve exited with ${code}`)))
  })

const startService = async (partitions: number, blobBytes: number, credentials: string) => {
  const child = spawn(process.execPath, [
    path.join(ROOT, "src/cli/bin.mjs"), "serve", "--port", "0", "--seed-partitions", String(partitions),
    "--seed-versions", "1", "--seed-blob-bytes", String(blobBytes), "--credentials-out", credentials
  ], { stdio: ["ignore", "pipe", "inherit"] })
  const line = await waitForLine(child)
  return { child, lookupUrl: line.lookupUrl! }
}

const runVariant = (variant: Variant, lookupUrl: string, credentials: string, out: string): Measurement => {
  fs.rmSync(out, { recursive: true, force: true })
  const output = execFileSync(process.execPath, [
    path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), fileURLToPath(import.meta.url), "--child", variant, lookupUrl, credentials, out
  ], { encoding: "utf8", maxBuffer: 1 << 24 })
  return JSON.parse(output.trim().split("\n").pop()!) as Measurement
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  const args = process.argv.slice(2)
  if (args[0] === "--child") {
    const [variant, lookupUrl, credentials, out] = args.slice(1) as [Variant, string, string, string]
    console.log(JSON.stringify(await runChild(variant, lookupUrl, credentials, out)))
    return
  }
  const quick = args.includes("--quick")
  const runs = quick ? 1 : 3
  const sizes = quick ? [{ blobBytes: 1024, partitions: 5_000 }, { blobBytes: 65_536, partitions: 500 }] : [{ blobBytes: 1024, partitions: 20_000 }, { blobBytes: 65_536, partitions: 2_000 }]
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-bench-"))
  const lines: Array<string> = []
  const say = (s: string) => {
    console.log(s)
    lines.push(s)
  }
  say(`Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}; concurrency ${CONCURRENCY}; median of ${runs}.`)
  say("")
  try {
    for (const size of sizes) {
      const credentials = path.join(work, "credentials.properties")
      const service = await startService(size.partitions, size.blobBytes, credentials)
      try {
        const results = new Map<Variant, Measurement>()
        for (const variant of VARIANTS) {
          const out = path.join(work, variant)
          const measured = Array.from({ length: runs }, () => runVariant(variant, service.lookupUrl, credentials, out))
          const seconds = median(measured.map((m) => m.seconds))
          const m = { ...measured[0]!, seconds, maxRssMb: Math.max(...measured.map((x) => x.maxRssMb)) }
          const read = await rowsWritten(variant, out)
          if (m.partitions !== size.partitions || (read !== undefined && read !== size.partitions)) {
            throw new Error(`${variant}: expected ${size.partitions} partitions, counted ${m.partitions}, read back ${read}`)
          }
          results.set(variant, m)
        }
        const rate = (v: Variant) => results.get(v)!.partitions / results.get(v)!.seconds
        say(`### ${size.partitions} partitions x ${size.blobBytes / 1024} KiB`)
        say("")
        say("| variant | partitions/s | MB/s | peak RSS MB |")
        say("|---|---|---|---|")
        for (const [variant, m] of results) {
          say(`| ${variant} | ${(m.partitions / m.seconds).toFixed(0)} | ${(m.bytes / 1e6 / m.seconds).toFixed(1)} | ${m.maxRssMb.toFixed(0)} |`)
        }
        say("")
        say(`c/a = ${(rate("ours-parquet") / rate("fetch-only")).toFixed(2)}, c/b = ${(rate("ours-parquet") / rate("naive")).toFixed(2)}, ` +
          `d/a = ${(rate("ours-arrow") / rate("fetch-only")).toFixed(2)}, peak RSS c/b = ${(results.get("ours-parquet")!.maxRssMb / results.get("naive")!.maxRssMb).toFixed(2)}`)
        say("")
      } finally {
        service.child.kill("SIGTERM")
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
  const { listingHeapGrowth } = await import("../support/listing.ts")
  const listed = quick ? 200_000 : 1_000_000
  const started = performance.now()
  const listing = await listingHeapGrowth(listed)
  say(`### Listing ${listing.count} partitions through the client`)
  say("")
  say(`Live heap growth (after full collections, sampled every 100,000 partitions): ${listing.growthMb.toFixed(1)} MB; ` +
    `in order: ${listing.ordered}; publish + list took ${((performance.now() - started) / 1000).toFixed(0)} s.`)
  say("")
  if (args.includes("--record")) {
    const file = path.join(ROOT, "test/bench/RESULTS.md")
    const previous = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
    const marker = "## Export benchmark (npm run bench)"
    const rest = previous.includes(marker) ? previous.slice(0, previous.indexOf(marker)) : previous
    fs.writeFileSync(file, `${rest.trimEnd()}\n\n${marker}\n\n${lines.join("\n")}\n`)
  }
}

await main()
