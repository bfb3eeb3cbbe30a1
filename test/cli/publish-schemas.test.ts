/**
 * `schemas publish|get|list` and `publish` through the real CLI against the local service, checked
 * over plain HTTP: what was published is what the service serves, and bad input changes nothing.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildBundle } from "../../src/decode/Bundle.ts"
import { cliFor } from "../support/cli.ts"
import { sha1 } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const SCHEMA = "hrn:local:schema:::com.example.cli:thing_v1:1.0.0"
const DEMO_SCHEMA = "hrn:local:schema:::com.here.catalogexport.demo:road-tile_v1:1.0.0"

let svc: TestService
let credentials: string

const cli = (...args: Array<string>) => cliFor(svc, credentials)(...args)

const http = async <A>(p: string): Promise<A> => (await (await svc.get(p)).json()) as A
const latest = async () => (await http<{ version: number }>(`/metadata/v1/catalogs/${DEMO}/versions/latest`)).version

interface Entry {
  partition: string
  dataHandle: string
  dataSize?: number
  checksum?: string
  compressedDataSize?: number
  version: number
}
const partitions = async (layer: string, query: string) =>
  (await http<{ partitions: Array<Entry> }>(
    `/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?${query}&additionalFields=dataSize,checksum,compressedDataSize`
  )).partitions

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 50, versions: 2 } })
  credentials = await svc.credentialsFile()
})
afterAll(() => svc.close())

describe("schemas", () => {
  const bundle = buildBundle({
    protoFiles: {
      "com/example/thing.proto":
        `syntax = "proto3";\npackage com.example;\nmessage Thing { string name = 1; repeated uint64 ids = 2; }\n`
    },
    mainMessage: "com.example.Thing"
  })

  it("publishes a bundle, then gets and lists the schema, and downloads the bundle again", async () => {
    const file = path.join(svc.dir, "thing.zip")
    fs.writeFileSync(file, bundle)
    const published = await cli(
      "schemas",
      "publish",
      "--file",
      file,
      "--schema",
      SCHEMA,
      "--name",
      "Thing",
      "--summary",
      "Things"
    )
    expect(published.stderr).toBe("")
    expect(published.code).toBe(0)
    expect(published.stdout).toContain(
      `Published ${SCHEMA} (main message com.example.Thing); its bundle is hrn:local:artifact:::com.example.cli:thing_v1_ds:1.0.0/thing_v1_ds-1.0.0.zip.`
    )

    const out = path.join(svc.dir, "downloaded", "thing.zip")
    const got = await cli("schemas", "get", "--schema", SCHEMA, "--json", "--bundle-out", out)
    expect(got.code).toBe(0)
    const details = JSON.parse(got.stdout)
    expect(details).toEqual(await http(`/artifact/v1/schema/${SCHEMA}`))
    expect(details.schema).toMatchObject({ hrn: SCHEMA, name: "Thing", summary: "Things" })
    expect(details.variants).toEqual([{
      id: "ds",
      url: "artifact/hrn:local:artifact:::com.example.cli:thing_v1_ds:1.0.0/thing_v1_ds-1.0.0.zip"
    }])
    expect(new Uint8Array(fs.readFileSync(out))).toEqual(bundle)

    const listed = await cli("schemas", "list", "--json")
    expect(listed.stdout.trim().split("\n").map((l) => JSON.parse(l).hrn)).toEqual([SCHEMA, DEMO_SCHEMA])
    // Publishing the same bundle again is a no-op.
    expect(
      (await cli("schemas", "publish", "--file", file, "--schema", SCHEMA, "--name", "Thing", "--summary", "Things"))
        .code
    ).toBe(0)
  })

  it("refuses what is not a schema bundle before uploading anything", async () => {
    const file = path.join(svc.dir, "not-a-bundle.zip")
    fs.writeFileSync(file, "hello")
    const other = "hrn:local:schema:::com.example.cli:other_v1:1.0.0"
    const bad = await cli("schemas", "publish", "--file", file, "--schema", other)
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(
      /--file .*not-a-bundle\.zip is not a usable schema bundle: .* is not a ZIP file.*Nothing was uploaded\./
    )
    expect((await svc.get(`/artifact/v1/schema/${other}`)).status).toBe(404)
    const badHrn = await cli("schemas", "publish", "--file", file, "--schema", "hrn:local:data:::demo")
    expect(badHrn.code).toBe(2)
    expect(badHrn.stderr).toMatch(/--schema: Invalid HRN/)
    const missing = await cli("schemas", "get", "--schema", "hrn:local:schema:::com.example.cli:nope:1.0.0")
    expect(missing.code).toBe(4)
    expect(missing.stderr).toMatch(/Schema hrn:local:schema:::com.example.cli:nope:1.0.0: not found/)
  })

  it("serves the demo layer's schema", async () => {
    const got = await cli("schemas", "get", "--schema", DEMO_SCHEMA)
    expect(got.code).toBe(0)
    expect(got.stdout).toContain(
      "variant ds: artifact/hrn:local:artifact:::com.here.catalogexport.demo:road-tile_v1_ds:1.0.0/road-tile_v1_ds-1.0.0.zip"
    )
  })
})

describe("publish", () => {
  it("publishes files as one new catalog version, blobs and metadata as the service reports them", async () => {
    const a = path.join(svc.dir, "a.json")
    const b = path.join(svc.dir, "b.json")
    fs.writeFileSync(a, `{"name":"a"}`)
    fs.writeFileSync(b, `{"name":"b","more":true}`)
    const before = await latest()
    const result = await cli(
      "publish",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--partition",
      `new-a=${a}`,
      "--partition",
      `new-b=${b}`
    )
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(result.stdout).toContain(`as catalog version ${before + 1}.`)
    expect(await latest()).toBe(before + 1)
    const listed = (await partitions("places", `version=${before + 1}`)).filter((p) => p.partition.startsWith("new-"))
    expect(listed.map((p) => [p.partition, p.version, p.dataSize, p.checksum])).toEqual([
      ["new-a", before + 1, 12, sha1(`{"name":"a"}`)],
      ["new-b", before + 1, 24, sha1(`{"name":"b","more":true}`)]
    ])
    const blob = await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/${listed[0]!.dataHandle}`)
    expect(await blob.text()).toBe(`{"name":"a"}`)
    // Not there at the version before.
    expect((await partitions("places", `version=${before}`)).some((p) => p.partition.startsWith("new-"))).toBe(false)
  })

  it("publishes a directory: file names are partition ids; gzip layers get compressed blobs", async () => {
    const dir = path.join(svc.dir, "tiles")
    fs.mkdirSync(dir)
    const tile = JSON.stringify({ type: "FeatureCollection", features: [] })
    for (const id of ["23618402", "23618403"]) fs.writeFileSync(path.join(dir, id), tile)
    fs.writeFileSync(path.join(dir, ".hidden"), "ignored")
    fs.mkdirSync(path.join(dir, "subdir"))
    const before = await latest()
    const result = await cli("publish", "--catalog", DEMO, "--layer", "tiles", "--from-dir", dir, "--concurrency", "2")
    expect(result.code).toBe(0)
    const listed = (await partitions("tiles", `version=${before + 1}`)).filter((p) => p.version === before + 1)
    expect(listed.map((p) => p.partition)).toEqual(["23618402", "23618403"])
    expect(listed[0]).toMatchObject({ dataSize: tile.length, checksum: sha1(tile) })
    expect(listed[0]!.compressedDataSize).toBeGreaterThan(0)
    const raw = await rawBlob("tiles", listed[0]!.dataHandle)
    expect(new TextDecoder().decode(gunzipSync(raw))).toBe(tile)
  })

  it("publishes into a volatile layer (overwriting, no new version)", async () => {
    const file = path.join(svc.dir, "speed.json")
    fs.writeFileSync(file, `{"segment":"segment-7","speedKmh":3}`)
    const before = await latest()
    const result = await cli("publish", "--catalog", DEMO, "--layer", "traffic", "--partition", `segment-0007=${file}`)
    expect(result.code).toBe(0)
    expect(result.stdout).toContain("to the volatile layer traffic")
    expect(await latest()).toBe(before)
    const [p] = (await http<{ partitions: Array<Entry> }>(
      `/query/v1/catalogs/${DEMO}/layers/traffic/partitions?partition=segment-0007`
    )).partitions
    expect(await (await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/traffic/data/${p!.dataHandle}`)).text()).toBe(
      `{"segment":"segment-7","speedKmh":3}`
    )
  })

  it("refuses bad input with exit code 2 and publishes nothing", async () => {
    const file = path.join(svc.dir, "ok.json")
    fs.writeFileSync(file, "{}")
    const before = await latest()
    const cases: Array<[Array<string>, RegExp]> = [
      [["--layer", "places"], /Nothing to publish/],
      [["--layer", "places", "--partition", "no-file"], /--partition takes ID=FILE/],
      [["--layer", "places", "--partition", `bad/id=${file}`], /'bad\/id' is not a valid partition id/],
      [["--layer", "places", "--partition", `x=${file}.missing`], /does not exist/],
      [["--layer", "places", "--partition", `x=${file}`, "--partition", `x=${file}`], /given twice/],
      [["--layer", "events", "--partition", `x=${file}`], /stream layer/],
      [["--layer", "nope", "--partition", `x=${file}`], /has no layer 'nope'/],
      [["--layer", "places", "--partition", `x=${file}`, "--concurrency", "0"], /--concurrency must be 1-256/]
    ]
    for (const [args, message] of cases) {
      const result = await cli("publish", "--catalog", DEMO, ...args)
      expect(result.code, args.join(" ")).toBe(2)
      expect(result.stderr).toMatch(message)
    }
    expect(await latest()).toBe(before)
    const missing = await cli(
      "publish",
      "--catalog",
      "hrn:local:data:::nope",
      "--layer",
      "places",
      "--partition",
      `x=${file}`
    )
    expect(missing.code).toBe(4)
  })
})

/** The stored bytes of a blob, without any decompression on the way. */
const rawBlob = async (layer: string, handle: string) => {
  const http = await import("node:http")
  const token = await svc.token()
  return new Promise<Uint8Array>((resolve, reject) => {
    http.get(`${svc.url}/blobstore/v1/catalogs/${DEMO}/layers/${layer}/data/${handle}`, {
      headers: { authorization: `Bearer ${token}` }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve(new Uint8Array(Buffer.concat(chunks))))
    }).on("error", reject)
  })
}
