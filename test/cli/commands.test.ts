import * as Command from "@effect/cli/Command"
import * as HashSet from "effect/HashSet"
import { describe, expect, it } from "vitest"
import { commandModules, commandsFor, type TopLevelCommand } from "../../src/cli/commands.ts"
import { TOOL } from "../../src/domain/Tool.ts"
import { cli } from "../support/cli.ts"

/**
 * main.ts loads only the module of the command the arguments name (start-up time); the registry in
 * src/cli/commands.ts says which module defines which command. These tests keep the two in step and
 * check what each kind of argument list loads.
 */

const namesOf = (commands: ReadonlyArray<TopLevelCommand>) =>
  commands.map((command) => [...HashSet.values(Command.getNames(command))].join("|"))

const allNames = commandModules.flatMap((m) => m.names)

describe("the command registry", () => {
  it("names exactly the commands each module defines, in order", async () => {
    for (const module of commandModules) {
      expect(namesOf(await module.load())).toEqual(module.names)
    }
    expect(new Set(allNames).size).toBe(allNames.length)
  })

  it("loads the named command's module, none for --version, all of them otherwise", async () => {
    expect(namesOf(await commandsFor(["export", "--dry-run"]))).toEqual(["export"])
    expect(namesOf(await commandsFor(["commit", "--plan", "x"]))).toEqual(["plan", "commit"])
    expect(namesOf(await commandsFor(["lookup"]))).toEqual(
      commandModules.find((m) => m.names.includes("lookup"))!.names
    )
    expect(await commandsFor(["--version"])).toEqual([])
    for (const args of [[], ["--help"], ["exprot"], ["--completions", "bash"], ["--version", "export"]]) {
      expect(namesOf(await commandsFor(args))).toEqual(allNames)
    }
  })

  it("through the CLI: --version, help listing every command, a mistyped command", async () => {
    const version = await cli(["--version"])
    expect(version.code).toBe(0)
    expect(version.stdout.trim()).toBe(TOOL.version)

    const help = await cli(["--help"])
    expect(help.code).toBe(0)
    const listed = allNames.map((name) => help.stdout.search(new RegExp(`^  - ${name} `, "m")))
    expect(listed.every((at) => at >= 0), help.stdout).toBe(true)
    expect(listed).toEqual([...listed].sort((a, b) => a - b))

    const typo = await cli(["exprot"])
    expect(typo.code).toBe(2)
    expect(typo.stderr + typo.stdout).toMatch(/export/)
  })
})
