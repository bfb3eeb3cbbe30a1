/**
 * Reading Iceberg tables back with an independent reader: icebird (npm), which reads v2 tables
 * (manifests with its own Avro decoder, Parquet through hyparquet, position and equality deletes)
 * through the global `fetch`. The tables record absolute `file://` and `s3://` URIs; the reader's
 * fetch sends `file://` URLs to a loopback HTTP server over the local files (with Range requests)
 * and icebird's `https://BUCKET.s3.amazonaws.com/KEY` to the test's S3 server, path-style. Reading a
 * tag: icebird reads a table's current snapshot, so it is given the table's metadata with the
 * tag's snapshot as current. No vitest here: the benchmarks read tables with it too.
 */
import { icebergMetadata, icebergRead } from "icebird"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { TestStore } from "./s3.ts"

/** A local HTTP server over the file system (GET with Range), for icebird's fetches of `file://` URLs. */
const startFileServer = async () => {
  const server = http.createServer((req, res) => {
    const file = decodeURIComponent(new URL(req.url!, "http://x").pathname)
    fs.stat(file, (error, stat) => {
      if (error !== null || !stat.isFile()) {
        res.writeHead(404).end()
        return
      }
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "")
      if (range === null) {
        res.writeHead(200, { "content-length": stat.size })
        fs.createReadStream(file).pipe(res)
        return
      }
      const start = Number(range[1])
      const end = range[2] === "" ? stat.size - 1 : Math.min(Number(range[2]), stat.size - 1)
      res.writeHead(206, {
        "content-length": end - start + 1,
        "content-range": `bytes ${start}-${end}/${stat.size}`
      })
      fs.createReadStream(file, { start, end }).pipe(res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

export interface IcebirdReader {
  /** The rows of the table's snapshot `tag` (main: "main"), as icebird reads them, sorted by partition. */
  readonly read: (tableUri: string, tag: string) => Promise<Array<Record<string, unknown>>>
  readonly close: () => Promise<void>
}

/** Where a table URI of another store (gs://, abfss://) is read in a test: an HTTP URL of its emulator, or undefined. */
export type Route = (uri: string) => string | undefined

/** icebird, its fetches sent to the local files, the test's S3 server and the stores `more` routes to. */
export const icebird = async (store?: TestStore, more?: Route): Promise<IcebirdReader> => {
  const files = await startFileServer()
  const realFetch = globalThis.fetch
  const route = (url: string): string => {
    if (url.startsWith("file://")) return `${files.base}${encodeURI(url.slice("file://".length))}`
    const s3 = /^https:\/\/([^.]+)\.s3\.amazonaws\.com\/(.*)$/.exec(url)
    if (s3 !== null && store !== undefined) return `${store.endpoint}/${s3[1]}/${s3[2]}`
    return more?.(url) ?? url
  }
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) =>
    realFetch(
      route(typeof input === "string" ? input : input instanceof URL ? input.href : input.url),
      init
    )) as typeof fetch
  return {
    read: async (tableUrl, tag) => {
      const metadata = await icebergMetadata({ tableUrl })
      const ref = (metadata.refs as Record<string, { "snapshot-id": number }> | undefined)?.[tag]
      if (ref === undefined) throw new Error(`no ref ${tag} in ${tableUrl}`)
      const rows = await icebergRead({ tableUrl, metadata: { ...metadata, "current-snapshot-id": ref["snapshot-id"] } })
      return rows.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0))
    },
    close: async () => {
      globalThis.fetch = realFetch
      await new Promise<void>((resolve) => files.server.close(() => resolve()))
    }
  }
}
