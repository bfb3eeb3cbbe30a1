import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as HashSet from "effect/HashSet"
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { commandModules, commandsFor, namesOf as moduleNames, type TopLevelCommand } from "../../src/cli/commands.ts"
import { TOOL } from "../../src/domain/Tool.ts"
import { BIN, cli } from "../support/cli.ts"

/**
 * main.ts loads only the module of the command the arguments name (start-up time); the registry in
 * src/cli/commands.ts says which module defines which command, and what the top-level help says of
 * each (one line per command, no module loaded). These tests keep the two in step and check what
 * each kind of argument list loads.
 */

const namesOf = (commands: ReadonlyArray<TopLevelCommand>) =>
  commands.map((command) => [...HashSet.values(Command.getNames(command))].join("|"))

const allNames = commandModules.flatMap(moduleNames)

describe("the command registry", () => {
  it("names exactly the commands each module defines, in order", async () => {
    for (const module of commandModules) {
      expect(namesOf(await module.load())).toEqual(moduleNames(module))
    }
    expect(new Set(allNames).size).toBe(allNames.length)
  })

  it("loads the named command's module, none for --version, all of them otherwise", async () => {
    expect(namesOf(await commandsFor(["export", "--dry-run"]))).toEqual(["export"])
    expect(namesOf(await commandsFor(["commit", "--plan", "x"]))).toEqual(["plan", "commit"])
    expect(namesOf(await commandsFor(["lookup"]))).toEqual(
      moduleNames(commandModules.find((m) => moduleNames(m).includes("lookup"))!)
    )
    expect(await commandsFor(["--version"])).toEqual([])
    for (const args of [[], ["--help"], ["-h"], ["exprot"], ["--completions", "bash"], ["--version", "export"]]) {
      expect(namesOf(await commandsFor(args))).toEqual(allNames)
    }
    // The top-level help lists the commands as their summaries say, loading none of their modules.
    for (const args of [[], ["--help"], ["-h"]]) {
      const listed = await commandsFor(args)
      const config = CliConfig.make({ showBuiltIns: false })
      const plain = (command: TopLevelCommand) =>
        HelpDoc.toAnsiText(Command.getHelp(command, config)).replace(/\x1b\[[0-9;]*m/g, "").trim()
      expect(listed.map(plain))
        .toEqual(commandModules.flatMap((m) => Object.values(m.commands)).map((summary) => `DESCRIPTION\n\n${summary}`))
    }
  })

  it("through the CLI: --version, help listing every command, a mistyped command", async () => {
    const version = await cli(["--version"])
    expect(version.code).toBe(0)
    expect(version.stdout.trim()).toBe(TOOL.version)

    const help = await cli(["--help"])
    expect(help.code).toBe(0)
    const listed = allNames.map((name) => help.stdout.search(new RegExp(`^${name}  `, "m")))
    expect(listed.every((at) => at >= 0), help.stdout).toBe(true)
    expect(listed).toEqual([...listed].sort((a, b) => a - b))
    // One line per command, with its summary and no flags (those are under `<command> --help`).
    const lines = help.stdout.split("\n").filter((l) => /^[a-z]+ {2,}/.test(l))
    expect(lines).toHaveLength(allNames.length)
    const summaries = Object.fromEntries(commandModules.flatMap((m) => Object.entries(m.commands)))
    for (const line of lines) {
      const [, name, summary] = /^(\S+) {2,}(.+)$/.exec(line)!
      expect(summary, line).toBe(summaries[name!])
      expect(line, line).not.toMatch(/--|\[/)
      expect(line.length, line).toBeLessThanOrEqual(100)
    }

    // Start-up loads no Node module that no command uses (NodeContext.layer's command executor: node:child_process).
    const { stderr } = spawnSync(process.execPath, [
      "--import",
      "data:text/javascript,process.on('exit',()=>console.error(JSON.stringify(process.moduleLoadList)))",
      BIN,
      "--version"
    ], { encoding: "utf8" })
    const loaded = JSON.parse(stderr.trim().split("\n").at(-1)!) as Array<string>
    expect(loaded).toContain("NativeModule fs")
    expect(loaded).not.toContain("NativeModule child_process")

    const typo = await cli(["exprot"])
    expect(typo.code).toBe(2)
    expect(typo.stderr + typo.stdout).toMatch(/export/)
  })
})
