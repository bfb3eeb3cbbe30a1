/**
 * `--help` of every command and subcommand through the real CLI, as a person reads it: the purpose
 * first, a usage line with the program's name, required flags before optional ones, the export
 * settings' defaults as Settings.ts declares them, examples that parse (checked by the CLI's own
 * parse, src/cli/parse.ts, in this process), the exit codes, and none of @effect/cli's type notes.
 * Also: `--version` after export is the catalog version, never the app's.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { commandModules, commandsFor, namesOf } from "../../src/cli/commands.ts"
import { EXIT_MEANINGS } from "../../src/cli/Exit.ts"
import { forParser } from "../../src/cli/help.ts"
import { mistakeIn, parseArgs, rootCommand } from "../../src/cli/parse.ts"
import { ExitCode } from "../../src/domain/ExitCode.ts"
import { TOOL } from "../../src/domain/Tool.ts"
import { defaults } from "../../src/export/Settings.ts"
import { serviceState } from "../reliability/support.ts"
import { cli, failureLines } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

/** A help text's sections by their header (USAGE, OPTIONS, ...), and what comes before the first. */
const sectionsOf = (text: string) => {
  const sections = new Map<string, Array<string>>([["", []]])
  let current = ""
  for (const line of text.split("\n")) {
    if (/^[A-Z][A-Z ]+$/.test(line)) sections.set(current = line, [])
    else if (line.trim() !== "") sections.get(current)!.push(line)
  }
  return sections
}

interface Flag {
  readonly name: string
  readonly text: ReadonlyArray<string>
}

/** The OPTIONS section as flags (a line starting with `--`) and their description lines. */
const flagsOf = (lines: ReadonlyArray<string>): Array<Flag> => {
  const flags: Array<{ name: string; text: Array<string> }> = []
  for (const line of lines) {
    if (line.startsWith("--")) flags.push({ name: line.split(" ")[0]!, text: [] })
    else flags.at(-1)?.text.push(line.trim())
  }
  return flags
}

const helps = new Map<string, string>()
/** `catalog-export WORDS --help`'s text (each asked once per file). */
const help = async (words: ReadonlyArray<string>) => {
  const key = words.join(" ")
  if (!helps.has(key)) {
    const r = await cli([...words, "--help"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toBe("")
    helps.set(key, r.stdout)
  }
  return helps.get(key)!
}

/** Every command path, from the top-level list and each group's COMMANDS section. */
const commandPaths = async (): Promise<Array<Array<string>>> => {
  const paths: Array<Array<string>> = []
  for (const name of commandModules.flatMap(namesOf)) {
    paths.push([name])
    const children = sectionsOf(await help([name])).get("COMMANDS") ?? []
    for (const line of children) paths.push([name, line.trim().split(/\s+/)[0]!])
  }
  return paths
}

const { tempDir } = cleanups()

let paths: Array<Array<string>> = []
beforeAll(async () => {
  paths = await commandPaths()
}, 120_000)

describe("every command's --help", () => {
  it("has a purpose, a usage with the program's name, required flags first, examples and exit codes", async () => {
    expect(paths.length).toBeGreaterThan(30)
    for (const words of paths) {
      const name = [TOOL.name, ...words].join(" ")
      const text = await help(words)
      expect(text, name).not.toMatch(/A user-defined piece of text|This setting is optional|A true or false value/)
      const sections = sectionsOf(text)
      const purpose = sections.get("")!
      expect(purpose, name).toHaveLength(1)
      expect(purpose[0], name).toMatch(/^[A-Z].*\.$/)
      expect(sections.get("USAGE")?.[0], name).toMatch(new RegExp(`^\\$ ${name}( |$)`))

      const flags = flagsOf(sections.get("OPTIONS") ?? [])
      const required = flags.map((f) => f.text.some((t) => t.startsWith("Required")))
      expect(required.indexOf(false) === -1 || required.lastIndexOf(true) < required.indexOf(false), name).toBe(true)
      // The app's own flags are listed once, by `catalog-export --help`.
      for (const builtIn of ["--wizard", "--completions", "--log-level", "--help"]) {
        expect(flags.map((f) => f.name), name).not.toContain(builtIn)
      }
      expect(flags.filter((f) => f.name === "--version").length, name).toBeLessThanOrEqual(1)

      const examples = sections.get("EXAMPLES") ?? []
      expect(examples.length, name).toBeGreaterThanOrEqual(1)
      for (const example of examples) expect(example, name).toMatch(new RegExp(`^\\$ ${TOOL.name} ${words[0]}`))

      expect(sections.get("EXIT CODES"), name).toEqual(
        Object.values(ExitCode).sort((a, b) => a - b).map((code) => `${code}  ${EXIT_MEANINGS[code]}`)
      )
    }
  }, 300_000)

  it("shows examples that parse: every flag and command in them is known", async () => {
    const examples = new Set<string>()
    for (const words of paths) {
      for (const line of sectionsOf(await help(words)).get("EXAMPLES") ?? []) examples.add(line)
    }
    expect(examples.size).toBeGreaterThan(30)
    // Checked as main.ts checks arguments (one process, not one per example): the typo check reads every
    // word; the parser, given --help before the first flag, only the commands.
    for (const example of examples) {
      const words = example.replace(`$ ${TOOL.name} `, "").split(" ")
      const at = words.findIndex((a) => a.startsWith("-"))
      const args = forParser(at === -1 ? [...words, "--help"] : [...words.slice(0, at), "--help", ...words.slice(at)])
      const root = rootCommand(await commandsFor(args))
      expect(mistakeIn(root, args), example).toBeUndefined()
      const parsed = await Effect.runPromise(
        parseArgs(root, args).pipe(Effect.either, Effect.provide(NodeContext.layer))
      )
      expect(Either.isRight(parsed) ? "parsed" : JSON.stringify(parsed.left), example).toBe("parsed")
    }
  })
})

describe("export --help", () => {
  it("lists --catalog, --layer and --out first, as required, and the settings' defaults from Settings.ts", async () => {
    const sections = sectionsOf(await help(["export"]))
    expect(sections.get("USAGE")).toEqual([`$ ${TOOL.name} export --catalog HRN --layer ID --out DEST [options]`])
    const flags = flagsOf(sections.get("OPTIONS")!)
    expect(flags.slice(0, 3).map((f) => f.name)).toEqual(["--catalog", "--layer", "--out"])
    for (const f of flags.slice(0, 3)) expect(f.text.join(" ")).toContain("Required unless --plan.")
    const byName = new Map(flags.map((f) => [f.name, f.text]))
    for (const [key, value] of Object.entries(defaults)) {
      if (value === undefined) continue
      const flag = `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
      expect(byName.get(flag), flag).toContain(`Default: ${String(value)}.`)
    }
    expect(byName.get("--version")?.join(" ")).toContain("Default: latest.")
    expect(byName.get("--mode")?.join(" ")).toContain("Default: full.")
  })

  it.for([["retention"], ["check"]])("%s does not call --layer required", async (words) => {
    const flags = flagsOf(sectionsOf(await help(words)).get("OPTIONS")!)
    const layer = flags.find((f) => f.name === "--layer")
    expect(layer?.text.some((t) => t.startsWith("Required"))).toBe(false)
  })

  it("the top-level help lists the commands and the app's --version", async () => {
    const sections = sectionsOf(await help([]))
    expect(sections.get("")?.[1]).toBe(`${TOOL.name} ${TOOL.version}`)
    expect((sections.get("COMMANDS") ?? []).map((l) => l.trim().split(/\s+/)[0])).toEqual(
      commandModules.flatMap(namesOf)
    )
    expect(flagsOf(sections.get("OPTIONS")!).map((f) => f.name)).toContain("--version")
  })
})

describe("--version after export is the catalog version", () => {
  let svc: TestService
  let connection: Array<string>
  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 10, versions: 4 } })
    connection = ["--lookup-url", svc.lookupUrl, "--credentials", await svc.credentialsFile()]
  }, 120_000)
  afterAll(() => svc?.close())

  /** `export --dry-run` of the demo's places layer into a new directory (`out`, which must stay absent). */
  const dryRun = (...flags: Array<string>) => {
    const out = path.join(tempDir("help-dry-run-"), "out")
    return cli(["export", "--catalog", DEMO, "--layer", "places", "--out", out, ...flags, "--dry-run", ...connection])
      .then((r) => ({ ...r, out }))
  }

  it.for(["1", "2", "latest"])("export --version %s --dry-run --json plans that version", async (version) => {
    const r = await dryRun("--version", version, "--json")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).not.toContain(TOOL.version)
    const document = JSON.parse(r.stdout) as { dryRun: boolean; layers: Array<Record<string, unknown>> }
    const planned = version === "latest" ? 3 : Number(version)
    expect(document).toEqual({
      dryRun: true,
      layers: [{
        catalog: DEMO,
        layer: "places",
        action: "export",
        version: planned,
        mode: "full",
        parts: defaults.parts,
        partitions: (await serviceState(svc, "places", planned)).size
      }]
    })
    expect(r.stdout).not.toMatch(/_tag|Planned/)
    expect(fs.existsSync(r.out), `${r.out} was created`).toBe(false)
  })

  it("export --version with no value is a usage error, not the app's version", async () => {
    const r = await cli(["export", "--catalog", DEMO, "--layer", "places", "--out", "o", "--version"])
    expect(r.code).toBe(2)
    expect(r.stdout).toBe("")
    expect(failureLines(r)).toEqual([
      `catalog-export: --version of 'catalog-export export' takes the catalog version (a number, or latest); 'catalog-export --version' alone prints the version of catalog-export.`
    ])
  })

  it("catalog-export --version alone prints the app's version", async () => {
    const r = await cli(["--version"])
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe(TOOL.version)
  })

  it("export --dry-run says one metadata part, not '1 metadata parts'", async () => {
    const r = await dryRun("--parts", "1")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.trim().split("\n")).toEqual([
      `Would export ${DEMO} places version 3 (full, ${
        (await serviceState(svc, "places", 3)).size
      } partitions in 1 metadata part).`,
      "Dry run: nothing was changed."
    ])
  })
})
