/**
 * Typos through the real CLI, on a pseudo-terminal (util-linux `script`) as a person meets them and
 * in a pipe as a script does: the nearest command, subcommand or flag is suggested, exit code 2,
 * and every error line starts with `catalog-export: `.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { BIN, cli } from "../support/cli.ts"

const run = promisify(execFile)

/** The screen of `catalog-export <args>` on a terminal, and its exit code. */
const onTerminal = async (...args: Array<string>) => {
  const command = [process.execPath, BIN, ...args].map((a) => `'${a}'`).join(" ")
  try {
    const { stdout } = await run("script", ["-qec", command, "/dev/null"])
    return { code: 0, screen: stdout.replace(/\r/g, "") }
  } catch (e) {
    const error = e as { code: number; stdout: string }
    return { code: error.code, screen: error.stdout.replace(/\r/g, "") }
  }
}

const cases: ReadonlyArray<{ readonly args: Array<string>; readonly says: string }> = [
  { args: ["exprot"], says: "catalog-export: unknown command 'catalog-export exprot'. Did you mean export?" },
  {
    args: ["catalogs", "lst"],
    says:
      "catalog-export: unknown command 'catalog-export catalogs lst'. Did you mean list? The commands of 'catalog-export catalogs' are create, delete, get, list, update."
  },
  {
    args: ["export", "--ctalog", "hrn:here:data::org:x"],
    says:
      "catalog-export: unknown flag '--ctalog' for 'catalog-export export'. Did you mean --catalog? 'catalog-export export --help' lists its flags."
  },
  {
    args: ["retention", "--catalog", "hrn:here:data::org:x", "auto", "--kep", "3"],
    says: "catalog-export: unknown flag '--kep' for 'catalog-export retention auto'. Did you mean --keep?"
  },
  { args: ["run", "job.json", "--dry-rn"], says: "Did you mean --dry-run?" },
  {
    args: ["export", "--catalog", "hrn:here:data::org:x", "--layer", "l", "--out", "o", "--format", "csv"],
    says: "catalog-export: --format must be one of parquet, arrow, both, iceberg, got 'csv'."
  },
  {
    args: ["retention", "--catalog", "hrn:here:data::org:x", "--older-than", "30", "--skip-export-check"],
    says: "catalog-export: --older-than takes a duration such as 30d, 12h or \"7 days\", got \"30\"."
  }
]

describe.concurrent("typos", () => {
  it.for(cases)("$args", async ({ args, says }, { expect }) => {
    const terminal = await onTerminal(...args)
    expect(terminal.code, terminal.screen).toBe(2)
    const lines = terminal.screen.split("\n").filter((l) => l.trim() !== "")
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain(says)

    const piped = await cli(args)
    expect(piped.code).toBe(2)
    expect(piped.stdout).toBe("")
    expect(piped.stderr.trim().split("\n")).toEqual([lines[0]])
  })

  it("known words pass through to the command: a positional job config, flag values that look like commands", async () => {
    const help = await cli(["catalogs", "list", "--help"])
    expect(help.code).toBe(0)
    const missing = await cli(["run", "/nonexistent/job.json", "--dry-run"])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/^catalog-export: Cannot read job config \/nonexistent\/job\.json/)
    // `auto` as a flag's value is not taken for retention's subcommand.
    const value = await cli(["retention", "--catalog", "auto", "--keep-last", "x"])
    expect(value.stderr).not.toContain("unknown")
  })
})
