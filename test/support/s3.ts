/**
 * A real S3-protocol server on loopback for the tests: s3rver (file-backed), with what it lacks and
 * the export needs added in front of its router: ListMultipartUploads (`GET /bucket?uploads`) and
 * AbortMultipartUpload (`DELETE /bucket/key?uploadId=`), over s3rver's own upload directories, and
 * conditional PUTs (`If-None-Match: *`, or GCS's `x-goog-if-generation-match: 0`: 412
 * PreconditionFailed when the key exists or another such PUT of it is under way, as S3 and GCS answer). `deny` answers AccessDenied as S3 does, for the permission tests.
 */
import { GetObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3"
import * as fs from "node:fs"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import S3rver from "s3rver"
import { afterAll } from "vitest"

export interface TestStore {
  readonly endpoint: string
  readonly bucket: string
  /** The environment the CLI needs to reach the store (and nothing of a developer's own AWS setup). */
  readonly env: Record<string, string>
  readonly client: S3Client
  /** Keys below `prefix`, sorted. */
  readonly keys: (prefix?: string) => Promise<Array<string>>
  /** Copies every object below `prefix` to a new local directory (for DuckDB), returns it. */
  readonly download: (prefix: string) => Promise<string>
  /** Multipart uploads started and neither completed nor aborted. */
  readonly openUploads: () => Array<{ readonly key: string; readonly uploadId: string }>
  /** Requests answered 403 AccessDenied while it returns true. */
  deny: (method: string, url: string) => boolean
  readonly close: () => Promise<void>
}

type Ctx = {
  method: string
  url: string
  path: string
  query: Record<string, string | undefined>
  headers: Record<string, string | undefined>
  status: number
  body: unknown
  type: string
  store: { existsObject: (bucket: string, key: string) => Promise<boolean> }
}
type Middleware = (ctx: Ctx, next: () => Promise<void>) => Promise<void>

export const ACCESS_KEY = "S3RVER"
export const SECRET_KEY = "S3RVER"

export const startStore = async (bucket = "exports"): Promise<TestStore> => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "s3rver-"))
  const server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory,
    configureBuckets: [{ name: bucket, configs: [] }]
  })
  const uploadsDir = (b: string) => path.join(directory, b, "._S3rver_uploads")
  const openUploads = () => {
    const dir = uploadsDir(bucket)
    if (!fs.existsSync(dir)) return []
    // An upload being initiated has its directory a moment before its key file.
    const keyOf = (uploadId: string) =>
      fs.existsSync(path.join(dir, uploadId, "key")) ? fs.readFileSync(path.join(dir, uploadId, "key"), "utf8") : ""
    return fs.readdirSync(dir).map((uploadId) => ({ uploadId, key: keyOf(uploadId) }))
  }
  const store = { deny: (_method: string, _url: string) => false }
  const deny: Middleware = async (ctx, next) => {
    if (!store.deny(ctx.method, ctx.url)) return next()
    ctx.status = 403
    ctx.type = "application/xml"
    ctx.body =
      `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`
  }
  const multipart: Middleware = async (ctx, next) => {
    const [, b, ...rest] = ctx.path.split("/")
    const key = decodeURIComponent(rest.join("/"))
    if (ctx.method === "GET" && b !== undefined && key === "" && "uploads" in ctx.query) {
      const prefix = ctx.query.prefix ?? ""
      ctx.body = {
        ListMultipartUploadsResult: {
          Bucket: b,
          IsTruncated: false,
          Upload: openUploads().filter((u) => u.key.startsWith(prefix)).map((u) => ({
            Key: u.key,
            UploadId: u.uploadId,
            Initiated: new Date().toISOString()
          }))
        }
      }
      return
    }
    if (ctx.method === "DELETE" && key !== "" && ctx.query.uploadId !== undefined) {
      fs.rmSync(path.join(uploadsDir(b!), ctx.query.uploadId), { recursive: true, force: true })
      ctx.status = 204
      return
    }
    return next()
  }
  // Keys with a conditional PUT under way: claimed before the existence check, so that of two PUTs
  // racing for one key exactly one gets through.
  const creating = new Set<string>()
  const conditionalPut: Middleware = async (ctx, next) => {
    const createOnly = ctx.headers["if-none-match"] === "*" || ctx.headers["x-goog-if-generation-match"] === "0"
    if (ctx.method !== "PUT" || !createOnly || "uploadId" in ctx.query) return next()
    const [, b, ...rest] = ctx.path.split("/")
    const key = decodeURIComponent(rest.join("/"))
    const id = `${b}/${key}`
    const precondition = () => {
      ctx.status = 412
      ctx.type = "application/xml"
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>` +
        `<Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-None-Match</Condition></Error>`
    }
    if (creating.has(id)) return precondition()
    creating.add(id)
    try {
      if (await ctx.store.existsObject(b!, key)) return precondition()
      await next()
    } finally {
      creating.delete(id)
    }
  }
  const middleware = (server as unknown as { middleware: Array<Middleware> }).middleware
  middleware.splice(1, 0, deny)
  // Before the router (the last one), after the XML encoder of plain bodies.
  middleware.splice(middleware.length - 1, 0, multipart, conditionalPut)
  const address = (await server.run()) as AddressInfo
  const endpoint = `http://127.0.0.1:${address.port}`
  const client = new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY }
  })
  const none = path.join(directory, "no-aws-config")
  const keys = async (prefix = "") => {
    const out: Array<string> = []
    let ContinuationToken: string | undefined
    do {
      const page = await client.send(
        new ListObjectsV2Command({
          Bucket: bucket,
          Prefix: prefix,
          ...(ContinuationToken === undefined ? {} : { ContinuationToken })
        })
      )
      for (const o of page.Contents ?? []) out.push(o.Key!)
      ContinuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined
    } while (ContinuationToken !== undefined)
    return out.sort()
  }
  return Object.assign(store, {
    endpoint,
    bucket,
    client,
    env: {
      AWS_ACCESS_KEY_ID: ACCESS_KEY,
      AWS_SECRET_ACCESS_KEY: SECRET_KEY,
      AWS_REGION: "us-east-1",
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_CONFIG_FILE: none,
      AWS_SHARED_CREDENTIALS_FILE: none,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
    },
    keys,
    download: async (prefix: string) => {
      const local = fs.mkdtempSync(path.join(os.tmpdir(), "s3-download-"))
      for (const key of await keys(prefix)) {
        const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
        const file = path.join(local, key.slice(prefix.length).replace(/^\//, ""))
        fs.mkdirSync(path.dirname(file), { recursive: true })
        fs.writeFileSync(file, await got.Body!.transformToByteArray())
      }
      return local
    },
    openUploads,
    close: async () => {
      client.destroy()
      await server.close()
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })
}

/**
 * Puts `process.env` back as it was once the file's tests are done: a file that sets a store's environment for the
 * library's clients in its own process leaves none of it to the files that share its worker after it.
 */
export const restoreEnvironmentAfterAll = () => {
  const saved = { ...process.env }
  afterAll(() => {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key]
    Object.assign(process.env, saved)
  })
}
