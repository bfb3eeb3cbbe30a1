/**
 * HERE's official TypeScript SDK only reading a layer's blobs, as a user's script would (section 15 of
 * `npm run bench`): a token, the partitions listing (`getPartitions`), then every blob at once through
 * `getData` with the SDK's own concurrency (it has no limit of its own: one promise per blob).
 * Nothing is written. Prints one JSON line: the blobs read, their bytes, and the seconds from the
 * first blob request to the last blob's bytes (the SDK's reading only: start-up, token and listing
 * are not counted). Every blob's sha1 is checked against the listing's checksum after the timing.
 *
 *   tsx test/bench/sdk-read.ts LOOKUP_URL CREDENTIALS CATALOG LAYER
 */
import "@here/olp-sdk-fetch"
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings } from "@here/olp-sdk-core"
import { DataRequest, PartitionsRequest, VersionedLayerClient } from "@here/olp-sdk-dataservice-read"
import { createHash } from "node:crypto"
import { readProperties } from "./support.ts"

const [lookupUrl, credentials, catalog, layer] = process.argv.slice(2) as [string, string, string, string]

const userAuth = new UserAuth({
  credentials: loadCredentialsFromFile(credentials),
  customUrl: readProperties(credentials)["here.token.endpoint.url"]!,
  tokenRequester: requestToken
})
const settings = new OlpClientSettings({ environment: lookupUrl, getToken: () => userAuth.getToken() })
const client = new VersionedLayerClient({ catalogHrn: HRN.fromString(catalog), layerId: layer, settings })
const { partitions } = await client.getPartitions(new PartitionsRequest().withAdditionalFields(["checksum"]))

const started = performance.now()
const blobs = await Promise.all(
  partitions.map(async (p) =>
    new Uint8Array(await (await client.getData(new DataRequest().withDataHandle(p.dataHandle))).arrayBuffer())
  )
)
const seconds = (performance.now() - started) / 1000

const bad = partitions.filter((p, i) => createHash("sha1").update(blobs[i]!).digest("hex") !== p.checksum)
if (bad.length > 0) {
  throw new Error(`${bad.length} of ${partitions.length} blobs read by the SDK do not match their checksum`)
}
const bytes = blobs.reduce((sum, b) => sum + b.byteLength, 0)
console.log(JSON.stringify({ blobs: blobs.length, bytes, seconds }))
