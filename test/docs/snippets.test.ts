/**
 * Doc tests: every ```sh / ```bash and ```sql snippet of README.md and docs/*.md runs, in the order of
 * its document, against the demo (the local service with the demo seed), so the docs cannot drift
 * from what the tool does.
 *
 * The convention the docs follow (README's quick start sets it up for a reader):
 * - commands reach the service through the environment, CATALOG_LOOKUP_URL and HERE_CREDENTIALS_FILE,
 *   which the test points at its own service, so a snippet runs here exactly as written;
 * - shell snippets run with bash (`-e`) in one temporary directory per document, holding a copy of
 *   config/ as a checkout does, with `catalog-export` (the built dist/) and `duckdb` on the PATH;
 * - SQL snippets run with DuckDB in that directory, over what the document's earlier snippets wrote;
 *   each SELECT must return rows;
 * - `<!-- doc-test: skip (why) -->` on the line before a fence skips a snippet that cannot run here
 *   (a cloud destination, another engine's SQL, a synopsis of flags, a service in the foreground),
 *   listed below per document; `<!-- doc-test: exit N -->` expects a snippet to fail with exit code N;
 * - a skipped synopsis (`skip (synopsis ...)`) is still read: its commands and flags must exist in
 *   the CLI's command tree (what `--help` lists), so a renamed flag cannot linger in the docs.
 */
import * as Command from "@effect/cli/Command"
import * as Arr from "effect/Array"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { commandModules } from "../../src/cli/commands.ts"
import { unknownWord } from "../../src/cli/Suggest.ts"
import { defaultSeed } from "../../src/server/Seed.ts"
import { ROOT } from "../support/cli.ts"
import { startService, type TestService } from "../support/service.ts"

/** How many snippets each document skips: a new skip is a change of this table, seen in review. */
const SKIPPED: Record<string, number> = {
  "README.md": 5,
  "docs/credentials-and-lookup.md": 1,
  "docs/decoding.md": 2,
  "docs/development.md": 1,
  "docs/exporting.md": 1,
  "docs/failure-behaviour.md": 1,
  "docs/iceberg-tables.md": 4,
  "docs/incremental-backfill-retention.md": 3,
  "docs/local-service.md": 3,
  "docs/managing-catalogs.md": 6,
  "docs/object-stores-and-shards.md": 2,
  "docs/operating.md": 1
}

interface Snippet {
  readonly file: string
  readonly line: number
  readonly lang: "sh" | "sql"
  readonly code: string
  readonly skip: string | undefined
  readonly exit: number
}

const MARKER = /^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$/

/** The runnable snippets of a Markdown text, with the doc-test marker on the line before each fence. */
const snippetsOf = (file: string, text: string): Array<Snippet> => {
  const lines = text.split("\n")
  const snippets: Array<Snippet> = []
  const markers = new Map<number, string>()
  lines.forEach((l, i) => {
    const m = MARKER.exec(l)
    if (m !== null) markers.set(i, m[1]!)
  })
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]!)
    if (open === null) continue
    const [, indent, fence, info] = open
    let end = i + 1
    while (end < lines.length && !lines[end]!.trimStart().startsWith(fence!)) end++
    const code = lines.slice(i + 1, end).map((l) => l.startsWith(indent!) ? l.slice(indent!.length) : l).join("\n")
    let before = i - 1
    while (before >= 0 && lines[before]!.trim() === "") before--
    const directive = markers.get(before)
    const lang = info === "sh" || info === "bash" ? "sh" : info === "sql" ? "sql" : undefined
    if (directive !== undefined) {
      markers.delete(before)
      if (lang === undefined) throw new Error(`${file}:${before + 1}: a doc-test marker before a ${info} block`)
    }
    if (lang !== undefined) {
      const skip = directive === undefined ? undefined : /^skip \((.+)\)$/.exec(directive)?.[1]
      const exit = directive === undefined ? undefined : /^exit (\d+)$/.exec(directive)?.[1]
      if (directive !== undefined && skip === undefined && exit === undefined) {
        throw new Error(`${file}:${before + 1}: unknown doc-test marker '${directive}' (skip (why) or exit N)`)
      }
      snippets.push({ file, line: i + 1, lang, code, skip, exit: exit === undefined ? 0 : Number(exit) })
    }
    i = end
  }
  for (const [at] of markers) throw new Error(`${file}:${at + 1}: a doc-test marker not followed by a code block`)
  return snippets
}

const DOCS = [
  "README.md",
  ...fs.readdirSync(path.join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)
]
const snippets = new Map(DOCS.map((doc) => [doc, snippetsOf(doc, fs.readFileSync(path.join(ROOT, doc), "utf8"))]))

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv, input?: string) =>
  new Promise<Ran>((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
    child.stdin.end(input ?? "")
  })

let service: TestService
let bin: string
let credentials: string

beforeAll(async () => {
  service = await startService({ seed: { partitions: defaultSeed.partitions, versions: defaultSeed.versions } })
  credentials = await service.credentialsFile()
  bin = path.join(service.dir, "bin")
  fs.mkdirSync(bin)
  const shim = (name: string, script: string) => {
    fs.writeFileSync(path.join(bin, name), `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`, { mode: 0o755 })
  }
  shim("catalog-export", path.join(ROOT, "dist", "catalog-export.mjs"))
  shim("duckdb", path.join(import.meta.dirname, "duckdb-cli.mjs"))
})

afterAll(() => service?.close())

/** Runs a document's snippets in order in a fresh directory; the first failure ends the run and is returned. */
const runDocument = async (doc: string): Promise<string | undefined> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-doc-"))
  try {
    fs.cpSync(path.join(ROOT, "config"), path.join(dir, "config"), { recursive: true })
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${bin}${path.delimiter}${process.env.PATH}`,
      HOME: dir,
      CATALOG_LOOKUP_URL: service.lookupUrl,
      HERE_CREDENTIALS_FILE: credentials
    }
    for (const s of snippets.get(doc)!) {
      if (s.skip !== undefined) continue
      const where = `${s.file}:${s.line} (${s.lang})`
      const r = s.lang === "sh"
        ? await run("bash", ["-e", "-c", s.code], dir, env)
        : await run(path.join(bin, "duckdb"), [], dir, env, s.code)
      if (r.code !== s.exit) {
        const ended = r.code === null ? "was stopped after 60 s" : `exited ${r.code}`
        return `${where} ${ended}, expected exit ${s.exit}:\n${s.code}\n--- stderr\n${r.stderr.slice(-2000)}`
      }
      if (s.lang === "sql") {
        const empty = r.stdout.split("\n").filter((l) => l !== "").map((l) =>
          JSON.parse(l) as { statement: number; type: string; rows: number }
        )
          .filter((q) => q.type === "SELECT" && q.rows === 0)
        if (empty.length > 0) {
          return `${where}: statement(s) ${empty.map((q) => q.statement).join(", ")} returned no rows:\n${s.code}`
        }
      }
    }
    return undefined
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("doc tests", () => {
  it("mark every snippet that cannot run here, with the reason, and no other", () => {
    const skipped = [...snippets.values()].flat().filter((s) => s.skip !== undefined)
    console.log(
      `doc tests: ${skipped.length} snippet(s) skipped of ${[...snippets.values()].flat().length}:\n` +
        skipped.map((s) => `  ${s.file}:${s.line} (${s.lang}): ${s.skip}`).join("\n")
    )
    expect(Object.fromEntries(DOCS.map((doc) => [doc, snippets.get(doc)!.filter((s) => s.skip !== undefined).length])))
      .toEqual(Object.fromEntries(DOCS.map((doc) => [doc, SKIPPED[doc] ?? 0])))
  })

  // One document at a time: side by side, their exports share the cores with the service in this process.
  it.each(DOCS.filter((doc) => snippets.get(doc)!.some((s) => s.skip === undefined)))(
    "%s: every snippet runs",
    async (doc) => {
      expect(await runDocument(doc)).toBeUndefined()
    },
    120_000
  )

  it("the synopses name only commands and flags that exist", async () => {
    const commands = (await Promise.all(commandModules.map((m) => m.load()))).flat()
    if (!Arr.isNonEmptyReadonlyArray(commands)) throw new Error("no commands")
    const root = Command.withSubcommands(Command.make("catalog-export"), commands)
    const unknown: Array<string> = []
    let checked = 0
    for (const s of [...snippets.values()].flat().filter((s) => s.skip?.startsWith("synopsis") === true)) {
      let command: ReadonlyArray<string> | undefined
      for (const line of s.code.split("\n")) {
        // The command's words: `catalog-export versions latest|minimum|list --catalog HRN` is `versions latest`.
        const words = /^catalog-export((?: [a-z|]+(?= |$))*)/.exec(line)?.[1]
        if (words !== undefined) command = words.trim().split(" ").map((w) => w.split("|")[0]!)
        else if (!/^\s/.test(line)) command = undefined // not a continuation of the command above
        if (command === undefined) continue
        const flags = [...line.split("#")[0]!.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0])
        for (const flag of flags.length === 0 ? [undefined] : flags) {
          const wrong = unknownWord(root, flag === undefined ? command : [...command, `${flag}=x`])
          if (wrong !== undefined) unknown.push(`${s.file}:${s.line}: ${wrong}`)
          checked++
        }
      }
    }
    expect(checked).toBeGreaterThan(100)
    expect(unknown).toEqual([])
  })

  it("the markers are read: a skip needs a reason, an exit code is a number", () => {
    const text =
      "<!-- doc-test: skip (needs AWS) -->\n```sh\naws s3 ls\n```\n\n<!-- doc-test: exit 2 -->\n```sql\nSELECT 1\n```\n"
    expect(snippetsOf("t.md", text).map((s) => [s.line, s.skip, s.exit])).toEqual([[2, "needs AWS", 0], [
      7,
      undefined,
      2
    ]])
    expect(() => snippetsOf("t.md", "<!-- doc-test: skip -->\n```sh\nls\n```\n")).toThrow(/unknown doc-test marker/)
    expect(() => snippetsOf("t.md", "<!-- doc-test: skip (x) -->\n```json\n{}\n```\n")).toThrow(/before a json block/)
  })
})
