/**
 * Publishing large files (`npx tsx test/bench/publish.ts`, section 9 of `npm run bench`): `publish`
 * of 6 x 200 MB random files (multipart uploads) into the local service, against the floor of the
 * same transfer: the same parts (client/BlobUpload.ts: 8 MiB, 4 per file) POSTed by undici, all files at once, to a bare
 * node:http server that writes each body to a file. Each side runs in its own process; the figures
 * are wall time (start-up included), MB/s, CPU of client and server, and the client's peak RSS. The
 * official HERE SDK reads every published blob back (sha1 = the file's).
 *
 *   npx tsx test/bench/publish.ts            6 x 200 MB
 *   npx tsx test/bench/publish.ts --quick    3 x 60 MB
 * Run it on a quiet machine: the client and the server share the cores.
 */
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings } from "@here/olp-sdk-core"
import { DataRequest, VersionedLayerClient } from "@here/olp-sdk-dataservice-read"
import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PART_BYTES, PARTS_IN_FLIGHT } from "../../src/client/BlobUpload.ts"
import { BENCH, CLI, cpuMicrosOf, measure, readProperties, startService, waitForLine } from "./support.ts"

const FLOOR = path.join(BENCH, "upload-floor.mjs")
const CATALOG = "hrn:local:data:::demo"
const LAYER = "places"
const TARGET_MBPS = 100
const TARGET_RSS_MB = 300

/** Writes `bytes` random bytes in 8 MB pieces; the file's sha1. */
const randomFile = (file: string, bytes: number) => {
  const hash = createHash("sha1")
  const fd = fs.openSync(file, "w")
  for (let left = bytes; left > 0;) {
    const piece = randomBytes(Math.min(left, 8_000_000))
    hash.update(piece)
    fs.writeSync(fd, piece)
    left -= piece.length
  }
  fs.closeSync(fd)
  return hash.digest("hex")
}

// ----------------------------------------------------------------------------------------- parent

const sha1Read = async (client: VersionedLayerClient, partition: string) => {
  const response = await client.getData(new DataRequest().withPartitionId(partition))
  return createHash("sha1").update(new Uint8Array(await response.arrayBuffer())).digest("hex")
}

const main = async () => {
  const args = process.argv.slice(2)
  const quick = args.includes("--quick")
  const count = quick ? 3 : 6
  const megabytes = quick ? 60 : 200
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-publish-bench-"))
  const stops: Array<() => void> = []
  try {
    const sources = path.join(work, "files")
    fs.mkdirSync(sources)
    const digests = new Map<string, string>()
    for (let i = 1; i <= count; i++) {
      digests.set(`big-${i}`, randomFile(path.join(sources, `big-${i}`), megabytes * 1_000_000))
    }
    const files = [...digests.keys()].map((name) => path.join(sources, name))
    const total = (count * megabytes * 1_000_000) / 1e6

    // The floor: bare undici to a bare node:http server, each in its own process.
    const received = path.join(work, "received")
    fs.mkdirSync(received)
    const bare = spawn(process.execPath, [FLOOR, "--server", received], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    stops.push(() => bare.kill("SIGTERM"))
    const bareLine = await waitForLine(bare, "bare server")
    const bareCpu = cpuMicrosOf(Number(bareLine.pid))
    const floor = measure(FLOOR, ["--client", bareLine.url!, String(PART_BYTES), String(PARTS_IN_FLIGHT), ...files])
    const floorServerCpu = (cpuMicrosOf(Number(bareLine.pid)) - bareCpu) / 1e6
    bare.kill("SIGTERM")
    fs.rmSync(received, { recursive: true, force: true })

    // publish into the local service.
    const credentials = path.join(work, "credentials.properties")
    const { child: service, lookupUrl } = await startService(1, 1024, credentials)
    stops.push(() => service.kill("SIGTERM"))
    const serviceCpu = cpuMicrosOf(service.pid!)
    const published = measure(CLI, [
      "publish",
      "--catalog",
      CATALOG,
      "--layer",
      LAYER,
      "--from-dir",
      sources,
      "--lookup-url",
      lookupUrl,
      "--credentials",
      credentials,
      "--quiet"
    ])
    const publishServerCpu = (cpuMicrosOf(service.pid!) - serviceCpu) / 1e6

    // Exact: the official SDK reads every blob back.
    const userAuth = new UserAuth({
      credentials: loadCredentialsFromFile(credentials),
      customUrl: readProperties(credentials)["here.token.endpoint.url"]!,
      tokenRequester: requestToken
    })
    const settings = new OlpClientSettings({ environment: lookupUrl, getToken: () => userAuth.getToken() })
    const client = new VersionedLayerClient({ catalogHrn: HRN.fromString(CATALOG), layerId: LAYER, settings })
    let exact = 0
    for (const [partition, digest] of digests) if ((await sha1Read(client, partition)) === digest) exact++

    const mbps = (u: { wallSeconds: number }) => total / u.wallSeconds
    console.log(
      `${count} x ${megabytes} MB random files; parts of ${
        PART_BYTES / 1024 / 1024
      } MiB, ${PARTS_IN_FLIGHT} per file in flight; ` +
        `load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}.`
    )
    console.log("")
    console.log("| variant | wall s | MB/s | client CPU s | server CPU s | client peak RSS MB |")
    console.log("|---|---|---|---|---|---|")
    console.log(
      `| floor: undici POSTs of the parts to a bare node:http server writing them to disk | ${
        floor.wallSeconds.toFixed(1)
      } | ${mbps(floor).toFixed(0)} | ${floor.cpuSeconds.toFixed(1)} | ${floorServerCpu.toFixed(1)} | ${
        floor.maxRssMb.toFixed(0)
      } |`
    )
    console.log(
      `| catalog-export publish (multipart) to the local service | ${published.wallSeconds.toFixed(1)} | ${
        mbps(published).toFixed(0)
      } | ${published.cpuSeconds.toFixed(1)} | ${publishServerCpu.toFixed(1)} | ${published.maxRssMb.toFixed(0)} |`
    )
    console.log("")
    const met = (ok: boolean) => (ok ? "met" : "NOT met")
    console.log(
      `publish / floor MB/s = ${(mbps(published) / mbps(floor)).toFixed(2)}; publish ${
        mbps(published).toFixed(0)
      } MB/s ` +
        `(target >= ${TARGET_MBPS}: ${met(mbps(published) >= TARGET_MBPS)}); peak RSS ${
          published.maxRssMb.toFixed(0)
        } MB (target <= ${TARGET_RSS_MB}: ${met(published.maxRssMb <= TARGET_RSS_MB)}); ` +
        `read back exact by the HERE SDK: ${exact} of ${count} (${met(exact === count)})`
    )
  } finally {
    for (const stop of stops) stop()
    fs.rmSync(work, { recursive: true, force: true })
  }
}

await main()
