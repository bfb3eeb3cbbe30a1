import { beforeAll, describe, expect, it } from "vitest"
import { PARTIAL_LIST_SECONDS } from "../../src/client/ConfigApi.ts"
import { type Proxy, startProxy } from "../reliability/support.ts"
import { cli } from "../support/cli.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

/**
 * The interface: a catalog list whose generation takes over 50 seconds may be partial. A list that
 * took that long is printed with a warning saying so. (This test waits that long, on purpose.)
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
    const quick = await cli(["catalogs", "list", ...flags])
    expect(quick.code, quick.stderr).toBe(0)
    expect(quick.stderr).toBe("")

    proxy.decide = (req) =>
      req.method === "GET" && req.url?.startsWith("/config/v1/catalogs") && !req.url.startsWith("/config/v1/catalogs/")
        ? {
          kind: "handle",
          handle: async (_request, forward) => {
            const answer = await forward()
            await new Promise((r) => setTimeout(r, (PARTIAL_LIST_SECONDS + 1) * 1000))
            return { status: answer.status, body: answer.body.toString("utf8") }
          }
        }
        : { kind: "forward" }
    const slow = await cli(["catalogs", "list", ...flags])
    expect(slow.code, slow.stderr).toBe(0)
    expect(slow.stdout.trim().split("\n").map((l) => (JSON.parse(l) as { hrn: string }).hrn)).toContain(DEMO)
    const warnings = slow.stderr.trim().split("\n").map((l) => JSON.parse(l) as { logLevel: string; message: string })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]!.logLevel).toBe("WARN")
    expect(warnings[0]!.message).toMatch(
      /^The catalog list took 5\d s to arrive; the config API may return a partial list when generating it takes over 50 s, so catalogs may be missing from it\./
    )
  }, 120_000)
})
