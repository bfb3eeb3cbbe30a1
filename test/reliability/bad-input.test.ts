/**
 * Bad input through the real CLI, one row per case: each must fail with the documented exit code
 * (2 bad input or usage, 3 authentication, 4 not found, 5 transient, 1 anything else such as a full
 * disk), say in one sentence what was wrong naming the input, and leave nothing written or
 * half-written in the output directory.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, it } from "vitest"
import { cli, type CliResult, ROOT } from "../support/cli.ts"
import { filesBelow } from "../support/files.ts"
import { DEMO, RESTRICTED, startService, type TestService } from "../support/service.ts"

const NOBODY = 65534

interface Context {
  readonly svc: TestService
  readonly dir: string
  /** A fresh output path of the case (not created). */
  readonly out: string
  readonly credentials: string
  readonly lookup: string
  /** Writes a file in the case's directory and returns its path. */
  readonly file: (name: string, text: string, mode?: number) => string
  /** A nightly-export job config with these fields over valid ones. */
  readonly job: (fields: Record<string, unknown>) => string
}

interface Case {
  readonly name: string
  readonly args: (c: Context) => Array<string>
  readonly code: number
  /** What the sentence must name. */
  readonly says: ReadonlyArray<RegExp | ((c: Context) => RegExp)>
  readonly env?: (c: Context) => Record<string, string>
  /** Runs as this user (the unreadable and unwritable cases: root reads and writes everything). */
  readonly uid?: number
  /** Prepares the case's output path (a file, a read-only or full volume); the output must look the same afterwards. */
  readonly prepare?: (c: Context) => void
}

const quote = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
/** `export` with valid flags, some replaced (undefined: dropped), and `extra` appended. */
const exportArgs = (c: Context, overrides: Record<string, string | undefined> = {}, extra: Array<string> = []) => {
  const flags: Record<string, string | undefined> = {
    "--catalog": DEMO,
    "--layer": "places",
    "--out": c.out,
    "--lookup-url": c.lookup,
    "--credentials": c.credentials,
    ...overrides
  }
  return ["export", ...Object.entries(flags).flatMap(([k, v]) => (v === undefined ? [] : [k, v])), "--quiet", ...extra]
}
const propertiesOf = (text: string) =>
  new Map(
    text.split("\n").filter((l) => l.includes("=")).map((
      l
    ) => [l.slice(0, l.indexOf("=")).trim(), l.slice(l.indexOf("=") + 1).trim()])
  )
const propertiesText = (props: Map<string, string>) => [...props].map(([k, v]) => `${k} = ${v}`).join("\n") + "\n"

let svc: TestService
let root: string
let credentialsText: string
const mounts: Array<string> = []

const mountTmpfs = (dir: string, options: string) => {
  fs.mkdirSync(dir, { recursive: true })
  execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", dir])
  mounts.push(dir)
}

const cases: ReadonlyArray<Case> = [
  // --- catalog, layer and version -----------------------------------------------------------
  {
    name: "malformed HRN",
    args: (c) => exportArgs(c, { "--catalog": "not-an-hrn" }),
    code: 2,
    says: [/not-an-hrn/, /HRN/]
  },
  {
    name: "HRN with too few fields",
    args: (c) => exportArgs(c, { "--catalog": "hrn:here:data" }),
    code: 2,
    says: [/hrn:here:data/]
  },
  {
    name: "HRN with an invalid catalog id",
    args: (c) => exportArgs(c, { "--catalog": "hrn:local:data:::Bad_Id" }),
    code: 2,
    says: [/Bad_Id/]
  },
  {
    name: "a layer HRN given as the catalog",
    args: (c) => exportArgs(c, { "--catalog": `${DEMO}:places` }),
    code: 2,
    says: [/layer HRN/]
  },
  {
    name: "HRN of another service",
    args: (c) => exportArgs(c, { "--catalog": "hrn:local:schema:::demo" }),
    code: 2,
    says: [/schema/]
  },
  {
    name: "HRN of an unknown partition",
    args: (c) => exportArgs(c, { "--catalog": "hrn:mars:data:::demo" }),
    code: 2,
    says: [/mars/]
  },
  {
    name: "unknown catalog",
    args: (c) => exportArgs(c, { "--catalog": "hrn:local:data:::no-such-catalog" }),
    code: 4,
    says: [/no-such-catalog/]
  },
  {
    name: "catalog the application was not granted",
    args: (c) => exportArgs(c, { "--catalog": RESTRICTED }),
    code: 4,
    says: [/restricted/]
  },
  {
    name: "unknown layer",
    args: (c) => exportArgs(c, { "--layer": "no-such-layer" }),
    code: 4,
    says: [/no-such-layer/]
  },
  {
    name: "layer id with path tricks",
    args: (c) => exportArgs(c, { "--layer": "../../escape" }),
    code: 2,
    says: [/\.\.\/\.\.\/escape/]
  },
  {
    name: "version above the latest",
    args: (c) => exportArgs(c, { "--version": "9" }),
    code: 4,
    says: [/Version 9/, /latest version is 2/]
  },
  {
    name: "version below the minimum",
    args: (c) => exportArgs(c, { "--version": "0" }),
    code: 4,
    says: [/Version 0/, /minimum version is 1/]
  },
  {
    name: "version that is not a number",
    args: (c) => exportArgs(c, { "--version": "abc" }),
    code: 2,
    says: [/--version/, /abc/]
  },
  { name: "negative version", args: (c) => exportArgs(c, { "--version": "-1" }), code: 2, says: [/--version/, /-1/] },
  {
    name: "stream layer given to export",
    args: (c) => exportArgs(c, { "--layer": "events" }),
    code: 2,
    says: [/events/, /stream layer/]
  },

  // --- credentials -----------------------------------------------------------------------------
  {
    name: "credentials file missing",
    args: (c) => exportArgs(c, { "--credentials": path.join(c.dir, "absent.properties") }),
    code: 3,
    says: [(c) => new RegExp(quote(path.join(c.dir, "absent.properties"))), /does not exist/]
  },
  {
    name: "credentials path is a directory",
    args: (c) => exportArgs(c, { "--credentials": c.dir }),
    code: 3,
    says: [(c) => new RegExp(quote(c.dir)), /directory/]
  },
  {
    name: "credentials file unreadable",
    uid: NOBODY,
    args: (c) => exportArgs(c, { "--credentials": c.file("locked.properties", credentialsText, 0o000) }),
    code: 3,
    says: [/locked\.properties/, /permission denied/]
  },
  {
    name: "credentials file missing the secret",
    args: (c) => {
      const props = propertiesOf(credentialsText)
      props.delete("here.access.key.secret")
      return exportArgs(c, { "--credentials": c.file("no-secret.properties", propertiesText(props)) })
    },
    code: 3,
    says: [/no-secret\.properties/, /here\.access\.key\.secret/]
  },
  {
    name: "credentials file with an empty key id",
    args: (c) => {
      const props = propertiesOf(credentialsText)
      props.set("here.access.key.id", "")
      return exportArgs(c, { "--credentials": c.file("empty-id.properties", propertiesText(props)) })
    },
    code: 3,
    says: [/empty-id\.properties/, /here\.access\.key\.id/]
  },
  {
    name: "credentials file with a token endpoint that is not a URL",
    args: (c) => {
      const props = propertiesOf(credentialsText)
      props.set("here.token.endpoint.url", "account.example/oauth2/token")
      return exportArgs(c, { "--credentials": c.file("bad-endpoint.properties", propertiesText(props)) })
    },
    code: 3,
    says: [/bad-endpoint\.properties/, /here\.token\.endpoint\.url/]
  },
  {
    name: "wrong key secret",
    args: (c) => {
      const props = propertiesOf(credentialsText)
      props.set("here.access.key.secret", "0".repeat(64))
      return exportArgs(c, { "--credentials": c.file("wrong-secret.properties", propertiesText(props)) })
    },
    code: 3,
    says: [/access token/, /wrong-secret\.properties/]
  },
  {
    name: "unknown key id",
    args: (c) => {
      const props = propertiesOf(credentialsText)
      props.set("here.access.key.id", "no-such-key")
      return exportArgs(c, { "--credentials": c.file("wrong-id.properties", propertiesText(props)) })
    },
    code: 3,
    says: [/access token/, /wrong-id\.properties/]
  },
  {
    name: "no credentials anywhere",
    args: (c) => exportArgs(c, { "--credentials": undefined }),
    env: (c) => ({ HOME: c.dir }),
    code: 3,
    says: [/\.here\/credentials\.properties/, /does not exist/]
  },
  {
    name: "HERE_CREDENTIALS_FILE naming a missing file",
    args: (c) => exportArgs(c, { "--credentials": undefined }),
    env: (c) => ({ HERE_CREDENTIALS_FILE: path.join(c.dir, "from-env.properties") }),
    code: 3,
    says: [/from-env\.properties/, /HERE_CREDENTIALS_FILE/]
  },

  // --- lookup ----------------------------------------------------------------------------------
  {
    // A setup mistake, not an outage: it fails at once (the retry budget is the default 10 minutes).
    name: "lookup URL where nothing listens, from --lookup-url",
    args: (c) => exportArgs(c, { "--lookup-url": "http://127.0.0.1:1/lookup/v1" }),
    code: 2,
    says: [/127\.0\.0\.1:1\/lookup\/v1/, /connection refused/, /came from --lookup-url/, /--lookup-url URL/]
  },
  {
    name: "lookup URL where nothing listens, from CATALOG_LOOKUP_URL",
    args: (c) => exportArgs(c, { "--lookup-url": undefined }),
    env: () => ({ CATALOG_LOOKUP_URL: "http://127.0.0.1:1/lookup/v1" }),
    code: 2,
    says: [/127\.0\.0\.1:1\/lookup\/v1/, /came from CATALOG_LOOKUP_URL/]
  },
  {
    name: "lookup URL where nothing listens, from a job config",
    args: (c) => ["run", c.job({ lookupUrl: "http://127.0.0.1:1/lookup/v1" }), "--quiet"],
    code: 2,
    says: [/127\.0\.0\.1:1\/lookup\/v1/, /came from the job config's "lookupUrl"/]
  },
  {
    name: "lookup URL whose host does not exist",
    args: (c) => exportArgs(c, { "--lookup-url": "http://no-such-host.invalid/lookup/v1" }),
    code: 2,
    says: [/no-such-host\.invalid/, /no such host/, /came from --lookup-url/]
  },
  {
    name: "the service's URL given as its lookup URL",
    args: (c) => exportArgs(c, { "--lookup-url": c.svc.url }),
    code: 2,
    says: [/not a lookup service/, (c) => new RegExp(`did you mean ${quote(c.svc.url)}/lookup/v1\\?`)]
  },
  {
    name: "the lookup URL without its version",
    args: (c) => exportArgs(c, { "--lookup-url": `${c.svc.url}/lookup` }),
    code: 2,
    says: [/not a lookup service/, (c) => new RegExp(`did you mean ${quote(c.svc.url)}/lookup/v1\\?`)]
  },
  {
    name: "lookup URL that is not a URL",
    args: (c) => exportArgs(c, { "--lookup-url": "lookup.example/v1" }),
    code: 2,
    says: [/--lookup-url/, /lookup\.example\/v1/]
  },

  // --- flags -----------------------------------------------------------------------------------
  {
    name: "negative concurrency",
    args: (c) => exportArgs(c, { "--concurrency": "-1" }),
    code: 2,
    says: [/--concurrency/, /-1/]
  },
  { name: "zero concurrency", args: (c) => exportArgs(c, { "--concurrency": "0" }), code: 2, says: [/--concurrency/] },
  {
    name: "concurrency that is not a number",
    args: (c) => exportArgs(c, { "--concurrency": "many" }),
    code: 2,
    says: [/--concurrency/, /many/]
  },
  {
    name: "unknown format",
    args: (c) => exportArgs(c, { "--format": "csv" }),
    code: 2,
    says: [/--format/, /csv/, /parquet/]
  },
  {
    name: "unknown compression",
    args: (c) => exportArgs(c, { "--compression": "lz4" }),
    code: 2,
    says: [/--compression/, /lz4/]
  },
  { name: "zero parts", args: (c) => exportArgs(c, { "--parts": "0" }), code: 2, says: [/--parts/] },
  {
    name: "zero list concurrency",
    args: (c) => exportArgs(c, { "--list-concurrency": "0" }),
    code: 2,
    says: [/--list-concurrency/]
  },
  {
    name: "zero max file bytes",
    args: (c) => exportArgs(c, { "--max-file-bytes": "0" }),
    code: 2,
    says: [/--max-file-bytes/]
  },
  { name: "unknown mode", args: (c) => exportArgs(c, { "--mode": "sideways" }), code: 2, says: [/--mode/, /sideways/] },
  {
    name: "unknown log format",
    args: (c) => exportArgs(c, { "--log-format": "xml" }),
    code: 2,
    says: [/--log-format/, /xml/]
  },
  {
    name: "retry budget that is not a duration",
    args: (c) => exportArgs(c, { "--retry-budget": "forever" }),
    code: 2,
    says: [/--retry-budget/, /forever/]
  },
  {
    name: "negative max retries",
    args: (c) => exportArgs(c, { "--max-retries": "-1" }),
    code: 2,
    says: [/--max-retries/]
  },
  { name: "unknown flag", args: (c) => exportArgs(c, {}, ["--bogus", "1"]), code: 2, says: [/--bogus/] },
  { name: "missing --catalog", args: (c) => exportArgs(c, { "--catalog": undefined }), code: 2, says: [/--catalog/] },
  {
    name: "backfill --from above --to",
    args: (
      c
    ) => [
      "backfill",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--from",
      "5",
      "--to",
      "3",
      "--out",
      c.out,
      "--lookup-url",
      c.lookup,
      "--credentials",
      c.credentials
    ],
    code: 2,
    says: [/--from 5/, /--to 3/]
  },
  {
    name: "backfill negative --from",
    args: (
      c
    ) => [
      "backfill",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--from",
      "-1",
      "--to",
      "2",
      "--out",
      c.out,
      "--lookup-url",
      c.lookup,
      "--credentials",
      c.credentials
    ],
    code: 2,
    says: [/--from/, /-1/]
  },

  // --- job configs -----------------------------------------------------------------------------
  {
    name: "job config missing",
    args: (c) => ["run", path.join(c.dir, "absent.json")],
    code: 2,
    says: [/absent\.json/, /does not exist/]
  },
  {
    name: "job config not JSON",
    args: (c) => ["run", c.file("broken.json", "{ job: nightly-export")],
    code: 2,
    says: [/broken\.json/, /not valid JSON/]
  },
  {
    name: "job config of an unknown job",
    args: (c) => ["run", c.job({ job: "nightly-import" })],
    code: 2,
    says: [/job\.json/, /"job"/]
  },
  {
    name: "job config without out",
    args: (c) => ["run", c.job({ out: undefined })],
    code: 2,
    says: [/job\.json/, /out/]
  },
  {
    name: "job config with an unknown field",
    args: (c) => ["run", c.job({ concurency: 4 })],
    code: 2,
    says: [/job\.json/, /concurency/]
  },
  {
    name: "job config with a string for a number",
    args: (c) => ["run", c.job({ concurrency: "four" })],
    code: 2,
    says: [/job\.json/, /concurrency/]
  },
  {
    name: "job config with a negative concurrency",
    args: (c) => ["run", c.job({ concurrency: -2 })],
    code: 2,
    says: [/job\.json/, /concurrency/]
  },
  {
    name: "job config with an unknown format",
    args: (c) => ["run", c.job({ format: "csv" })],
    code: 2,
    says: [/job\.json/, /format/]
  },
  {
    name: "job config without layers",
    args: (c) => ["run", c.job({ layers: [] })],
    code: 2,
    says: [/job\.json/, /layers/]
  },
  {
    name: "job config with a malformed catalog HRN",
    args: (c) => ["run", c.job({ layers: [{ catalog: "hrn:local:data:::Not Valid", layer: "places" }] })],
    code: 2,
    says: [/Not Valid/]
  },
  {
    name: "backfill job config with from above to",
    args: (
      c
    ) => [
      "run",
      c.file(
        "backfill.json",
        JSON.stringify({
          job: "backfill",
          catalog: DEMO,
          layer: "places",
          from: 2,
          to: 1,
          out: c.out,
          lookupUrl: c.lookup,
          credentials: c.credentials
        })
      )
    ],
    code: 2,
    says: [/from 2/, /to 1/]
  },

  // --- the output directory --------------------------------------------------------------------
  {
    name: "output directory is a file",
    prepare: (c) => fs.writeFileSync(c.out, "not a directory"),
    args: (c) => exportArgs(c),
    code: 2,
    says: [(c) => new RegExp(quote(c.out)), /is a file/]
  },
  {
    name: "output directory below a file",
    prepare: (c) => fs.writeFileSync(path.join(c.dir, "plain-file"), "x"),
    args: (c) => exportArgs(c, { "--out": path.join(c.dir, "plain-file", "out") }),
    code: 2,
    says: [/plain-file/, /is a file/]
  },
  {
    name: "output directory on a read-only volume",
    prepare: (c) => mountTmpfs(c.out, "ro,size=64k"),
    args: (c) => exportArgs(c),
    code: 2,
    says: [(c) => new RegExp(quote(c.out)), /not writable/]
  },
  {
    name: "output directory not writable by the user",
    uid: NOBODY,
    prepare: (c) => fs.mkdirSync(c.out, { mode: 0o755 }),
    args: (c) => exportArgs(c, { "--credentials": c.file("nobody.properties", credentialsText, 0o644) }),
    code: 2,
    says: [(c) => new RegExp(quote(c.out)), /not writable/]
  },
  {
    name: "full disk (no space at all)",
    prepare: (c) => {
      mountTmpfs(c.out, "size=64k")
      // Fill the volume to the last byte.
      try {
        fs.writeFileSync(path.join(c.out, "filler"), Buffer.alloc(64 * 1024, 1))
      } catch {
        // ENOSPC: full, as wanted
      }
    },
    args: (c) => exportArgs(c),
    code: 1,
    says: [(c) => new RegExp(quote(c.out)), /no space left/]
  },
  {
    name: "full disk while writing data",
    prepare: (c) => {
      mountTmpfs(c.out, "size=64k")
      // Leave room for the plan and checkpoints, not for the data files.
      fs.writeFileSync(path.join(c.out, "filler"), Buffer.alloc(52 * 1024, 1))
    },
    args: (c) => exportArgs(c, { "--layer": "tiles", "--compression": "none", "--format": "both" }),
    code: 1,
    says: [(c) => new RegExp(quote(c.out)), /no space left/]
  }
]

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 40, versions: 3, blobBytes: 64 } })
  root = fs.mkdtempSync(path.join(os.tmpdir(), "reliability-bad-input-"))
  fs.chmodSync(root, 0o755)
  credentialsText = await svc.credentialsText()
  // Version 0 is deleted: below the minimum.
  const raised = await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/minimum`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ version: 1 })
  })
  if (raised.status !== 204) throw new Error(`raising the minimum version failed: ${raised.status}`)
  // The unprivileged cases run a copy of the CLI bundle (dist/, fresh after this run) that user
  // nobody can read wherever the checkout lives: a checkout under a 0700 directory (/root, mktemp -d)
  // is closed to it. The bundle needs nothing from node_modules before it writes files.
  const warm = await cli(["--version"])
  if (warm.code !== 0) throw new Error(warm.stderr)
  fs.cpSync(path.join(ROOT, "dist"), path.join(root, "cli"), { recursive: true })
  const unprivileged = await cli(["--version"], { uid: NOBODY, entry: unprivilegedEntry() })
  if (unprivileged.code !== 0) {
    throw new Error(`the copy of the CLI does not run as user nobody: ${unprivileged.stderr}`)
  }
})

const unprivilegedEntry = () => path.join(root, "cli", "catalog-export.mjs")

afterAll(async () => {
  for (const m of mounts) {
    try {
      execFileSync("umount", [m])
    } catch {
      // already gone
    }
  }
  await svc?.close()
  if (root !== undefined) fs.rmSync(root, { recursive: true, force: true })
})

describe.concurrent("bad input through the real CLI", () => {
  it.for(cases.map((c, i) => ({ ...c, index: i })))("$name", async (testCase, { expect }) => {
    const dir = path.join(root, `case-${testCase.index}`)
    fs.mkdirSync(dir, { mode: 0o755 })
    const context: Context = {
      svc,
      dir,
      out: path.join(dir, "out"),
      credentials: path.join(dir, "credentials.properties"),
      lookup: svc.lookupUrl,
      file: (name, text, mode = 0o600) => {
        const file = path.join(dir, name)
        fs.writeFileSync(file, text, { mode })
        fs.chmodSync(file, mode)
        return file
      },
      job: (fields) => {
        const job: Record<string, unknown> = {
          job: "nightly-export",
          lookupUrl: svc.lookupUrl,
          credentials: path.join(dir, "credentials.properties"),
          out: path.join(dir, "out"),
          layers: [{ catalog: DEMO, layer: "places" }],
          ...fields
        }
        for (const [k, v] of Object.entries(job)) if (v === undefined) delete job[k]
        const file = path.join(dir, "job.json")
        fs.writeFileSync(file, JSON.stringify(job, null, 2))
        return file
      }
    }
    fs.writeFileSync(context.credentials, credentialsText, { mode: testCase.uid === undefined ? 0o600 : 0o644 })
    testCase.prepare?.(context)
    const args = testCase.args(context)
    const before = filesBelow(context.out)
    const beforeRoot = filesBelow(dir).filter((f) => !f.startsWith("out"))

    const result: CliResult = await cli(args, {
      ...(testCase.env === undefined ? {} : { env: testCase.env(context) }),
      ...(testCase.uid === undefined ? {} : { uid: testCase.uid, entry: unprivilegedEntry() }),
      timeoutMs: 60_000
    })
    const lines = result.stderr.split("\n").map((l) => l.trim()).filter((l) => l !== "")
    const report = `exit ${result.code}\n${result.stderr}${result.stdout}`
    expect(result.code, report).toBe(testCase.code)
    // One sentence: the CLI's own `catalog-export: ...` line, or the argument parser's line; no stack trace.
    expect(lines.length, report).toBe(1)
    expect(result.stderr, report).not.toMatch(/^\s+at /m)
    const sentence = lines[0]!
    for (const pattern of testCase.says) {
      expect(sentence).toMatch(typeof pattern === "function" ? pattern(context) : pattern)
    }
    expect(result.stdout).not.toMatch(/^Exported /m)
    // Nothing written: the output looks as it did before, and no file appeared beside it.
    expect(filesBelow(context.out)).toEqual(before)
    if (before.length === 0 && testCase.prepare === undefined) {
      expect(fs.existsSync(context.out), `${context.out} was created`).toBe(false)
    }
    expect(filesBelow(dir).filter((f) => !f.startsWith("out"))).toEqual(beforeRoot)
  })
})
