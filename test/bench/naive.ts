/**
 * The exporter a user would write by hand (the benchmark's baseline): undici Pool + p-limit +
 * parquetjs-lite, the listing read whole, no checksum verification, no retries.
 *
 *   tsx test/bench/naive.ts LOOKUP_URL CREDENTIALS CATALOG LAYER OUT_FILE CONCURRENCY
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import pLimit from "p-limit"
import { Pool } from "undici"
import { signRequest } from "../../src/domain/OAuth1.ts"

const [lookupUrl, credentials, catalog, layer, outFile, concurrencyArg] = process.argv.slice(2) as [string, string, string, string, string, string]
const concurrency = Number(concurrencyArg)

const props = Object.fromEntries(
  fs.readFileSync(credentials, "utf8").split("\n").filter((l) => l.includes("=")).map((l) => {
    const i = l.indexOf("=")
    return [l.slice(0, i).trim(), l.slice(i + 1).trim()]
  })
) as Record<string, string>
const tokenUrl = props["here.token.endpoint.url"]!
const authorization = signRequest({
  url: tokenUrl,
  keyId: props["here.access.key.id"]!,
  secret: props["here.access.key.secret"]!,
  timestamp: Math.floor(Date.now() / 1000),
  nonce: Math.random().toString(36).slice(2)
})
const token = ((await (await fetch(tokenUrl, {
  method: "POST",
  headers: { authorization, "content-type": "application/json" },
  body: JSON.stringify({ grantType: "client_credentials" })
})).json()) as { accessToken: string }).accessToken
const headers = { authorization: `Bearer ${token}` }
const apis = (await (await fetch(`${lookupUrl}/resources/${catalog}/apis`, { headers })).json()) as Array<{ api: string; baseURL: string }>
const base = (api: string) => apis.find((a) => a.api === api)!.baseURL
const version = ((await (await fetch(`${base("metadata")}/versions/latest`, { headers })).json()) as { version: number }).version
const listing = (await (await fetch(`${base("metadata")}/layers/${layer}/partitions?version=${version}&additionalFields=dataSize,checksum`, { headers })).json()) as {
  partitions: Array<{ partition: string; version: number; dataHandle: string; dataSize?: number; checksum?: string }>
}

const blobBase = new URL(base("blob"))
const pool = new Pool(blobBase.origin, { connections: concurrency })
const limit = pLimit(concurrency)
const parquet = createRequire(import.meta.url)("parquetjs-lite")
const schema = new parquet.ParquetSchema({
  partition: { type: "UTF8" },
  partition_version: { type: "INT64" },
  data_handle: { type: "UTF8" },
  data_size: { type: "INT64", optional: true },
  checksum: { type: "UTF8", optional: true },
  data: { type: "BYTE_ARRAY", optional: true }
})
const writer = await parquet.ParquetWriter.openFile(schema, outFile)
// parquetjs-lite duplicates rows when appendRow calls overlap (measured: 26x the rows), so appends are chained.
let appended: Promise<void> = Promise.resolve()
let partitions = 0
let bytes = 0
await Promise.all(listing.partitions.map((p) =>
  limit(async () => {
    const res = await pool.request({ path: `${blobBase.pathname}/layers/${layer}/data/${p.dataHandle}`, method: "GET", headers })
    const data = Buffer.from(await res.body.arrayBuffer())
    appended = appended.then(() =>
      writer.appendRow({ partition: p.partition, partition_version: p.version, data_handle: p.dataHandle, data_size: p.dataSize, checksum: p.checksum, data })
    )
    await appended
    bytes += data.byteLength
    partitions++
  })
))
await writer.close()
await pool.close()
console.log(JSON.stringify({ partitions, bytes }))
