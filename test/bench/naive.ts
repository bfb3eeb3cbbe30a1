/**
 * The exporter a user would write by hand (the benchmark's baseline): undici Pool + p-limit +
 * parquetjs-lite, the listing read whole, no checksum verification, no retries.
 *
 *   tsx test/bench/naive.ts LOOKUP_URL CREDENTIALS CATALOG LAYER OUT_FILE CONCURRENCY [export|fetch-only]
 * `fetch-only` discards every blob: the floor of what fetching costs.
 */
import { createRequire } from "node:module"
import pLimit from "p-limit"
import { Pool } from "undici"
import { bearerToken } from "./support.ts"

const [lookupUrl, credentials, catalog, layer, outFile, concurrencyArg, mode] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string | undefined
]
const concurrency = Number(concurrencyArg)
const fetchOnly = mode === "fetch-only"

const token = await bearerToken(credentials)
const headers = { authorization: `Bearer ${token}` }
const apis = (await (await fetch(`${lookupUrl}/resources/${catalog}/apis`, { headers })).json()) as Array<
  { api: string; baseURL: string }
>
const base = (api: string) => apis.find((a) => a.api === api)!.baseURL
const version =
  ((await (await fetch(`${base("metadata")}/versions/latest`, { headers })).json()) as { version: number }).version
// When the listing was asked for (ms since this process started): what follows is what a dry run leaves out.
const listingAt = performance.now()
const listing = (await (await fetch(
  `${base("metadata")}/layers/${layer}/partitions?version=${version}&additionalFields=dataSize,checksum`,
  { headers }
)).json()) as {
  partitions: Array<{ partition: string; version: number; dataHandle: string; dataSize?: number; checksum?: string }>
}

const blobBase = new URL(base("blob"))
const pool = new Pool(blobBase.origin, { connections: concurrency })
const limit = pLimit(concurrency)
let partitions = 0
let bytes = 0
const get = async (handle: string) => {
  const res = await pool.request({
    path: `${blobBase.pathname}/layers/${layer}/data/${handle}`,
    method: "GET",
    headers
  })
  return Buffer.from(await res.body.arrayBuffer())
}
if (fetchOnly) {
  await Promise.all(listing.partitions.map((p) =>
    limit(async () => {
      bytes += (await get(p.dataHandle)).byteLength
      partitions++
    })
  ))
} else {
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
  await Promise.all(listing.partitions.map((p) =>
    limit(async () => {
      const data = await get(p.dataHandle)
      appended = appended.then(() =>
        writer.appendRow({
          partition: p.partition,
          partition_version: p.version,
          data_handle: p.dataHandle,
          data_size: p.dataSize,
          checksum: p.checksum,
          data
        })
      )
      await appended
      bytes += data.byteLength
      partitions++
    })
  ))
  await writer.close()
}
const doneAt = performance.now()
await pool.close()
console.log(JSON.stringify({ partitions, bytes, listingAt, doneAt }))
