/**
 * The CLI on a Node line it does not support (package.json "engines": 22.16 or later, 24) says so and
 * what to do, before anything else runs, instead of failing later where the cause is not named.
 * test/support/node-version.mjs makes it see another version of Node.
 */
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
import { cli, ROOT } from "../support/cli.ts"

const asIf = (version: string) =>
  cli(["--version"], {
    env: {
      NODE_OPTIONS: `--import=${pathToFileURL(path.join(ROOT, "test", "support", "node-version.mjs")).href}`,
      NODE_VERSION_SEEN: version
    }
  })

describe("the Node lines the CLI runs on", () => {
  it.each(["20.20.2", "22.15.1", "23.11.0"])(
    "refuses Node %s with exit 1 and a sentence naming it and the fix",
    async (version) => {
      const { code, stderr, stdout } = await asIf(version)
      expect({ code, stdout }).toEqual({ code: 1, stdout: "" })
      expect(stderr).toBe(
        `catalog-export: Node.js ${version} is not supported; run it with Node.js 24 or 22 (22.16 or later).\n`
      )
    }
  )

  it.each(["22.16.0", "24.21.0"])("runs on Node %s", async (version) => {
    const { code, stderr, stdout } = await asIf(version)
    expect({ code, stderr, stdout }).toEqual({ code: 0, stderr: "", stdout: "0.1.0\n" })
  })
})
