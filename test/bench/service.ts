/**
 * Local catalog service benchmark (`npx tsx test/bench/service.ts`): what a blob GET and a partitions
 * listing cost the service, against a bare `node:http` server serving the same bytes from memory.
 *
 * Three kinds of process: the service (`catalog-export serve`), the bare server, and a load generator
 * (undici Pool, concurrency 32, a fixed number of requests). The load generator reads the server's
 * CPU time (user+sys from /proc/<pid>/stat) right before and after its run, so the measurement costs
 * the server nothing. CPU µs per request is the figure to trust on a shared machine; req/s moves with
 * whatever else runs.
 *
 *   npx tsx test/bench/service.ts                  100,000 partitions, 20,000 GETs per run, 3 runs
 *   npx tsx test/bench/service.ts --quick          20,000 partitions, 5,000 GETs, 1 run
 *   options: --runs N --requests N --partitions N --blob-bytes B
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { bearerToken, cpuMicrosOf, median, ROOT, startService, waitForLine } from "./support.ts"

const SELF = fileURLToPath(import.meta.url)
const CATALOG = "hrn:local:data:::demo"
const LAYER = "places"
const CONCURRENCY = 32
const WARMUP = 2_000
/** Distinct blobs the GETs cycle through (the bare server holds them all in memory). */
const DISTINCT = 2_000
const TARGET_CPU_RATIO = 2
const TARGET_LISTING_RATE = 100_000

interface LoadResult {
  readonly requests: number
  readonly seconds: number
  readonly cpuMicros: number
  readonly bytes: number
}

interface ListingResult {
  readonly partitions: number
  readonly seconds: number
  readonly cpuMicros: number
}

// ------------------------------------------------------------------------------------ bare server

/** Serves the blobs of `pathsFile` from memory, with the headers the service sends. */
const bareServer = async (origin: string, token: string, pathsFile: string) => {
  const paths = JSON.parse(fs.readFileSync(pathsFile, "utf8")) as ReadonlyArray<string>
  const blobs = new Map<string, { bytes: Buffer; etag: string }>()
  for (const p of paths) {
    const res = await fetch(`${origin}${p}`, { headers: { authorization: `Bearer ${token}` } })
    blobs.set(p, { bytes: Buffer.from(await res.arrayBuffer()), etag: res.headers.get("etag") ?? "" })
  }
  const server = http.createServer((req, res) => {
    const blob = blobs.get(req.url!)
    if (blob === undefined) {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, {
      "content-type": "application/json",
      etag: blob.etag,
      "accept-ranges": "bytes",
      "content-length": blob.bytes.byteLength
    })
    res.end(blob.bytes)
  })
  server.listen(0, "127.0.0.1", () => {
    const address = server.address() as { port: number }
    console.log(JSON.stringify({ event: "listening", url: `http://127.0.0.1:${address.port}`, pid: process.pid }))
  })
}

// --------------------------------------------------------------------------------- load generator

const loadGenerator = async (
  origin: string,
  token: string,
  pathsFile: string,
  requests: number,
  pid: number
): Promise<LoadResult> => {
  const { Pool } = await import("undici")
  const paths = JSON.parse(fs.readFileSync(pathsFile, "utf8")) as ReadonlyArray<string>
  const pool = new Pool(origin, { connections: CONCURRENCY })
  const headers = { authorization: `Bearer ${token}` }
  const drive = async (count: number) => {
    let next = 0
    let bytes = 0
    const worker = async () => {
      while (next < count) {
        const i = next++
        const res = await pool.request({ path: paths[i % paths.length]!, method: "GET", headers })
        const body = Buffer.from(await res.body.arrayBuffer())
        if (res.statusCode !== 200) {
          throw new Error(`GET ${paths[i % paths.length]} answered ${res.statusCode}: ${body.toString().slice(0, 200)}`)
        }
        bytes += body.byteLength
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, worker))
    return bytes
  }
  await drive(WARMUP)
  const cpuBefore = cpuMicrosOf(pid)
  const started = performance.now()
  const bytes = await drive(requests)
  const seconds = (performance.now() - started) / 1000
  const cpuMicros = cpuMicrosOf(pid) - cpuBefore
  await pool.close()
  return { requests, seconds, cpuMicros, bytes }
}

const listingRun = async (origin: string, token: string, expected: number, pid: number): Promise<ListingResult> => {
  const { request } = await import("undici")
  const url =
    `${origin}/metadata/v1/catalogs/${CATALOG}/layers/${LAYER}/partitions?version=0&additionalFields=dataSize,checksum`
  const once = async () => {
    const res = await request(url, { headers: { authorization: `Bearer ${token}` } })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`listing answered ${res.statusCode}: ${text.slice(0, 200)}`)
    return (JSON.parse(text) as { partitions: ReadonlyArray<unknown> }).partitions.length
  }
  await once()
  const cpuBefore = cpuMicrosOf(pid)
  const started = performance.now()
  const partitions = await once()
  const seconds = (performance.now() - started) / 1000
  const cpuMicros = cpuMicrosOf(pid) - cpuBefore
  if (partitions !== expected) throw new Error(`listing returned ${partitions} partitions, expected ${expected}`)
  return { partitions, seconds, cpuMicros }
}

// ----------------------------------------------------------------------------------------- parent

const tsx = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  spawn(process.execPath, [path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), SELF, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env }
  })

const runChild = async <A>(args: ReadonlyArray<string>, token: string): Promise<A> => {
  const child = tsx(args, { BENCH_TOKEN: token })
  let out = ""
  child.stdout!.on("data", (chunk) => (out += chunk))
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
  if (code !== 0) throw new Error(`load generator ${args.join(" ")} exited with ${code}`)
  return JSON.parse(out.trim().split("\n").pop()!) as A
}

const option = (args: ReadonlyArray<string>, name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : fallback
}

const main = async () => {
  const args = process.argv.slice(2)
  const token = process.env.BENCH_TOKEN ?? ""
  if (args[0] === "--bare") return bareServer(args[1]!, token, args[2]!)
  if (args[0] === "--load") {
    console.log(JSON.stringify(await loadGenerator(args[1]!, token, args[2]!, Number(args[3]), Number(args[4]))))
    return
  }
  if (args[0] === "--listing") {
    console.log(JSON.stringify(await listingRun(args[1]!, token, Number(args[2]), Number(args[3]))))
    return
  }

  const quick = args.includes("--quick")
  const runs = option(args, "runs", quick ? 1 : 3)
  const requests = option(args, "requests", quick ? 5_000 : 20_000)
  const partitions = option(args, "partitions", quick ? 20_000 : 100_000)
  const blobBytes = option(args, "blob-bytes", 1024)
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-service-bench-"))
  const children: Array<ChildProcess> = []
  try {
    const credentials = path.join(work, "credentials.properties")
    const { child: service, lookupUrl } = await startService(partitions, blobBytes, credentials)
    children.push(service)
    const origin = new URL(lookupUrl).origin
    const token = await bearerToken(credentials)

    const listed = await fetch(`${origin}/metadata/v1/catalogs/${CATALOG}/layers/${LAYER}/partitions?version=0`, {
      headers: { authorization: `Bearer ${token}` }
    })
    const handles = ((await listed.json()) as { partitions: Array<{ dataHandle: string }> }).partitions.map((p) =>
      p.dataHandle
    )
    const paths = handles.slice(0, DISTINCT).map((h) => `/blobstore/v1/catalogs/${CATALOG}/layers/${LAYER}/data/${h}`)
    const pathsFile = path.join(work, "paths.json")
    fs.writeFileSync(pathsFile, JSON.stringify(paths))

    const bare = tsx(["--bare", origin, pathsFile], { BENCH_TOKEN: token })
    children.push(bare)
    // tsx runs the script in a child of its own: the server's pid is the one it reports.
    const bareLine = await waitForLine(bare, "bare server")
    const bareOrigin = bareLine.url!

    console.log(
      `Machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? "?"}), load ${
        os.loadavg().map((l) => l.toFixed(2)).join(" ")
      }, Node ${process.version}; ` +
        `${partitions} partitions x ${blobBytes} B; ${requests} GETs per run over ${paths.length} blobs; concurrency ${CONCURRENCY}; ${runs} run(s), median.`
    )
    const blobRuns: Record<"service" | "bare", Array<LoadResult>> = { service: [], bare: [] }
    for (let r = 0; r < runs; r++) {
      // Alternating order, so neither server always runs first.
      for (const which of r % 2 === 0 ? (["service", "bare"] as const) : (["bare", "service"] as const)) {
        const target = which === "service"
          ? { origin, pid: service.pid! }
          : { origin: bareOrigin, pid: Number(bareLine.pid) }
        const result = await runChild<LoadResult>([
          "--load",
          target.origin,
          pathsFile,
          String(requests),
          String(target.pid)
        ], token)
        if (result.bytes !== requests * blobBytes) {
          throw new Error(`${which}: ${result.bytes} bytes received, expected ${requests * blobBytes}`)
        }
        blobRuns[which].push(result)
        console.log(
          `  run ${r + 1} ${which.padEnd(7)} ${(result.requests / result.seconds).toFixed(0).padStart(6)} req/s  ${
            (result.cpuMicros / result.requests).toFixed(1).padStart(6)
          } µs CPU/request`
        )
      }
    }
    const listingRuns: Array<ListingResult> = []
    for (let r = 0; r < runs; r++) {
      const result = await runChild<ListingResult>(
        ["--listing", origin, String(partitions), String(service.pid!)],
        token
      )
      listingRuns.push(result)
      console.log(
        `  run ${r + 1} listing ${(result.partitions / result.seconds).toFixed(0).padStart(7)} partitions/s  ${
          (result.cpuMicros / result.partitions).toFixed(2)
        } µs CPU/partition`
      )
    }

    const cpu = (xs: ReadonlyArray<LoadResult>) => median(xs.map((x) => x.cpuMicros / x.requests))
    const rate = (xs: ReadonlyArray<LoadResult>) => median(xs.map((x) => x.requests / x.seconds))
    const ratio = cpu(blobRuns.service) / cpu(blobRuns.bare)
    const listingRate = median(listingRuns.map((x) => x.partitions / x.seconds))
    console.log("")
    console.log("| measure | service | bare node:http | ratio | target | met |")
    console.log("|---|---|---|---|---|---|")
    console.log(
      `| blob GET, server CPU µs/request | ${cpu(blobRuns.service).toFixed(1)} | ${cpu(blobRuns.bare).toFixed(1)} | ${
        ratio.toFixed(2)
      }x | ≤ ${TARGET_CPU_RATIO}x | ${ratio <= TARGET_CPU_RATIO ? "yes" : "no"} |`
    )
    console.log(
      `| blob GET, req/s | ${rate(blobRuns.service).toFixed(0)} | ${rate(blobRuns.bare).toFixed(0)} | ${
        (rate(blobRuns.service) / rate(blobRuns.bare)).toFixed(2)
      }x | — | — |`
    )
    console.log(
      `| listing of ${partitions} partitions, partitions/s | ${
        listingRate.toFixed(0)
      } | — | — | ≥ ${TARGET_LISTING_RATE} | ${listingRate >= TARGET_LISTING_RATE ? "yes" : "no"} |`
    )
    console.log(
      `| listing, server CPU µs/partition | ${
        median(listingRuns.map((x) => x.cpuMicros / x.partitions)).toFixed(2)
      } | — | — | — | — |`
    )
  } finally {
    for (const child of children) child.kill("SIGTERM")
    fs.rmSync(work, { recursive: true, force: true })
  }
}

await main()
