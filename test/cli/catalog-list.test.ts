import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { beforeAll, describe, expect, it } from "vitest"
import { PARTIAL_LIST_SECONDS } from "../../src/client/ConfigApi.ts"
import { type Proxy, sleep, startProxy } from "../reliability/support.ts"
import { cli, ROOT } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

/**
 * The interface: a catalog list whose generation takes over 50 seconds may be partial. A list that
 * took that long is printed with a warning saying so. The CLI's clock is made to jump past that while
 * the proxy holds the answer (test/support/clock-jump.mjs): the CLI measures the wait as it would a
 * real one, and the test does not spend 50 s waiting.
 */

const { cleanup } = cleanups()
let svc: TestService
let proxy: Proxy

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 5, versions: 1 } })
  proxy = await startProxy(svc.url)
  cleanup.push(() => proxy.close(), () => svc.close())
})

describe("catalogs list", () => {
  it(`warns that a list which took over ${PARTIAL_LIST_SECONDS} s to arrive may be partial`, async () => {
    const flags = [
      "--lookup-url",
      proxy.lookupUrl,
      "--credentials",
      await svc.credentialsFile(),
      "--json",
      "--log-format",
      "json"
    ]
    // The quick run has the clock jump loaded too: only the held answer jumps it.
    let child: ChildProcess | undefined
    const options = {
      env: {
        NODE_OPTIONS: `--import ${pathToFileURL(path.join(ROOT, "test", "support", "clock-jump.mjs")).href}`,
        CLOCK_JUMP_SECONDS: String(PARTIAL_LIST_SECONDS + 1)
      },
      onSpawn: (c: ChildProcess) => (child = c)
    }
    const quick = await cli(["catalogs", "list", ...flags], options)
    expect(quick.code, quick.stderr).toBe(0)
    expect(quick.stderr).toBe("")

    proxy.decide = (req) =>
      req.method === "GET" && req.url?.startsWith("/config/v1/catalogs") && !req.url.startsWith("/config/v1/catalogs/")
        ? {
          kind: "handle",
          handle: async (_request, forward) => {
            const answer = await forward()
            // The CLI's clock jumps while it waits for this answer (its signal handler runs well within the second).
            child!.kill("SIGUSR2")
            await sleep(1000)
            return { status: answer.status, body: answer.body.toString("utf8") }
          }
        }
        : { kind: "forward" }
    const slow = await cli(["catalogs", "list", ...flags], options)
    expect(slow.code, slow.stderr).toBe(0)
    expect(slow.stdout.trim().split("\n").map((l) => (JSON.parse(l) as { hrn: string }).hrn)).toContain(DEMO)
    const warnings = slow.stderr.trim().split("\n").map((l) => JSON.parse(l) as { logLevel: string; message: string })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]!.logLevel).toBe("WARN")
    expect(warnings[0]!.message).toMatch(
      /^The catalog list took 5\d s to arrive; the config API may return a partial list when generating it takes over 50 s, so catalogs may be missing from it\./
    )
  })
})
