/**
 * The inspection commands through the real CLI against the local service: JSON output compared with
 * what the service answers over plain HTTP, human tables on a terminal (a pseudo-terminal from
 * util-linux `script`), and `--help` on every command.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BIN, cliFor } from "../support/cli.ts"
import { sha1 } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const run = promisify(execFile)

let svc: TestService
let credentials: string

const cli = (...args: Array<string>) => cliFor(svc, credentials)(...args)

/** Runs the CLI with a terminal as stdout, as a person would. */
const onTerminal = async (...args: Array<string>) => {
  const command = [process.execPath, BIN, ...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials].map((
    a
  ) => `'${a}'`).join(" ")
  const { stdout } = await run("script", ["-qec", command, "/dev/null"], { maxBuffer: 1 << 24 })
  return stdout.replace(/\r/g, "")
}

const http = async <A>(p: string): Promise<A> => (await (await svc.get(p)).json()) as A
const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l))

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 120, versions: 4 } })
  credentials = await svc.credentialsFile()
})
afterAll(() => svc.close())

describe.concurrent("inspection commands", () => {
  it("catalogs list and get", async () => {
    const list = await cli("catalogs", "list", "--json")
    expect(list.code).toBe(0)
    expect(lines(list.stdout).map((c) => c.hrn)).toEqual([DEMO])
    const get = await cli("catalogs", "get", "--catalog", DEMO, "--json")
    const direct = await http<{ layers: Array<{ id: string }> }>(`/config/v1/catalogs/${DEMO}`)
    expect(JSON.parse(get.stdout).layers.map((l: { id: string }) => l.id)).toEqual(direct.layers.map((l) => l.id))
    const table = await onTerminal("catalogs", "get", "--catalog", DEMO)
    expect(table).toMatch(/LAYER\s+TYPE\s+PARTITIONING/)
    expect(table).toMatch(/tiles\s+versioned\s+heretile\s+application\/geo\+json\s+gzip/)
  })

  it("layers list", async () => {
    const result = await cli("layers", "list", "--catalog", DEMO, "--json")
    expect(lines(result.stdout).map((l) => [l.id, l.layerType])).toEqual([
      ["tiles", "versioned"],
      ["roads", "versioned"],
      ["places", "versioned"],
      ["traffic", "volatile"],
      ["events", "stream"]
    ])
  })

  it("partitions list, at a version and per part", async () => {
    const direct = await http<{ partitions: Array<{ partition: string; dataHandle: string; checksum: string }> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=2&additionalFields=checksum`
    )
    const listed = await cli("partitions", "list", "--catalog", DEMO, "--layer", "places", "--version", "2")
    expect(listed.code).toBe(0)
    expect(lines(listed.stdout).map((p) => [p.partition, p.dataHandle, p.checksum])).toEqual(
      direct.partitions.map((p) => [p.partition, p.dataHandle, p.checksum])
    )
    const { parts } = await http<{ parts: Array<string> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions/parts?numRequestedParts=2`
    )
    const first = await cli(
      "partitions",
      "list",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "2",
      "--part",
      parts[0]!
    )
    const second = await cli(
      "partitions",
      "list",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "2",
      "--part",
      parts[1]!
    )
    expect([...lines(first.stdout), ...lines(second.stdout)].map((p) => p.partition)).toEqual(
      direct.partitions.map((p) => p.partition)
    )
    const bad = await cli("partitions", "list", "--catalog", DEMO, "--layer", "places", "--additional-fields", "colour")
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("colour")
  })

  it("versions latest, minimum and list", async () => {
    expect((await cli("versions", "latest", "--catalog", DEMO)).stdout.trim()).toBe("3")
    expect((await cli("versions", "minimum", "--catalog", DEMO)).stdout.trim()).toBe("0")
    const direct = await http<{ versions: Array<{ version: number; timestamp: number }> }>(
      `/metadata/v1/catalogs/${DEMO}/versions?startVersion=-1&endVersion=3`
    )
    const listed = await cli("versions", "list", "--catalog", DEMO, "--json")
    expect(lines(listed.stdout).map((v) => [v.version, v.timestamp])).toEqual(
      direct.versions.map((v) => [v.version, v.timestamp])
    )
    const table = await onTerminal("versions", "list", "--catalog", DEMO)
    expect(table).toContain(`VERSION  CREATED`)
    expect(table).toContain(new Date(direct.versions[0]!.timestamp).toISOString())
  })

  it("blob get to stdout and to a file", async () => {
    const [p] = (await http<{ partitions: Array<{ dataHandle: string; checksum: string }> }>(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=3&additionalFields=checksum`
    )).partitions
    const out = await cli("blob", "get", "--catalog", DEMO, "--layer", "places", "--data-handle", p!.dataHandle)
    expect(sha1(out.stdout)).toBe(p!.checksum)
    const file = path.join(svc.dir, "blob.bin")
    await cli("blob", "get", "--catalog", DEMO, "--layer", "places", "--data-handle", p!.dataHandle, "--output", file)
    expect(sha1(fs.readFileSync(file))).toBe(p!.checksum)
    const volatile = await cli(
      "blob",
      "get",
      "--catalog",
      DEMO,
      "--layer",
      "traffic",
      "--data-handle",
      "traffic-3-0",
      "--volatile"
    )
    expect(JSON.parse(volatile.stdout).segment).toBe("segment-3")
  })

  it("lookup", async () => {
    const result = await cli("lookup", "--catalog", DEMO, "--json")
    const direct = await http<Array<{ api: string; baseURL: string }>>(`/lookup/v1/resources/${DEMO}/apis`)
    expect(JSON.parse(result.stdout)).toEqual(direct)
    const table = await onTerminal("lookup", "--catalog", DEMO)
    expect(table).toMatch(/API\s+VERSION\s+BASE URL/)
    expect(table).toContain(`${svc.url}/metadata/v1/catalogs/${DEMO}`)
  })

  it("refuses a catalog the credentials cannot read, with exit code 4", async () => {
    const result = await cli("catalogs", "get", "--catalog", "hrn:local:data:::restricted")
    expect(result.code).toBe(4)
    expect(result.stderr).toContain("hrn:local:data:::restricted")
  })

  it("has --help on every command", async () => {
    const commands = [
      ["catalogs", "list"],
      ["catalogs", "get"],
      ["layers", "list"],
      ["partitions", "list"],
      ["versions", "latest"],
      ["versions", "minimum"],
      ["versions", "list"],
      ["blob", "get"],
      ["lookup"],
      ["export"],
      ["serve"],
      ["run"]
    ]
    await Promise.all(commands.map(async (command) => {
      const { stdout } = await run(process.execPath, [BIN, ...command, "--help"])
      expect(stdout, command.join(" ")).toContain("USAGE")
      expect(stdout, command.join(" ")).toContain("EXIT CODES")
    }))
  })
})
