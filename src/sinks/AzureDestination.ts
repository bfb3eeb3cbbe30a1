import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type AzureContainer, describeAzureFailure, statusOf } from "./Azure.ts"
import type { Destination, Entry } from "./DestinationApi.ts"
import { eachLimited, formatStoreUrl, joinKey, type StoreUrl } from "./ObjectStore.ts"
import { SinkError } from "./SinkError.ts"

/**
 * A container of Azure Blob Storage as a Destination (`az://container/prefix`,
 * `abfss://container@account.dfs.core.windows.net/prefix`): blobs below the prefix, `/` the
 * directory separator of listings. Whole files are one Put Blob (atomic: the old content or the
 * new); an exclusive create is a Put Blob with `If-None-Match: *`.
 */

/** A request on `location`; its failure described for the user, without the SDK's error (whose request may hold a SAS). */
export const azureRequest = <A>(location: string, doing: string, run: () => Promise<A>): Effect.Effect<A, SinkError> =>
  Effect.tryPromise({ try: run, catch: (cause) => new SinkError(describeAzureFailure(location, doing, cause)) })

const isMissing = (cause: unknown) => {
  const { code, status } = statusOf(cause)
  return code === "BlobNotFound" || (status === 404 && code !== "ContainerNotFound")
}

/** The body of a download, whole. */
const bytesOf = async (body: NodeJS.ReadableStream | undefined): Promise<Uint8Array> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of body ?? []) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** An ETag as headers give it (listings give Azure's unquoted): what a file was written with compares equal. */
const quoted = (etag: string | undefined) => (etag === undefined || etag.startsWith("\"") ? etag : `"${etag}"`)

/** Deletions at once: each blob is one request (free of charge on Azure). */
const DELETES_AT_ONCE = 16

export const azureDestination = (name: string, url: StoreUrl, container: AzureContainer): Destination => {
  const { client } = container
  const key = (k: string) => joinKey(url.prefix, k)
  const at = (k: string) => `${formatStoreUrl(url)}${k === "" ? "" : `/${k}`}`
  const blob = (k: string) => client.getBlockBlobClient(key(k))
  const request = <A>(k: string, doing: string, run: () => Promise<A>) => azureRequest(at(k), doing, run)
  const download = async (k: string, offset?: number, count?: number) => {
    try {
      return await bytesOf((await blob(k).download(offset, count)).readableStreamBody)
    } catch (e) {
      if (isMissing(e)) return undefined
      throw e
    }
  }
  const upload = (k: string, content: string | Uint8Array, ifNoneMatch?: "*") => {
    const body = typeof content === "string" ? Buffer.from(content, "utf8") : content
    return blob(k).upload(body, body.byteLength, {
      blobHTTPHeaders: {
        blobContentType: typeof content === "string" ? "application/json" : "application/octet-stream"
      },
      ...(ifNoneMatch === undefined ? {} : { conditions: { ifNoneMatch } })
    })
  }
  const deleteBlobs = (names: ReadonlyArray<string>) =>
    eachLimited(names, DELETES_AT_ONCE, async (blobName) => {
      await client.getBlockBlobClient(blobName).deleteIfExists()
    })
  return {
    name,
    remote: true,
    at,
    uri: (k) => (key(k) === "" ? container.uri : `${container.uri}/${key(k)}`),
    read: (k) =>
      request(k, "read", async () => {
        const bytes = await download(k)
        return bytes === undefined ? Option.none() : Option.some(Buffer.from(bytes).toString("utf8"))
      }),
    readBytes: (k) => request(k, "read", async () => Option.fromNullable(await download(k))),
    readRange: (k, start, end) =>
      request(k, "read", async () => {
        // A count of 0 would mean "to the end" to the SDK.
        if (end <= start) return new Uint8Array(0)
        const bytes = await download(k, start, end - start)
        if (bytes === undefined) {
          throw Object.assign(new Error("no such blob"), { statusCode: 404, code: "BlobNotFound" })
        }
        if (bytes.length !== end - start) {
          throw new Error(`expected ${end - start} bytes from ${start}, got ${bytes.length}`)
        }
        return bytes
      }),
    write: (k, content) => request(k, "write", () => upload(k, content).then(() => undefined)),
    create: (k, content) =>
      request(k, "create", () =>
        upload(k, content, "*").then(
          () => true,
          (e) => {
            // 409 BlobAlreadyExists, as Azure answers If-None-Match: * on a blob that exists (412 from some emulators).
            const { code, status } = statusOf(e)
            if (code === "BlobAlreadyExists" || status === 412) return false
            throw e
          }
        )),
    stat: (k) =>
      request(k, "read", async () => {
        try {
          const properties = await blob(k).getProperties()
          return Option.some<Entry>({
            name: k.slice(k.lastIndexOf("/") + 1),
            dir: false,
            size: properties.contentLength ?? 0,
            etag: properties.etag
          })
        } catch (e) {
          if (isMissing(e)) return Option.none<Entry>()
          throw e
        }
      }),
    list: (dir) =>
      request(dir, "list", async () => {
        const prefix = key(dir) === "" ? "" : `${key(dir)}/`
        const listed: Array<Entry> = []
        for await (const item of client.listBlobsByHierarchy("/", { prefix })) {
          listed.push(
            item.kind === "prefix"
              ? { name: item.name.slice(prefix.length).replace(/\/$/, ""), dir: true, size: 0 }
              : {
                name: item.name.slice(prefix.length),
                dir: false,
                size: item.properties.contentLength ?? 0,
                etag: quoted(item.properties.etag)
              }
          )
        }
        return listed.filter((e) => e.name !== "")
      }),
    remove: (keys) => keys.length === 0 ? Effect.void : request(keys[0]!, "remove", () => deleteBlobs(keys.map(key))),
    removeAll: (dir) =>
      request(dir, "remove", async () => {
        for await (const page of client.listBlobsFlat({ prefix: `${key(dir)}/` }).byPage({ maxPageSize: 1000 })) {
          await deleteBlobs(page.segment.blobItems.map((b) => b.name))
        }
      }),
    // Blocks never committed are no blob and cannot be deleted: Azure discards them when their blob is
    // next committed, or after seven days.
    abortUploads: () => Effect.succeed(0),
    pruneEmpty: () => Effect.void
  }
}
