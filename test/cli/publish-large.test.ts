/**
 * `publish` of large files through the real CLI against the local service: multipart uploads from
 * 50 MB on (one PUT below), every byte read back through the project's client and the official HERE
 * SDK; a publish killed in the middle of a multipart upload leaves nothing visible and the next run
 * finishes; a retried request that meets its own upload (409) counts it, one that meets someone
 * else's blob exits 6 naming the handle; a service taking smaller bodies gets the blob in parts.
 * An interceptor in front of the service (test/support/interceptor.ts) sees every request, loses
 * answers and plants blobs where a test needs it.
 */
import "@here/olp-sdk-fetch"
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings } from "@here/olp-sdk-core"
import { DataRequest, PartitionsRequest, VersionedLayerClient } from "@here/olp-sdk-dataservice-read"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ChildProcess } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BlobApi } from "../../src/client/BlobApi.ts"
import { PART_BYTES, SINGLE_PUT_LIMIT } from "../../src/client/BlobUpload.ts"
import { cli, type CliResult } from "../support/cli.ts"
import { provideClient } from "../support/client.ts"
import { intercept, type Interceptor } from "../support/interceptor.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const MB = 1_000_000

interface Entry {
  readonly partition: string
  readonly version: number
  readonly dataHandle: string
  readonly dataSize?: number
  readonly checksum?: string
  readonly compressedDataSize?: number
}

/** Writes `bytes` random bytes in 8 MB pieces (never the whole file in memory) and returns its SHA-1. */
const randomFile = (file: string, bytes: number) => {
  const hash = createHash("sha1")
  const fd = fs.openSync(file, "w")
  for (let left = bytes; left > 0;) {
    const piece = randomBytes(Math.min(left, 8 * MB))
    hash.update(piece)
    fs.writeSync(fd, piece)
    left -= piece.length
  }
  fs.closeSync(fd)
  return hash.digest("hex")
}

const sha1 = (bytes: Uint8Array) => createHash("sha1").update(bytes).digest("hex")

let svc: TestService
let credentials: string
let data: string
let files: Record<"mb80" | "mb60" | "mb49" | "small", { path: string; sha1: string; bytes: number }>
const proxies: Array<Interceptor> = []

beforeAll(async () => {
  data = fs.mkdtempSync(path.join(os.tmpdir(), "publish-large-"))
  svc = await startService({ seed: { partitions: 10, versions: 1 }, dataDir: path.join(data, "service") })
  credentials = await svc.credentialsFile()
  const make = (name: string, bytes: number) => {
    const file = path.join(data, name)
    return { path: file, sha1: randomFile(file, bytes), bytes }
  }
  files = {
    mb80: make("80mb.bin", 80 * MB),
    mb60: make("60mb.bin", 60 * MB),
    mb49: make("49mb.bin", 49 * MB),
    small: make("small.bin", 1000)
  }
}, 120_000)
afterAll(async () => {
  for (const proxy of proxies) await proxy.close()
  await svc?.close()
  fs.rmSync(data, { recursive: true, force: true })
})

/** `publish` into a layer of the demo catalog through an interceptor (plain forwarding unless `hook`). */
const publish = async (
  layer: string,
  partitions: Record<string, string>,
  hook: Parameters<typeof intercept>[1] = () => "forward",
  onSpawn?: (child: ChildProcess) => void
): Promise<CliResult & { seen: ReadonlyArray<string> }> => {
  const proxy = await intercept(svc, hook)
  proxies.push(proxy)
  const result = await cli([
    "publish",
    "--catalog",
    DEMO,
    "--layer",
    layer,
    ...Object.entries(partitions).flatMap(([id, file]) => ["--partition", `${id}=${file}`]),
    "--lookup-url",
    proxy.lookupUrl,
    "--credentials",
    credentials,
    "--log-format",
    "json"
  ], { timeoutMs: 300_000, ...(onSpawn === undefined ? {} : { onSpawn }) })
  return { ...result, seen: [...proxy.seen] }
}

const latest = async () =>
  ((await (await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)).json()) as {
    version: number
  }).version

const listed = async (layer: string, version: number) =>
  ((await (await svc.get(
    `/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?version=${version}&additionalFields=dataSize,checksum,compressedDataSize`
  )).json()) as { partitions: Array<Entry> }).partitions.filter((p) => p.version === version)

const blobStatus = async (layer: string, handle: string) =>
  (await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/${layer}/data/${handle}`, { method: "HEAD" })).status

/** The blob as the project's client streams it, hashed on the way. */
const sha1ByClient = (layer: string, handle: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const blobs = yield* BlobApi
      const hash = yield* Stream.runFold(
        blobs.getStream(DEMO, layer, handle),
        createHash("sha1"),
        (h, chunk) => h.update(chunk)
      )
      return hash.digest("hex")
    }).pipe(provideClient(svc))
  )

const sdkClient = async (layer: string, version: number) => {
  const userAuth = new UserAuth({
    credentials: loadCredentialsFromFile(credentials),
    customUrl: svc.tokenUrl,
    tokenRequester: requestToken
  })
  const settings = new OlpClientSettings({ environment: svc.lookupUrl, getToken: () => userAuth.getToken() })
  return new VersionedLayerClient({ catalogHrn: HRN.fromString(DEMO), layerId: layer, settings, version })
}

const count = (seen: ReadonlyArray<string>, pattern: RegExp) => seen.filter((r) => pattern.test(r)).length
const handleIn = (request: string) => /\/data\/([^/?]+)/.exec(request)![1]!

const uploadsLeft = () =>
  fs.readdirSync(path.join(data, "service", "uploads"), { withFileTypes: true }).filter((e) => e.isDirectory())

describe("publish of large files", () => {
  it("uploads 80 MB and 60 MB in parts and 49 MB in one PUT; our client and the HERE SDK read every byte back", async () => {
    const before = await latest()
    const result = await publish("places", {
      big80: files.mb80.path,
      big60: files.mb60.path,
      big49: files.mb49.path,
      small: files.small.path
    })
    expect(result.stderr).toBe("")
    expect(result.code).toBe(0)
    expect(await latest()).toBe(before + 1)
    // Above SINGLE_PUT_LIMIT in parts of PART_BYTES, below it in one PUT.
    expect(SINGLE_PUT_LIMIT).toBe(50 * MB)
    expect(count(result.seen, /^POST .*\/multiparts$/)).toBe(2)
    expect(count(result.seen, /^POST .*\/parts\?partNumber=\d+$/)).toBe(
      Math.ceil(80 * MB / PART_BYTES) + Math.ceil(60 * MB / PART_BYTES)
    )
    expect(count(result.seen, /^PUT .*\/data\/[^/]+$/)).toBe(2)

    const entries = await listed("places", before + 1)
    const sdk = await sdkClient("places", before + 1)
    const viaSdk = new Map(
      (await sdk.getPartitions(new PartitionsRequest())).partitions.map((p) => [p.partition, p])
    )
    for (
      const [id, file] of [["big80", files.mb80], ["big60", files.mb60], ["big49", files.mb49], [
        "small",
        files.small
      ]] as const
    ) {
      const entry = entries.find((e) => e.partition === id)!
      expect(entry, id).toMatchObject({ dataSize: file.bytes, checksum: file.sha1 })
      expect(await sha1ByClient("places", entry.dataHandle), id).toBe(file.sha1)
      expect(viaSdk.get(id)!.dataHandle).toBe(entry.dataHandle)
      const read = await sdk.getData(new DataRequest().withPartitionId(id))
      expect(sha1(new Uint8Array(await read.arrayBuffer())), id).toBe(file.sha1)
    }
    // The parts went into the blob store; nothing is left on the way.
    expect(uploadsLeft()).toEqual([])
  })

  it("compresses a file for a gzip layer to a temporary file and uploads that in parts", async () => {
    const before = await latest()
    const result = await publish("tiles", { "23618402": files.mb60.path })
    expect(result.code, result.stderr).toBe(0)
    expect(count(result.seen, /^POST .*\/multiparts$/)).toBe(1)
    const [entry] = await listed("tiles", before + 1)
    expect(entry).toMatchObject({ partition: "23618402", dataSize: 60 * MB, checksum: files.mb60.sha1 })
    expect(entry!.compressedDataSize).toBeGreaterThan(SINGLE_PUT_LIMIT)
    const raw = new Uint8Array(
      await (await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/tiles/data/${entry!.dataHandle}`, {
        headers: { "accept-encoding": "identity" }
      })).arrayBuffer()
    )
    const stored = raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw
    expect(sha1(stored)).toBe(files.mb60.sha1)
  })

  it("killed during a multipart upload leaves nothing visible; the next run publishes everything", async () => {
    const before = await latest()
    let child: ChildProcess | undefined
    let parts = 0
    const killed = await publish("places", { big80: files.mb80.path, small: files.small.path }, (request) => {
      if (/\/parts\?partNumber=/.test(request.url!) && ++parts === 3) child!.kill("SIGKILL")
      return "forward"
    }, (c) => (child = c))
    expect(killed.signal).toBe("SIGKILL")
    expect(await latest()).toBe(before)
    const abandoned = handleIn(killed.seen.find((r) => r.endsWith("/multiparts"))!)
    expect(await blobStatus("places", abandoned)).toBe(404)

    const again = await publish("places", { big80: files.mb80.path, small: files.small.path })
    expect(again.code, again.stderr).toBe(0)
    expect(await latest()).toBe(before + 1)
    const entries = await listed("places", before + 1)
    expect(entries.map((e) => [e.partition, e.checksum]).sort()).toEqual([
      ["big80", files.mb80.sha1],
      ["small", files.small.sha1]
    ])
    for (const entry of entries) {
      expect(await sha1ByClient("places", entry.dataHandle)).toBe(entry.checksum)
    }
    // The killed run's upload is never completed: still not readable, its parts wait for the expiry.
    expect(await blobStatus("places", abandoned)).toBe(404)
    expect(uploadsLeft()).toHaveLength(1)
  })

  it("counts a blob its lost first attempt stored (409 on the retry), for a PUT and for a completion", async () => {
    const before = await latest()
    let lost = { put: false, complete: false }
    const result = await publish("places", { big60: files.mb60.path, small: files.small.path }, (request) => {
      if (request.method === "PUT" && /\/data\/[^/]+$/.test(request.url!) && !lost.put) {
        lost = { ...lost, put: true }
        return "lose-answer"
      }
      if (request.method === "PUT" && /\/multiparts\/[0-9a-f]+$/.test(request.url!) && !lost.complete) {
        lost = { ...lost, complete: true }
        return "lose-answer"
      }
      return "forward"
    })
    expect(result.code, result.stderr).toBe(0)
    expect(lost).toEqual({ put: true, complete: true })
    // The PUT was sent twice: the second met the first's blob, which the client recognised as its own.
    const put = result.seen.filter((r) => /^PUT .*\/data\/[^/]+$/.test(r))
    expect(put).toHaveLength(2)
    expect(put[0]).toBe(put[1])
    expect(result.stderr).toContain("blob already stored by an earlier attempt; counted as uploaded")
    expect(count(result.seen, /^PUT .*\/multiparts\/[0-9a-f]+$/)).toBe(2)
    const entries = await listed("places", before + 1)
    expect(entries.map((e) => [e.partition, e.checksum]).sort()).toEqual([
      ["big60", files.mb60.sha1],
      ["small", files.small.sha1]
    ])
    for (const entry of entries) expect(await sha1ByClient("places", entry.dataHandle)).toBe(entry.checksum)
  })

  it("exits 6 naming the handle when it holds someone else's blob, for a PUT and for a multipart upload", async () => {
    const plant = (request: { url?: string | undefined }, bytes: Uint8Array) =>
      svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/${handleIn(request.url!)}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: bytes
      })
    for (
      const [file, first, bytes] of [
        // Same length, other bytes: only the content tells them apart.
        [files.small.path, /\/data\/[^/]+$/, randomBytes(files.small.bytes)],
        [files.mb60.path, /\/multiparts$/, randomBytes(100)]
      ] as const
    ) {
      const before = await latest()
      let planted: { handle: string; status: number } | undefined
      const result = await publish("places", { foreign: file }, async (request) => {
        if (planted === undefined && first.test(request.url!)) {
          planted = { handle: handleIn(request.url!), status: 0 }
          planted.status = (await plant(request, bytes)).status
        }
        return "forward" as const
      })
      expect(planted!.status).toBe(200)
      expect(result.code, result.stderr).toBe(6)
      expect(result.stderr).toContain(
        `Data handle ${planted!.handle} in layer places of ${DEMO}: it already holds another blob`
      )
      expect(await latest()).toBe(before)
    }
  })
})

describe("publish to a service that takes smaller bodies", () => {
  let small: TestService

  beforeAll(async () => {
    small = await startService({ seed: { partitions: 5, versions: 1 }, maxBodyBytes: PART_BYTES })
  })
  afterAll(() => small?.close())

  it("uploads a blob the service refuses in one PUT (413) in parts, and refuses it for a volatile layer (exit 2)", async () => {
    const file = path.join(data, "10mb.bin")
    const digest = randomFile(file, 10 * MB)
    const creds = await small.credentialsFile()
    const publishTo = (layer: string, partition: string) =>
      cli([
        "publish",
        "--catalog",
        DEMO,
        "--layer",
        layer,
        "--partition",
        `${partition}=${file}`,
        "--lookup-url",
        small.lookupUrl,
        "--credentials",
        creds
      ])
    const ok = await publishTo("places", "ten")
    expect(ok.code, ok.stderr).toBe(0)
    const latestVersion = ((await (await small.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`))
      .json()) as { version: number }).version
    const [entry] = ((await (await small.get(
      `/metadata/v1/catalogs/${DEMO}/layers/places/partitions?version=${latestVersion}&additionalFields=checksum`
    )).json()) as { partitions: Array<Entry> }).partitions.filter((p) => p.partition === "ten")
    expect(entry!.checksum).toBe(digest)
    const bytes = new Uint8Array(
      await (await small.get(`/blobstore/v1/catalogs/${DEMO}/layers/places/data/${entry!.dataHandle}`)).arrayBuffer()
    )
    expect(sha1(bytes)).toBe(digest)

    const refused = await publishTo("traffic", "segment-0001")
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(`request bodies are limited to ${PART_BYTES} bytes`)
  })
})
