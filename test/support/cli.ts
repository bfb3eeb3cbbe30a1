/** The real `catalog-export` (the bin every user runs) as a child process. */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import type { TestService } from "./service.ts"

export const ROOT = path.resolve(import.meta.dirname, "..", "..")
export const BIN = path.join(ROOT, "src", "cli", "bin.mjs")

export interface CliResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface CliOptions {
  readonly env?: Record<string, string | undefined>
  readonly timeoutMs?: number
  /** Runs it as this user (and group, unless `gid`). */
  readonly uid?: number | undefined
  readonly gid?: number
  /** Another copy of the CLI (an installed one, one an unprivileged user can read); it runs from its own directory. */
  readonly entry?: string
  /** The Node that runs it (default: the one running the tests). */
  readonly node?: string
  readonly cwd?: string
  readonly onSpawn?: (child: ChildProcess) => void
}

/** Runs `catalog-export <args>` to its end. */
export const cli = (args: ReadonlyArray<string>, options: CliOptions = {}) =>
  new Promise<CliResult>((resolve, reject) => {
    const env: Record<string, string> = {}
    for (const [k, v] of Object.entries({ ...process.env, ...options.env })) if (v !== undefined) env[k] = v
    // Never pick up a developer's real lookup URL or credentials.
    if (options.env?.CATALOG_LOOKUP_URL === undefined) delete env.CATALOG_LOOKUP_URL
    if (options.env?.HERE_CREDENTIALS_FILE === undefined) delete env.HERE_CREDENTIALS_FILE
    const child = spawn(options.node ?? process.execPath, [options.entry ?? BIN, ...args], {
      cwd: options.cwd ?? (options.entry === undefined ? ROOT : path.dirname(options.entry)),
      env,
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.gid ?? options.uid })
    })
    options.onSpawn?.(child)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(
        new Error(
          `catalog-export ${args.join(" ")} did not finish within ${options.timeoutMs ?? 120_000} ms\n${stderr}`
        )
      )
    }, options.timeoutMs ?? 120_000)
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })

/** The CLI pointed at a test service with the given credentials file. */
export const cliFor = (svc: TestService, credentials: string) => (...args: Array<string>): Promise<CliResult> =>
  cli([...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials])

/** The flags that point the CLI at a test service as the demo application, logging JSON. */
export const serviceFlags = async (
  svc: TestService
) => ["--lookup-url", svc.lookupUrl, "--credentials", await svc.credentialsFile(), "--log-format", "json"]

/** The `catalog-export: <sentence>` lines a failed run printed. */
export const failureLines = (r: CliResult) => r.stderr.split("\n").filter((l) => l.startsWith("catalog-export: "))
