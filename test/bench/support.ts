/**
 * What the benchmarks share: running a program under measured.mjs (its own CPU and peak RSS), reading
 * another process's CPU time, starting the local service in its own process and getting a token from it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const BENCH = path.join(ROOT, "test", "bench")
export const TMP = path.join(BENCH, ".tmp")

/** The bundle measured: this checkout's, or another build's (BENCH_CLI), for an A/B against the same servers. */
const BUNDLE = process.env.BENCH_CLI ?? path.join(ROOT, "dist", "catalog-export.mjs")
const INSTALLED = path.join(
  TMP,
  `installed-${createHash("sha1").update(path.dirname(path.dirname(BUNDLE))).digest("hex").slice(0, 8)}`
)

/**
 * The CLI as users run it: the `catalog-export` command of an installed copy of the build, its own
 * src/cli/bin.mjs (which turns on V8's compile cache: a dry run ~55 ms sooner) beside a link to its
 * dist/. `measure(CLI, …)` lays the copy out. (In a checkout bin.mjs would first check whether the
 * bundle is stale; an installed copy does not.)
 */
export const CLI = path.join(INSTALLED, "src", "cli", "bin.mjs")

/** Lays out (again: the build's bin.mjs may have changed) the installed copy CLI runs. */
const installCli = () => {
  fs.mkdirSync(path.dirname(CLI), { recursive: true })
  fs.copyFileSync(path.join(path.dirname(path.dirname(BUNDLE)), "src", "cli", "bin.mjs"), CLI)
  fs.rmSync(path.join(INSTALLED, "dist"), { force: true })
  fs.symlinkSync(path.dirname(BUNDLE), path.join(INSTALLED, "dist"))
}
export const TSX = path.join(ROOT, "node_modules", "tsx", "dist", "cli.mjs")
/** Node's arguments that load TypeScript programs (for `measure`). */
export const TS_LOADER = ["--import", "tsx"]
const MEASURED = path.join(BENCH, "measured.mjs")

export interface Usage {
  readonly cpuSeconds: number
  readonly maxRssMb: number
  readonly wallSeconds: number
  readonly stdout: string
}

/**
 * Runs `program args` in its own process under measured.mjs: its CPU, peak RSS, wall time and stdout.
 * `nodeArgs` go to that Node process (`TS_LOADER` runs a TypeScript program).
 */
export const measure = (
  program: string,
  programArgs: ReadonlyArray<string>,
  nodeArgs: ReadonlyArray<string> = []
): Usage => {
  fs.mkdirSync(TMP, { recursive: true })
  if (program === CLI) installCli()
  const usageFile = path.join(TMP, `usage-${process.pid}.jsonl`)
  fs.rmSync(usageFile, { force: true })
  const started = performance.now()
  const stdout = execFileSync(process.execPath, [...nodeArgs, MEASURED, program, ...programArgs], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
    env: { ...process.env, BENCH_USAGE_FILE: usageFile },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const wallSeconds = (performance.now() - started) / 1000
  const usage = JSON.parse(fs.readFileSync(usageFile, "utf8").trim().split("\n").at(-1)!) as {
    userUs: number
    systemUs: number
    maxRssKb: number
    exitCode: number
  }
  fs.rmSync(usageFile)
  if (usage.exitCode !== 0) throw new Error(`${program} exited with ${usage.exitCode}`)
  return { cpuSeconds: (usage.userUs + usage.systemUs) / 1e6, maxRssMb: usage.maxRssKb / 1024, wallSeconds, stdout }
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** user+sys CPU of a process in µs, from /proc (fields 14 and 15, after the parenthesised name). */
export const cpuMicrosOf = (pid: number): number => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS
}

export const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export const readProperties = (file: string) =>
  Object.fromEntries(
    fs.readFileSync(file, "utf8").split("\n").filter((l) => l.includes("=")).map((l) => {
      const i = l.indexOf("=")
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()]
    })
  ) as Record<string, string>

/** The first JSON line a child prints on stdout (`serve` prints one once listening). */
export const waitForLine = (child: ChildProcess, what = "serve") =>
  new Promise<Record<string, string>>((resolve, reject) => {
    let buffer = ""
    child.stdout!.on("data", (chunk) => {
      buffer += chunk
      const line = buffer.split("\n").find((l) => l.startsWith("{"))
      if (line !== undefined) resolve(JSON.parse(line))
    })
    child.on("exit", (code) => reject(new Error(`${what} exited with ${code}`)))
  })

/**
 * `catalog-export serve` with the demo seed sized for a benchmark, in its own process; its SQLite and
 * blob files in `data` when given (the caller removes it), else in a temporary directory of its own.
 */
export const startService = async (partitions: number, blobBytes: number, credentials: string, data?: string) => {
  const child = spawn(process.execPath, [
    path.join(ROOT, "src/cli/bin.mjs"),
    "serve",
    "--port",
    "0",
    ...(data === undefined ? [] : ["--data", data]),
    "--seed-partitions",
    String(partitions),
    "--seed-versions",
    "1",
    "--seed-blob-bytes",
    String(blobBytes),
    "--credentials-out",
    credentials
  ], { stdio: ["ignore", "pipe", "inherit"] })
  const line = await waitForLine(child)
  return { child, lookupUrl: line.lookupUrl! }
}

/** What a user's script does first: a signed token request with the credentials file. */
export const bearerToken = async (credentials: string) => {
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
  const res = await fetch(tokenUrl, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify({ grantType: "client_credentials" })
  })
  return ((await res.json()) as { accessToken: string }).accessToken
}

/** Stops a child process (SIGTERM) and waits for it to exit. */
export const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve()
    child.on("exit", () => resolve())
    child.kill("SIGTERM")
  })

/** A layer to export: where its service is and how to sign in. */
export interface Source {
  readonly lookupUrl: string
  readonly credentials: string
  readonly catalog: string
  readonly layer: string
}

/** `export` of a layer into `out`, measured; the defaults but for `extra`. */
export const exportLayer = (source: Source, out: string, extra: ReadonlyArray<string> = []) =>
  measure(CLI, [
    "export",
    "--lookup-url",
    source.lookupUrl,
    "--credentials",
    source.credentials,
    "--catalog",
    source.catalog,
    "--layer",
    source.layer,
    "--out",
    out,
    "--quiet",
    ...extra
  ])

export const DEMO_CATALOG = "hrn:local:data:::demo"

/**
 * The local service (`serve`, demo seed: `partitions` blobs of `blobBytes` in its `places` layer, one version)
 * with its data in a temporary directory, which `f` may use too; all of it removed after.
 */
export const withLocalService = async <A>(
  partitions: number,
  blobBytes: number,
  f: (service: { readonly lookupUrl: string; readonly credentials: string }, work: string) => Promise<A>
): Promise<A> => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-bench-"))
  try {
    const credentials = path.join(work, "credentials.properties")
    const { child, lookupUrl } = await startService(partitions, blobBytes, credentials, path.join(work, "service"))
    try {
      return await f({ lookupUrl, credentials }, work)
    } finally {
      await stop(child)
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
}
