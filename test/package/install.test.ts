/**
 * The package installs like one: `npm pack` of the checkout (which builds dist/ in `prepare`), then
 * the tarball installed into an empty directory and globally (`npm install -g --prefix`), each made
 * read-only, runs `--version`, `serve` and a real `export` without writing into its install
 * directory. As root the installed CLI runs as user nobody, for whom the read-only bits hold.
 *
 * The tarball's native dependency (zstd-napi) compiles from source when installed, which takes a
 * minute on a small machine: the installs skip install scripts and take the binary the checkout's own
 * `npm install` built for the same version (npm's part, not this package's; it is Node-API, so one
 * build serves every Node line). When the version differs, it is built (`npm rebuild`).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { cli, ROOT } from "../support/cli.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { cleanups, filesBelow } from "../support/files.ts"
import { DEMO, parseCredentials, requestToken } from "../support/service.ts"

const NATIVE = ["zstd-napi"]
/** Root can write anywhere: the installed CLI runs as nobody, for whom `chmod a-w` holds. */
const RUN_AS = process.getuid?.() === 0 ? 65534 : undefined

const { cleanup, tempDir } = cleanups()
let work: string
let tarball: string

const npm = (args: ReadonlyArray<string>, cwd: string) =>
  execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 600_000
  })

/** A directory anyone may read and write (the runs as nobody write their output and credentials there). */
const scratch = (name: string) => {
  const dir = path.join(work, name)
  fs.mkdirSync(dir, { recursive: true })
  fs.chmodSync(dir, 0o777)
  return dir
}

/** The natives the install skipped building: the checkout's build of the same version, else a real build. */
const provideNatives = (modules: string) => {
  for (const name of NATIVE) {
    const installed = path.join(modules, name)
    const version = (dir: string) =>
      (JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string }).version
    const built = path.join(ROOT, "node_modules", name, "build", "Release")
    if (version(installed) === version(path.join(ROOT, "node_modules", name)) && fs.existsSync(built)) {
      fs.mkdirSync(path.join(installed, "build", "Release"), { recursive: true })
      for (const file of fs.readdirSync(built).filter((f) => f.endsWith(".node"))) {
        fs.copyFileSync(path.join(built, file), path.join(installed, "build", "Release", file))
      }
    } else {
      npm(["rebuild", name], path.dirname(modules))
    }
  }
}

/** Every file below an install directory with its size and mtime: the proof that nothing was written there. */
const snapshot = (dir: string) =>
  filesBelow(dir).map((f) => {
    const stat = fs.lstatSync(path.join(dir, f))
    return `${f} ${stat.size} ${stat.mtimeMs}`
  })

const readOnly = (dir: string) => execFileSync("chmod", ["-R", "a-w", dir])

/**
 * The Node running these tests, as the installed CLI's user runs it: where nobody can run it (under
 * npm test, the checkout's `node` devDependency), else a copy in the work directory.
 */
let node: string
const nodeForRunAs = () => {
  if (RUN_AS === undefined) return process.execPath
  try {
    execFileSync(process.execPath, ["-e", "0"], { uid: RUN_AS, gid: RUN_AS, stdio: "ignore" })
    return process.execPath
  } catch {
    const copy = path.join(work, "node", "node")
    fs.mkdirSync(path.dirname(copy), { mode: 0o755 })
    fs.copyFileSync(process.execPath, copy)
    fs.chmodSync(copy, 0o755)
    return copy
  }
}
/** The environment of a command run through its shebang (`#!/usr/bin/env node`): that Node first on the PATH. */
const withNode = (env: NodeJS.ProcessEnv) => ({ ...env, PATH: `${path.dirname(node)}${path.delimiter}${env.PATH}` })

const run = (bin: string, args: ReadonlyArray<string>, cwd: string) =>
  cli(args, { node, entry: bin, cwd, env: { HOME: cwd }, uid: RUN_AS })

/** `serve` from the installed package, until the test ends. */
const serveFrom = async (bin: string) => {
  const dir = scratch(`serve-${path.basename(path.dirname(bin))}-${Date.now()}`)
  const credentials = path.join(dir, "credentials.properties")
  const child: ChildProcess = spawn(bin, [
    "serve",
    "--port",
    "0",
    "--seed-partitions",
    "60",
    "--seed-versions",
    "2",
    "--credentials-out",
    credentials
  ], {
    cwd: dir,
    env: withNode({ ...process.env, HOME: dir }),
    stdio: ["ignore", "pipe", "pipe"],
    ...(RUN_AS === undefined ? {} : { uid: RUN_AS, gid: RUN_AS })
  })
  cleanup.push(() => void child.kill("SIGTERM"))
  let stderr = ""
  child.stderr!.on("data", (d) => (stderr += d))
  const line = await new Promise<string>((resolve, reject) => {
    let stdout = ""
    child.stdout!.on("data", (d) => {
      stdout += d
      if (stdout.includes("\n")) resolve(stdout.slice(0, stdout.indexOf("\n")))
    })
    child.on("exit", (code) => reject(new Error(`serve exited ${code}: ${stderr}`)))
  })
  return { ...(JSON.parse(line) as { url: string; lookupUrl: string }), credentials }
}

/** `export` of the demo layer by the installed CLI, from a `serve` of the same install, into a fresh directory. */
const exportFromServe = async (bin: string, name: string) => {
  const service = await serveFrom(bin)
  const out = scratch(`${name}-${Date.now()}`)
  const result = await run(bin, [
    "export",
    "--catalog",
    DEMO,
    "--layer",
    "places",
    "--out",
    out,
    "--lookup-url",
    service.lookupUrl,
    "--credentials",
    service.credentials
  ], out)
  return { service, out, result }
}

/** A real export with the installed CLI, read back by DuckDB and compared with the service's own listing. */
const exportWith = async (bin: string) => {
  const { out, result, service } = await exportFromServe(bin, "out")
  expect(result.code, result.stderr).toBe(0)
  expect(result.stdout).toMatch(/^Exported hrn:local:data:::demo places version 1: /)
  const token =
    ((await (await requestToken(parseCredentials(fs.readFileSync(service.credentials, "utf8")))).json()) as {
      accessToken: string
    }).accessToken
  const listed =
    ((await (await fetch(`${service.url}/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=1`, {
      headers: { authorization: `Bearer ${token}` }
    })).json()) as {
      partitions: Array<{ partition: string; dataHandle: string }>
    }).partitions
  const rows = await withDuckDB((c) =>
    query(
      c,
      `SELECT partition, data_handle FROM read_parquet(${
        literal(path.join(out, "demo", "places", "version=1", "*.parquet"))
      }) ORDER BY partition`
    )
  )
  expect(rows).toEqual(
    [...listed].sort((a, b) => (a.partition < b.partition ? -1 : 1)).map((p) => ({
      partition: p.partition,
      data_handle: p.dataHandle
    }))
  )
}

/** An export before zstd-napi is built (as `npm install --ignore-scripts` leaves it): exit 1, the fix named, no files. */
const exportWithoutNatives = async (bin: string) => {
  const { out, result } = await exportFromServe(bin, "out-no-natives")
  expect(result.code, result.stderr).toBe(1)
  expect(result.stderr).toContain("a module catalog-export needs did not load (MODULE_NOT_FOUND")
  expect(result.stderr).toContain("install catalog-export again")
  expect(result.stderr).not.toContain("output volume")
  expect(filesBelow(out).filter((f) => f.endsWith(".parquet") || f.endsWith(".partial"))).toEqual([])
}

beforeAll(() => {
  work = tempDir("package-")
  fs.chmodSync(work, 0o755)
  node = nodeForRunAs()
  // npm pack of a copy of the checkout as it is (committed or not), so `prepare` builds there.
  const source = path.join(work, "source")
  const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" }).split(
    "\n"
  ).filter((f) => f !== "")
  for (const file of files) {
    if (!fs.existsSync(path.join(ROOT, file))) continue
    fs.mkdirSync(path.dirname(path.join(source, file)), { recursive: true })
    fs.copyFileSync(path.join(ROOT, file), path.join(source, file))
  }
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(source, "node_modules"))
  const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", work], source)) as Array<{ filename: string }>
  tarball = path.join(work, packed[0]!.filename)
}, 300_000)

describe("the packed package", () => {
  it("ships the bundle, the bin and the configs, not the sources, and needs only its native dependencies", () => {
    const entries = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).split("\n").filter((e) => e !== "")
    expect(entries).toContain("package/dist/catalog-export.mjs")
    expect(entries).toContain("package/src/cli/bin.mjs")
    expect(entries).toContain("package/config/crontab.example")
    expect(
      entries.filter((e) => e.endsWith(".ts") || e.startsWith("package/scripts/") || e.startsWith("package/test/"))
    ).toEqual([])
    const pkg = JSON.parse(execFileSync("tar", ["xzOf", tarball, "package/package.json"], { encoding: "utf8" })) as {
      dependencies: Record<string, string>
    }
    expect(Object.keys(pkg.dependencies).sort()).toEqual(NATIVE)
  })

  /** The install at `dir` (its CLI at `bin`), made read-only, runs --version, serve and an export, and stays as it was. */
  const checkInstalled = async (dir: string, bin: string) => {
    readOnly(dir)
    cleanup.push(() => void execFileSync("chmod", ["-R", "u+w", dir]))
    const before = snapshot(dir)
    const version = await run(bin, ["--version"], work)
    expect(version.code, version.stderr).toBe(0)
    expect(version.stdout.trim()).toBe("0.1.0")
    // Run as a command too: its shebang and the mode npm gave it.
    expect(
      execFileSync(bin, ["--version"], {
        cwd: work,
        env: withNode(process.env),
        encoding: "utf8",
        ...(RUN_AS === undefined ? {} : { uid: RUN_AS, gid: RUN_AS })
      }).trim()
    ).toBe("0.1.0")
    await exportWith(bin)
    expect(snapshot(dir)).toEqual(before)
  }

  it(
    "installed into an empty directory made read-only, runs --version, serve and a real export without writing there; before its native module is built, an export says to install again",
    async () => {
      const app = path.join(work, "app")
      fs.mkdirSync(app)
      npm(["install", "--ignore-scripts", "--prefer-offline", tarball], app)
      const bin = path.join(app, "node_modules", ".bin", "catalog-export")
      await exportWithoutNatives(bin)
      provideNatives(path.join(app, "node_modules"))
      await checkInstalled(app, bin)
    },
    300_000
  )

  it(
    "installed globally (npm install -g --prefix) made read-only, runs --version, serve and a real export without writing there",
    async () => {
      const prefix = path.join(work, "global")
      npm(["install", "-g", "--prefix", prefix, "--ignore-scripts", "--prefer-offline", tarball], work)
      provideNatives(path.join(prefix, "lib", "node_modules", "catalog-export", "node_modules"))
      await checkInstalled(prefix, path.join(prefix, "bin", "catalog-export"))
    },
    300_000
  )
})
