/** What the benchmarks share: starting the local service in its own process and getting a token from it. */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

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

/** `catalog-export serve` with the demo seed sized for a benchmark, in its own process. */
export const startService = async (partitions: number, blobBytes: number, credentials: string) => {
  const child = spawn(process.execPath, [
    path.join(ROOT, "src/cli/bin.mjs"),
    "serve",
    "--port",
    "0",
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
