import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import * as HereTile from "../../src/domain/HereTile.ts"
import { type Proxy, startProxy } from "../reliability/support.ts"
import { cli } from "../support/cli.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { expectedRows, latestVersion, listing, manifestOf, publish, readExport } from "../versions/support.ts"

/**
 * The interface document's own wording, through the real CLI: the forms it shows are accepted beside
 * the platform's (the `tile` scheme, string partition versions, a catalog or no body answering a
 * change), `--region` on the commands that move data, `partitions get`, plain `--help` when piped.
 * A proxy in front of the local service answers in the interface's form where the service answers
 * as the platform does.
 */

const { cleanup, tempDir } = cleanups()
let svc: TestService
let proxy: Proxy
let credentials: string

const via = (
  target: { lookupUrl: string }
) => ["--lookup-url", target.lookupUrl, "--credentials", credentials, "--log-format", "json"]
const catalogConfig = async (hrn: string) =>
  (await (await svc.get(`/config/v1/catalogs/${hrn}`)).json()) as Record<string, any>

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 20, versions: 3 } })
  proxy = await startProxy(svc.url)
  cleanup.push(() => proxy.close(), () => svc.close())
  credentials = await svc.credentialsFile()
})

describe("the interface's wording", () => {
  it("partitioning {scheme: tile} is HERE tile partitioning: tile columns in the export", async () => {
    const config = await catalogConfig(DEMO)
    const tiled = {
      id: "tiled",
      name: "Tiled",
      layerType: "versioned",
      contentType: "application/json",
      partitioning: { scheme: "tile", tileLevels: [12] }
    }
    const put = await svc.get(`/config/v1/catalogs/${DEMO}`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...config, layers: [...config.layers, tiled] })
    })
    expect(put.status, await put.text()).toBe(202)
    const ids = [HereTile.fromCoordinates(52.52, 13.405, 12), HereTile.fromCoordinates(48.137, 11.575, 12)]
    const version = await publish(
      svc,
      ids.map((id) => ({ partition: String(id), data: JSON.stringify({ id }) })),
      "tiled"
    )
    const layers = await cli(["layers", "list", "--catalog", DEMO, "--json", ...via(svc)])
    expect(
      layers.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).find((l) => l.id === "tiled")
        .partitioning
    ).toEqual({ scheme: "tile", tileLevels: [12] })

    const out = tempDir("interface-tile-")
    const result = await cli(["export", "--catalog", DEMO, "--layer", "tiled", "--out", out, ...via(svc)])
    expect(result.code, result.stderr).toBe(0)
    const rows = await withDuckDB((c) =>
      query(
        c,
        `SELECT partition, tile_level, tile_x, tile_y, tile_west, tile_north FROM read_parquet(${
          literal(path.join(out, "demo", "tiled", `version=${version}`, "*.parquet"))
        }) ORDER BY partition`
      )
    )
    expect(rows).toHaveLength(2)
    for (const row of rows) {
      const address = HereTile.toAddress(Number(row.partition))
      const box = HereTile.boundingBox(Number(row.partition))
      expect(row).toMatchObject({ tile_level: 12, tile_x: address.column, tile_y: address.row })
      expect(row.tile_west).toBeCloseTo(box.west, 9)
      expect(row.tile_north).toBeCloseTo(box.north, 9)
    }
  })

  it("a partition version given as a string decodes, in listings and in the query API", async () => {
    // The service answers numbers; the proxy turns every partition's version into a string.
    proxy.decide = (req) =>
      /\/(metadata|query)\/v1\/catalogs\/[^/]+\/layers\/[^/]+\/partitions\?/.test(req.url ?? "")
        ? {
          kind: "handle",
          handle: async (_request, forward) => {
            const answer = await forward()
            const body = answer.body.toString("utf8").replace(/"version":(-?\d+)/g, "\"version\":\"$1\"")
            expect(body).toContain("\"version\":\"")
            return { status: answer.status, body }
          }
        }
        : { kind: "forward" }
    try {
      const out = tempDir("interface-version-")
      const latest = await latestVersion(svc)
      const result = await cli([
        "export",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--out",
        out,
        "--parts",
        "1",
        ...via(proxy)
      ])
      expect(result.code, result.stderr).toBe(0)
      expect(await readExport(path.join(out, "demo", "places", `version=${latest}`))).toEqual(
        expectedRows(await listing(svc, "places", latest))
      )

      const wanted = (await listing(svc, "places", latest)).slice(0, 2)
      const got = await cli([
        "partitions",
        "get",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--partition",
        wanted.map((p) => p.partition).join(","),
        ...via(proxy)
      ])
      expect(got.code, got.stderr).toBe(0)
      const printed = got.stdout.trim().split("\n").map((l) => JSON.parse(l) as { partition: string; version: unknown })
      expect(printed.map((p) => [p.partition, p.version])).toEqual(wanted.map((p) => [p.partition, p.version]))
    } finally {
      proxy.decide = () => ({ kind: "forward" })
    }
  })

  it("POST /catalogs answering the Catalog object (the interface) or a status link (the platform): catalogs create handles both", async () => {
    const dir = tempDir("interface-create-")
    const body = (id: string) => {
      const file = path.join(dir, `${id}.json`)
      fs.writeFileSync(
        file,
        JSON.stringify({
          id,
          name: id,
          summary: "s",
          description: "d",
          layers: [{ id: "v", name: "V", layerType: "versioned", contentType: "application/json" }]
        })
      )
      return file
    }
    proxy.decide = (req) =>
      req.method === "POST" && req.url === "/config/v1/catalogs"
        ? {
          kind: "handle",
          handle: async (request, forward) => {
            const accepted = await forward()
            expect(accepted.status).toBe(202)
            const id = (JSON.parse(request.body.toString("utf8")) as { id: string }).id
            const catalog = await (await fetch(`${svc.url}/config/v1/catalogs/hrn:local:data:::${id}`, {
              headers: { authorization: request.headers.authorization! }
            })).text()
            return { status: 201, body: catalog }
          }
        }
        : { kind: "forward" }
    try {
      for (const wait of [[], ["--wait"]]) {
        const id = `interface-answer-${wait.length}`
        const created = await cli(["catalogs", "create", "--file", body(id), ...wait, ...via(proxy)])
        expect(created.code, created.stderr).toBe(0)
        expect(created.stdout.trim()).toBe(`Created hrn:local:data:::${id} with 1 layer.`)
        expect((await catalogConfig(`hrn:local:data:::${id}`)).layers.map((l: { id: string }) => l.id)).toEqual(["v"])
      }
    } finally {
      proxy.decide = () => ({ kind: "forward" })
    }
    const linked = await cli(["catalogs", "create", "--file", body("interface-link"), "--wait", ...via(proxy)])
    expect(linked.code, linked.stderr).toBe(0)
    expect(linked.stdout.trim()).toBe("Created hrn:local:data:::interface-link with 1 layer.")
  })

  it("PUT and DELETE automaticVersionDeletion answering 202 with no body: retention auto waits until the configuration shows it", async () => {
    const bare = (method: string, suffix: string) => (req: { method?: string | undefined; url?: string | undefined }) =>
      req.method === method && req.url === `/config/v1/catalogs/${DEMO}${suffix}`
    proxy.decide = (req) =>
      bare("PUT", "")(req) || bare("DELETE", "/automaticVersionDeletion")(req)
        ? {
          kind: "handle",
          handle: async (_request, forward) => {
            expect((await forward()).status).toBe(202)
            return { status: 202 }
          }
        }
        : { kind: "forward" }
    try {
      const on = await cli(["retention", "auto", "--catalog", DEMO, "--keep", "40", ...via(proxy)])
      expect(on.code, on.stderr).toBe(0)
      expect(on.stdout).toContain(`Automatic version deletion is on for ${DEMO}: each new version keeps the last 40`)
      expect((await catalogConfig(DEMO)).automaticVersionDeletion).toEqual({ numberOfVersionsToKeep: 40 })
      const off = await cli(["retention", "auto", "--catalog", DEMO, "--disable", ...via(proxy)])
      expect(off.code, off.stderr).toBe(0)
      expect((await catalogConfig(DEMO)).automaticVersionDeletion).toBeUndefined()
      const file = path.join(tempDir("interface-update-"), "catalog.json")
      fs.writeFileSync(file, JSON.stringify({ ...(await catalogConfig(DEMO)), summary: "updated through a bare 202" }))
      const update = await cli(["catalogs", "update", "--catalog", DEMO, "--file", file, "--wait", ...via(proxy)])
      expect(update.code, update.stderr).toBe(0)
      expect(update.stdout.trim()).toBe(`Update of ${DEMO} accepted (the service sent no status link to follow).`)
      expect((await catalogConfig(DEMO)).summary).toBe("updated through a bare 202")
    } finally {
      proxy.decide = () => ({ kind: "forward" })
    }
  })

  it("volatile partitions are served with version -1, as the platform lists them, and exported as listed", async () => {
    const partitions = await listing(svc, "traffic")
    expect(new Set(partitions.map((p) => p.version))).toEqual(new Set([-1]))
    const out = tempDir("interface-volatile-")
    const result = await cli(["export", "--catalog", DEMO, "--layer", "traffic", "--out", out, "--json", ...via(svc)])
    expect(result.code, result.stderr).toBe(0)
    expect(await readExport(String(JSON.parse(result.stdout).dir))).toEqual(expectedRows(partitions))
  })
})

describe("--region on the commands that move data", () => {
  it("export, backfill and run read a multi-region catalog from the region asked for", async () => {
    const hrn = "hrn:local:data:::interface-regions"
    const file = path.join(tempDir("interface-regions-"), "catalog.json")
    fs.writeFileSync(
      file,
      JSON.stringify({
        id: "interface-regions",
        name: "Regions",
        summary: "s",
        description: "d",
        replication: { regions: [{ id: "eu-ireland", role: "primary" }, { id: "us-oregon", role: "secondary" }] },
        layers: [{ id: "v", name: "V", layerType: "versioned", contentType: "application/json" }]
      })
    )
    expect((await cli(["catalogs", "create", "--file", file, "--wait", ...via(svc)])).code).toBe(0)
    const version = await publish(
      svc,
      [{ partition: "a", data: "{\"a\":1}" }, { partition: "b", data: "{\"b\":2}" }],
      "v",
      "application/json",
      hrn
    )
    const dir = tempDir("interface-regions-")
    const config = path.join(dir, "nightly.json")
    fs.writeFileSync(
      config,
      JSON.stringify({
        job: "nightly-export",
        out: path.join(dir, "run"),
        region: "us-oregon",
        layers: [{ catalog: hrn, layer: "v" }]
      })
    )
    const runs = {
      export: ["export", "--catalog", hrn, "--layer", "v", "--out", path.join(dir, "export"), "--region", "us-oregon"],
      backfill: [
        "backfill",
        "--catalog",
        hrn,
        "--layer",
        "v",
        "--from",
        String(version),
        "--to",
        String(version),
        "--out",
        path.join(dir, "backfill"),
        "--region",
        "us-oregon"
      ],
      run: ["run", config]
    }
    for (const [name, args] of Object.entries(runs)) {
      const from = proxy.log.length
      const result = await cli([...args, ...via(proxy)])
      expect(result.code, `${name}: ${result.stderr}`).toBe(0)
      const dataRequests = proxy.log.slice(from).filter((e) => /\/(metadata|blobstore)\/v1\//.test(e.path))
      expect(dataRequests.length, name).toBeGreaterThan(0)
      expect(dataRequests.filter((e) => !e.path.startsWith("/regions/us-oregon/")).map((e) => e.path), name).toEqual([])
      const exported = path.join(dir, name, "interface-regions", "v", `version=${version}`)
      expect(manifestOf(exported).partitions, name).toBe(2)
      expect((await readExport(exported)).map((r) => r.partition), name).toEqual(["a", "b"])
    }
    // Without it, the primary region's URLs (lookup without `region` hands out the primary's for a multi-region catalog).
    const from = proxy.log.length
    expect(
      (await cli(["export", "--catalog", hrn, "--layer", "v", "--out", path.join(dir, "primary"), ...via(proxy)])).code
    ).toBe(0)
    const primary = proxy.log.slice(from).filter((e) => /\/(metadata|blobstore)\/v1\//.test(e.path))
    expect(primary.length).toBeGreaterThan(0)
    expect(primary.filter((e) => !e.path.startsWith("/regions/eu-ireland/")).map((e) => e.path)).toEqual([])
    expect(
      manifestOf(path.join(dir, "primary", "interface-regions", "v", `version=${version}`)).regions.every((
        r: { region: string }
      ) => r.region === "eu-ireland")
    ).toBe(true)
  })
})

describe("partitions get", () => {
  it("reads partitions by id through the query API; ids that are not there exit 4 naming them", async () => {
    const latest = await latestVersion(svc)
    const all = await listing(svc, "places", latest)
    const wanted = [all[3]!, all[7]!]
    const from = proxy.log.length
    const got = await cli([
      "partitions",
      "get",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--partition",
      wanted[0]!.partition,
      "--partition",
      wanted[1]!.partition,
      ...via(proxy)
    ])
    expect(got.code, got.stderr).toBe(0)
    expect(got.stdout.trim().split("\n").map((l) => JSON.parse(l))).toEqual(
      wanted.map((p) => ({ ...p, layer: "places" }))
    )
    expect(proxy.log.slice(from).some((e) => e.path === `/query/v1/catalogs/${DEMO}/layers/places/partitions`)).toBe(
      true
    )

    const missing = await cli([
      "partitions",
      "get",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--partition",
      `${wanted[0]!.partition},no-such-partition`,
      ...via(svc)
    ])
    expect(missing.code).toBe(4)
    expect(JSON.parse(missing.stdout.trim()).partition).toBe(wanted[0]!.partition)
    expect(missing.stderr.trim()).toBe(
      `catalog-export: Layer 'places' of ${DEMO} has no partition 'no-such-partition' at version ${latest}; check the ids.`
    )
  })
})

describe("--help", () => {
  it("is plain text without colour codes when piped, and so are parse errors", async () => {
    for (const args of [["--help"], ["export", "--help"], ["partitions", "get", "--help"]]) {
      const help = await cli(args)
      expect(help.code).toBe(0)
      expect(help.stdout).toContain("catalog-export")
      expect(help.stdout).not.toMatch(/\x1b\[/)
    }
    const wrong = await cli(["export", "--format", "csv", "--catalog", DEMO, "--layer", "places", "--out", "/tmp/x"])
    expect(wrong.code).toBe(2)
    expect(wrong.stderr).toContain("--format")
    expect(wrong.stderr).not.toMatch(/\x1b\[/)
  })
})
