/**
 * The official HERE Data SDK for TypeScript's multipart requests (@here/olp-sdk-dataservice-api
 * BlobApi, as its write SDK's MultiPartUploadWrapper calls them) against `catalog-export serve`: start,
 * parts, complete with the parts in the order they finished, status, cancel; the SDK's reader then
 * reads the blob back byte for byte.
 *
 * The service runs as its own process: this file loads none of the project's modules, so the SDK
 * talks through Node's own fetch as it would in an application (the project's undici, loaded
 * in-process, becomes Node's global dispatcher and refuses the Content-Length header the SDK sets).
 */
import "@here/olp-sdk-fetch"
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings, RequestFactory } from "@here/olp-sdk-core"
import { BlobApi, UrlBuilder } from "@here/olp-sdk-dataservice-api"
import { DataRequest, VersionedLayerClient } from "@here/olp-sdk-dataservice-read"
import { type ChildProcess, spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BIN, ROOT } from "../support/cli.ts"

const DEMO = "hrn:local:data:::demo"
const MiB = 1024 * 1024
const sha1 = (bytes: Uint8Array) => createHash("sha1").update(bytes).digest("hex")

describe("HERE Data SDK multipart upload against the local service", () => {
  let child: ChildProcess
  let dir: string
  let settings: OlpClientSettings

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sdk-multipart-"))
    const credentials = path.join(dir, "credentials.properties")
    child = spawn(process.execPath, [
      BIN,
      "serve",
      "--port",
      "0",
      "--seed-partitions",
      "5",
      "--seed-versions",
      "1",
      "--credentials-out",
      credentials
    ], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] })
    const listening = await new Promise<{ lookupUrl: string; tokenUrl: string }>((resolve, reject) => {
      let out = ""
      child.stdout!.setEncoding("utf8").on("data", (d: string) => {
        out += d
        if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]!))
      })
      child.on("exit", (code) => reject(new Error(`serve exited with ${code}`)))
    })
    const userAuth = new UserAuth({
      credentials: loadCredentialsFromFile(credentials),
      customUrl: listening.tokenUrl,
      tokenRequester: requestToken
    })
    settings = new OlpClientSettings({ environment: listening.lookupUrl, getToken: () => userAuth.getToken() })
  })
  afterAll(() => {
    child?.kill("SIGTERM")
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("uploads in parts, completes, reports the status, and the SDK reads the blob back", async () => {
    const builder = await RequestFactory.create("blob", "v1", settings, HRN.fromString(DEMO))
    const started = await BlobApi.startMultipartUpload(builder, {
      layerId: "places",
      dataHandle: "sdk-multipart",
      body: { contentType: "application/json" }
    })
    const links = started.links!
    const token = links.status!.href!.split("/").pop()!
    const chunks = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(123)]
    const parts = await Promise.all(chunks.map(async (chunk, i) => {
      const response = await BlobApi.doUploadPart(builder, {
        url: links.uploadPart!.href!,
        partNumber: i + 1,
        body: chunk,
        contentType: "application/json",
        contentLength: chunk.length
      })
      return { etag: response.headers.get("ETag")!, number: i + 1 }
    }))
    const params = { layerId: "places", dataHandle: "sdk-multipart", multiPartToken: token }
    expect(await BlobApi.getMultipartUploadStatus(builder, params)).toEqual({ status: "processing" })
    // The SDK's MultiPartUploadWrapper lists parts as their uploads finish, not by number.
    const completed = await BlobApi.doCompleteMultipartUpload(builder, {
      url: links.complete!.href!,
      parts: { parts: [parts[2]!, parts[0]!, parts[1]!] }
    })
    expect(completed.status).toBe(204)
    expect(await BlobApi.getMultipartUploadStatus(builder, params)).toEqual({ status: "completed" })

    const client = new VersionedLayerClient({ catalogHrn: HRN.fromString(DEMO), layerId: "places", settings })
    const read = await client.getData(new DataRequest().withDataHandle("sdk-multipart"))
    expect(sha1(new Uint8Array(await read.arrayBuffer()))).toBe(sha1(Buffer.concat(chunks)))
  })

  it("cancels: the upload is gone and nothing is readable", async () => {
    const builder = await RequestFactory.create("blob", "v1", settings, HRN.fromString(DEMO))
    const started = await BlobApi.startMultipartUpload(builder, {
      layerId: "places",
      dataHandle: "sdk-cancelled",
      body: { contentType: "application/json" }
    })
    // The typing names the cancel link `_delete` (a reserved word); the wire says `delete`, as the facts do.
    const cancel = (started.links as Record<string, { href: string }>)["delete"]!.href
    await BlobApi.doUploadPart(builder, {
      url: started.links!.uploadPart!.href!,
      partNumber: 1,
      body: randomBytes(1000),
      contentType: "application/json",
      contentLength: 1000
    })
    const params = { layerId: "places", dataHandle: "sdk-cancelled", multiPartToken: cancel.split("/").pop()! }
    // BlobApi.cancelMultipartUpload parses the answer as JSON, but a cancel answers 204 without a body
    // (facts §5); the SDK's own request builder sends the same DELETE and takes the answer as it is.
    expect((await builder.requestBlob(new UrlBuilder(cancel), { method: "DELETE" })).status).toBe(204)
    await expect(BlobApi.getMultipartUploadStatus(builder, params)).rejects.toMatchObject({ status: 404 })
    const client = new VersionedLayerClient({ catalogHrn: HRN.fromString(DEMO), layerId: "places", settings })
    await expect(client.getData(new DataRequest().withDataHandle("sdk-cancelled"))).rejects.toMatchObject({
      status: 404
    })
  })
})
