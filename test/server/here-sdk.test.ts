/**
 * The official HERE Data SDK for TypeScript, unchanged, against the local service: the proof that
 * clients written for the real platform work here. The SDK installs node-fetch as its fetch.
 */
import "@here/olp-sdk-fetch"
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings } from "@here/olp-sdk-core"
import {
  DataRequest,
  PartitionsRequest,
  VersionedLayerClient,
  VolatileLayerClient
} from "@here/olp-sdk-dataservice-read"
import { createHash } from "node:crypto"
import { gunzipSync } from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startService, type TestService } from "../support/service.ts"

const sha1 = (bytes: Uint8Array) => createHash("sha1").update(bytes).digest("hex")

describe("HERE Data SDK for TypeScript against the local service", () => {
  let svc: TestService
  let settings: OlpClientSettings

  beforeAll(async () => {
    svc = await startService()
    const credentialsPath = await svc.credentialsFile()
    const userAuth = new UserAuth({
      credentials: loadCredentialsFromFile(credentialsPath),
      customUrl: (await svc.credentials()).tokenUrl,
      tokenRequester: requestToken
    })
    settings = new OlpClientSettings({ environment: svc.lookupUrl, getToken: () => userAuth.getToken() })
  })
  afterAll(() => svc.close())

  it("obtains a token with the credentials serve writes", async () => {
    const credentials = loadCredentialsFromFile(await svc.credentialsFile())
    const userAuth = new UserAuth({ credentials, customUrl: svc.tokenUrl, tokenRequester: requestToken })
    const token = await userAuth.getToken()
    expect(token).toMatch(/^lcs\./)
    const res = await fetch(`${svc.url}/config/v1/catalogs`, { headers: { authorization: `Bearer ${token}` } })
    expect(res.status).toBe(200)
  })

  it("lists the versioned layer's partitions and reads blobs whose sha1 matches the checksum", async () => {
    const client = new VersionedLayerClient({
      catalogHrn: HRN.fromString("hrn:local:data:::demo"),
      layerId: "places",
      settings
    })
    const listing = await client.getPartitions(new PartitionsRequest().withAdditionalFields(["dataSize", "checksum"]))
    const partitions = listing.partitions
    const expected = (await (await svc.get("/metadata/v1/catalogs/hrn:local:data:::demo/versions/latest")).json()) as {
      version: number
    }
    const direct = await (await svc.get(
      `/metadata/v1/catalogs/hrn:local:data:::demo/layers/places/partitions?version=${expected.version}`
    )).json() as { partitions: Array<{ partition: string }> }
    expect(partitions.length).toBe(direct.partitions.length)
    expect(partitions.length).toBeGreaterThan(100)
    for (const p of partitions.slice(0, 5)) {
      const response = await client.getData(new DataRequest().withDataHandle(p.dataHandle))
      const bytes = new Uint8Array(await response.arrayBuffer())
      expect(bytes.byteLength).toBe(p.dataSize)
      expect(sha1(bytes)).toBe(p.checksum)
    }
    const byId = await client.getData(new DataRequest().withPartitionId(partitions[0]!.partition))
    expect(sha1(new Uint8Array(await byId.arrayBuffer()))).toBe(partitions[0]!.checksum)
  })

  it("reads the gzip heretile layer (decompressed by the SDK's HTTP stack)", async () => {
    const client = new VersionedLayerClient({
      catalogHrn: HRN.fromString("hrn:local:data:::demo"),
      layerId: "tiles",
      settings
    })
    const { partitions } = await client.getPartitions(new PartitionsRequest().withAdditionalFields(["checksum"]))
    const tile = partitions[0]!
    const response = await client.getData(new DataRequest().withPartitionId(tile.partition))
    let bytes = new Uint8Array(await response.arrayBuffer())
    if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzipSync(bytes)
    expect(sha1(bytes)).toBe(tile.checksum)
    expect(JSON.parse(new TextDecoder().decode(bytes)).type).toBe("FeatureCollection")
  })

  it("reads the volatile layer", async () => {
    const client = new VolatileLayerClient({
      catalogHrn: HRN.fromString("hrn:local:data:::demo"),
      layerId: "traffic",
      settings
    })
    const { partitions } = await client.getPartitions(new PartitionsRequest())
    expect(partitions.length).toBe(100)
    const response = await client.getData(new DataRequest().withPartitionId("segment-0003"))
    const body = JSON.parse(await response.text())
    expect(body.segment).toBe("segment-3")
  })
})
