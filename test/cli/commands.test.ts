import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as HashSet from "effect/HashSet"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { commandModules, commandsFor, namesOf as moduleNames, type TopLevelCommand } from "../../src/cli/commands.ts"
import { TOOL } from "../../src/domain/Tool.ts"
import { BIN, cli } from "../support/cli.ts"

/**
 * main.ts loads only the module of the command the arguments name (start-up time); the registry in
 * src/cli/commands.ts says which module defines which command, and what the top-level help says of
 * each (one line per command, no module loaded). These tests keep the two in step, check what each
 * kind of argument list loads, and that a start loads no Node module that no command uses.
 */

const run = promisify(execFile)

const namesOf = (commands: ReadonlyArray<TopLevelCommand>) =>
  commands.map((command) => [...HashSet.values(Command.getNames(command))].join("|"))

const allNames = commandModules.flatMap(moduleNames)

/** The Node modules a run of the CLI loaded (process.moduleLoadList at its exit). */
const modulesLoaded = async (args: ReadonlyArray<string>) => {
  const { stderr } = await run(process.execPath, [
    "--import",
    "data:text/javascript,process.on('exit',()=>console.error(JSON.stringify(process.moduleLoadList)))",
    BIN,
    ...args
  ], { encoding: "utf8" }).catch((failed: { stderr: string }) => failed)
  return JSON.parse(stderr.trim().split("\n").at(-1)!) as Array<string>
}

describe("start-up", () => {
  it("loads no Node module that no command uses: node:child_process, node:http2", async () => {
    const version = await modulesLoaded(["--version"])
    expect(version).toContain("NativeModule fs")
    expect(version).not.toContain("NativeModule child_process")
    // An export that reaches a service (which refuses its credentials): undici ran, without its HTTP/2 client.
    const requests: Array<string> = []
    const service = http.createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`)
      res.writeHead(401, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: "invalid_client", error_description: "unknown client" }))
    })
    await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(service.address() as AddressInfo).port}`
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "start-up-"))
    try {
      const credentials = path.join(dir, "credentials.properties")
      fs.writeFileSync(
        credentials,
        `here.user.id = u\nhere.client.id = c\nhere.access.key.id = k\nhere.access.key.secret = s\nhere.token.endpoint.url = ${url}/oauth2/token\n`
      )
      const exporting = await modulesLoaded([
        "export",
        "--dry-run",
        "--catalog",
        "hrn:here:data::org:catalog",
        "--layer",
        "layer",
        "--out",
        path.join(dir, "out"),
        "--lookup-url",
        `${url}/lookup/v1`,
        "--credentials",
        credentials
      ])
      expect(requests[0]).toBe("POST /oauth2/token")
      expect(exporting).toContain("NativeModule net")
      expect(exporting).not.toContain("NativeModule http2")
      expect(exporting).not.toContain("NativeModule child_process")
    } finally {
      service.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

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

    const typo = await cli(["exprot"])
    expect(typo.code).toBe(2)
    expect(typo.stderr + typo.stdout).toMatch(/export/)
  })
})
