import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { azureContainer, commitBlocks } from "./Azure.ts"
import { azureDestination, azureRequest } from "./AzureDestination.ts"
import type { Destination, Entry } from "./DestinationApi.ts"
import type { CompletedFile } from "./Files.ts"
import {
  describeStoreFailure,
  eachLimited,
  formatStoreUrl,
  isObjectStore,
  isStoreScheme,
  joinKey,
  parseStoreUrl,
  s3Client,
  type S3Flavour,
  s3Sdk,
  schemeOf,
  STORE_FORMS,
  type StoreScheme,
  type StoreUrl
} from "./ObjectStore.ts"
import { fromCause, SinkError } from "./SinkError.ts"

export type { Destination, Entry } from "./DestinationApi.ts"

/** A destination that cannot be used as given. */
export const invalidDestination = (spec: string, why: string) =>
  new SinkError({ path: spec, reason: "InvalidOptions", message: `Location ${spec} ${why}` })

const URL_FORMS: Record<StoreScheme, string> = {
  s3: "s3://bucket/prefix URL; check the bucket name and the prefix.",
  gs: "gs://bucket/prefix URL; check the bucket name and the prefix.",
  az:
    "az://container/prefix URL; check the container name (3 to 63 lowercase letters, digits and single hyphens) and the prefix.",
  abfss:
    "abfss://container@account.dfs.core.windows.net/prefix URL; check the container name (3 to 63 lowercase letters, digits and single hyphens), the storage account (3 to 24 lowercase letters and digits) and the prefix."
}

/**
 * The destination `spec` names: a local path (or `file://` URL), or an object store (`s3://`,
 * `gs://`, `az://`, `abfss://`), whose client is made from the environment (ObjectStore.ts, Azure.ts).
 */
export const destination = (spec: string): Effect.Effect<Destination, SinkError> => {
  const scheme = schemeOf(spec)
  if (scheme === undefined) {
    return Effect.succeed(local(spec.startsWith("file://") ? new URL(spec).pathname : spec, spec))
  }
  if (!isStoreScheme(scheme)) {
    return Effect.fail(
      invalidDestination(
        spec,
        `uses ${scheme}://, which this version cannot use; give a local directory or ${STORE_FORMS} (other S3-compatible stores such as MinIO or R2 through AWS_ENDPOINT_URL_S3).`
      )
    )
  }
  const url = parseStoreUrl(spec)
  if (url === undefined) return Effect.fail(invalidDestination(spec, `is not a valid ${URL_FORMS[scheme]}`))
  if (url.scheme === "az" || url.scheme === "abfss") {
    return Effect.map(
      azureRequest(spec, "use", () => azureContainer(url)),
      (container) => azureDestination(spec, url, container)
    )
  }
  const flavour = url.scheme
  return Effect.map(storeRequest(spec, "use", () => s3Client(flavour)), (client) => store(spec, url, flavour, client))
}

/** Makes a finished data file visible under its final name in `dir` (a local directory or a store URL); returns the object's ETag on a store. */
export const publish = (dir: string, file: CompletedFile): Effect.Effect<string | undefined, SinkError> => {
  const landing = file.landing
  switch (landing._tag) {
    case "Partial":
      return Effect.tryPromise({
        try: () => fs.rename(landing.partialPath, path.join(dir, file.path)),
        catch: (cause) => fromCause(landing.partialPath, "rename", cause)
      }).pipe(Effect.as(undefined))
    case "Stored":
      return Effect.succeed(landing.etag)
    case "Upload": {
      const url = parseStoreUrl(dir)!
      const location = `${dir}/${file.path}`
      return storeRequest(location, "complete the upload of", async () => {
        const { CompleteMultipartUploadCommand } = await s3Sdk()
        const client = await s3Client(url.scheme === "gs" ? "gs" : "s3")
        const done = await client.send(
          new CompleteMultipartUploadCommand({
            Bucket: url.bucket,
            Key: joinKey(url.prefix, file.path),
            UploadId: landing.uploadId,
            MultipartUpload: { Parts: [...landing.parts] }
          })
        )
        return done.ETag
      })
    }
    case "Blocks": {
      const url = parseStoreUrl(dir)!
      return azureRequest(
        `${dir}/${file.path}`,
        "commit the blocks of",
        () => commitBlocks(url, file.path, landing.blockIds)
      )
    }
  }
}

const storeRequest = <A>(location: string, doing: string, run: () => Promise<A>): Effect.Effect<A, SinkError> =>
  Effect.tryPromise({
    try: run,
    catch: (cause) => new SinkError({ ...describeStoreFailure(location, doing, cause), cause })
  })

const errnoCode = (e: unknown) => (e as NodeJS.ErrnoException)?.code

/** Makes a new name in `dir` durable. Best effort: some file systems cannot fsync a directory. */
const fsyncDir = async (dir: string) => {
  try {
    const handle = await fs.open(dir, "r")
    await handle.sync().finally(() => handle.close())
  } catch {
    // the name is there, only not yet durable
  }
}

/** Names this process's temporary files: a write killed mid-way leaves one, which a later write of the same file on this host removes. */
const WRITER = `${os.hostname()}-${process.pid}`

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return errnoCode(e) === "EPERM"
  }
}

/**
 * Removes the temporary files of `file` that writers killed mid-way (SIGKILL, a pod evicted) left on
 * this host: those of processes no longer running. Another host's, or a running writer's, stay.
 */
const removeOrphanedTemps = async (file: string) => {
  const dir = path.dirname(file)
  const prefix = `${path.basename(file)}.${os.hostname()}-`
  for (const name of await fs.readdir(dir).catch(() => [] as Array<string>)) {
    if (!name.startsWith(prefix) || !name.endsWith(".partial")) continue
    const pid = Number(name.slice(prefix.length).split(".")[0])
    if (Number.isInteger(pid) && !isAlive(pid)) await fs.rm(path.join(dir, name), { force: true })
  }
}

const isMissingFile = (e: unknown) => errnoCode(e) === "ENOENT" || errnoCode(e) === "ENOTDIR"

/**
 * Writes `content` to a temporary file beside `file` (unique per writer: two runs may write one file
 * at once), flushed to disk, and hands it to `place`; the temporary file is gone afterwards, whatever
 * happened (a full disk leaves nothing half-written behind).
 */
const viaTemp = async <A>(file: string, content: string | Uint8Array, place: (temp: string) => Promise<A>) => {
  await fs.mkdir(path.dirname(file), { recursive: true })
  await removeOrphanedTemps(file)
  const temp = `${file}.${WRITER}.${randomBytes(4).toString("hex")}.partial`
  try {
    const handle = await fs.open(temp, "w")
    try {
      await handle.writeFile(content)
      await handle.sync()
    } finally {
      await handle.close()
    }
    return await place(temp)
  } finally {
    await fs.rm(temp, { force: true })
  }
}

const local = (root: string, name: string): Destination => {
  const at = (key: string) => (key === "" ? root : path.join(root, ...key.split("/")))
  const attempt = <A>(key: string, doing: string, run: () => Promise<A>) =>
    Effect.tryPromise({ try: run, catch: (cause) => fromCause(at(key), doing, cause) })
  return {
    name,
    remote: false,
    at,
    uri: (key) => `file://${path.resolve(at(key))}`,
    read: (key) =>
      attempt(
        key,
        "read",
        () =>
          fs.readFile(at(key), "utf8").then(Option.some, (e) => (isMissingFile(e) ? Option.none() : Promise.reject(e)))
      ),
    readBytes: (key) =>
      attempt(
        key,
        "read",
        () =>
          fs.readFile(at(key)).then(
            (bytes) => Option.some<Uint8Array>(bytes),
            (e) => (isMissingFile(e) ? Option.none<Uint8Array>() : Promise.reject(e))
          )
      ),
    readRange: (key, start, end) =>
      attempt(key, "read", async () => {
        const handle = await fs.open(at(key), "r")
        try {
          const bytes = new Uint8Array(end - start)
          let done = 0
          while (done < bytes.length) {
            const { bytesRead } = await handle.read(bytes, done, bytes.length - done, start + done)
            if (bytesRead === 0) throw new Error(`the file ends before byte ${start + done}`)
            done += bytesRead
          }
          return bytes
        } finally {
          await handle.close()
        }
      }),
    write: (key, content) => attempt(key, "write", () => viaTemp(at(key), content, (temp) => fs.rename(temp, at(key)))),
    create: (key, content) =>
      attempt(key, "create", () =>
        viaTemp(at(key), content, async (temp) => {
          // link() fails when the name exists: exclusive, and the file appears complete.
          const created = await fs.link(temp, at(key)).then(
            () => true,
            (e) => (errnoCode(e) === "EEXIST" ? false : Promise.reject(e))
          )
          if (created) await fsyncDir(path.dirname(at(key)))
          return created
        })),
    stat: (key) =>
      attempt(key, "read", () =>
        fs.stat(at(key)).then(
          (s) => Option.some<Entry>({ name: path.basename(key), dir: s.isDirectory(), size: s.size }),
          (e) => (isMissingFile(e) ? Option.none<Entry>() : Promise.reject(e))
        )),
    list: (dir) =>
      attempt(dir, "list", async () => {
        const entries = await fs.readdir(at(dir), { withFileTypes: true }).catch((
          e
        ) => (isMissingFile(e) ? [] : Promise.reject(e)))
        const listed: Array<Entry> = []
        for (const entry of entries) {
          if (entry.isDirectory()) listed.push({ name: entry.name, dir: true, size: 0 })
          else {
            const size = await fs.stat(path.join(at(dir), entry.name)).then((s) => s.size, () => undefined)
            if (size !== undefined) listed.push({ name: entry.name, dir: false, size })
          }
        }
        return listed
      }),
    remove: (keys) =>
      attempt(
        keys[0] ?? "",
        "remove",
        async () => void (await Promise.all(keys.map((key) => fs.rm(at(key), { force: true }))))
      ),
    removeAll: (dir) => attempt(dir, "remove", () => fs.rm(at(dir), { recursive: true, force: true })),
    abortUploads: () => Effect.succeed(0),
    pruneEmpty: (dir) =>
      Effect.promise(async () => {
        const top = path.resolve(root)
        for (let d = path.resolve(at(dir)); d.startsWith(top + path.sep); d = path.dirname(d)) {
          if (!(await fs.rmdir(d).then(() => true, () => false))) break
        }
      })
  }
}

type S3 = Awaited<ReturnType<typeof s3Client>>
const sdk = s3Sdk

/** GCS's XML API takes no multi-object delete: its objects are deleted one request each (free of charge on GCS). */
const GCS_DELETES_AT_ONCE = 16

/** A bucket of an S3-API store (S3 and S3-compatible stores, or GCS's XML API) as a Destination. */
const store = (name: string, url: StoreUrl, flavour: S3Flavour, client: S3): Destination => {
  const key = (k: string) => joinKey(url.prefix, k)
  const at = (k: string) => `${formatStoreUrl(url)}${k === "" ? "" : `/${k}`}`
  const Bucket = url.bucket
  const isMissing = (e: unknown) => {
    const code = (e as { name?: string; Code?: string })?.Code ?? (e as { name?: string })?.name
    return code === "NoSuchKey" || code === "NotFound" ||
      ((e as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 404 && code !== "NoSuchBucket")
  }
  /** Every object below `dir` (recursively), page by page. */
  const everything = async (dir: string, each: (keys: ReadonlyArray<string>) => Promise<void>) => {
    const { ListObjectsV2Command } = await sdk()
    let ContinuationToken: string | undefined
    do {
      const page = await client.send(
        new ListObjectsV2Command({
          Bucket,
          Prefix: `${key(dir)}/`,
          ...(ContinuationToken === undefined ? {} : { ContinuationToken })
        })
      )
      const keys = (page.Contents ?? []).map((o) => o.Key!).filter((k) => k !== undefined)
      if (keys.length > 0) await each(keys)
      ContinuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined
    } while (ContinuationToken !== undefined)
  }
  const deleteKeys = async (keys: ReadonlyArray<string>) => {
    const { DeleteObjectCommand, DeleteObjectsCommand } = await sdk()
    if (flavour === "gs") {
      return eachLimited(keys, GCS_DELETES_AT_ONCE, async (Key) => {
        await client.send(new DeleteObjectCommand({ Bucket, Key }))
      })
    }
    for (let i = 0; i < keys.length; i += 1000) {
      const done = await client.send(
        new DeleteObjectsCommand({
          Bucket,
          Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true }
        })
      )
      const failed = done.Errors?.[0]
      if (failed !== undefined) {
        throw Object.assign(new Error(failed.Message ?? "delete failed"), { name: failed.Code ?? "Error" })
      }
    }
  }
  const get = async (k: string, Range?: string) => {
    const { GetObjectCommand } = await sdk()
    try {
      const got = await client.send(
        new GetObjectCommand({ Bucket, Key: key(k), ...(Range === undefined ? {} : { Range }) })
      )
      return got.Body!
    } catch (e) {
      if (isMissing(e)) return undefined
      throw e
    }
  }
  const put = async (k: string, content: string | Uint8Array, createOnly = false) => {
    const { PutObjectCommand } = await sdk()
    const ContentType = typeof content === "string" ? "application/json" : "application/octet-stream"
    const command = new PutObjectCommand({
      Bucket,
      Key: key(k),
      Body: content,
      ContentType,
      ...(createOnly && flavour === "s3" ? { IfNoneMatch: "*" } : {})
    })
    if (createOnly && flavour === "gs") {
      // GCS's XML API honours If-None-Match on reads only; its create-only condition is this (412 when the object exists).
      command.middlewareStack.add((next) => (args) => {
        ;(args.request as { headers: Record<string, string> }).headers["x-goog-if-generation-match"] = "0"
        return next(args)
      }, { step: "build" })
    }
    await client.send(command)
  }
  return {
    name,
    remote: true,
    at,
    uri: at,
    read: (k) =>
      storeRequest(at(k), "read", async () => {
        const body = await get(k)
        return body === undefined ? Option.none() : Option.some(await body.transformToString("utf8"))
      }),
    readBytes: (k) =>
      storeRequest(at(k), "read", async () => {
        const body = await get(k)
        return body === undefined ? Option.none() : Option.some(await body.transformToByteArray())
      }),
    readRange: (k, start, end) =>
      storeRequest(at(k), "read", async () => {
        const body = await get(k, `bytes=${start}-${end - 1}`)
        if (body === undefined) throw Object.assign(new Error("no such object"), { name: "NoSuchKey" })
        const bytes = await body.transformToByteArray()
        if (bytes.length !== end - start) {
          throw new Error(`expected ${end - start} bytes from ${start}, got ${bytes.length}`)
        }
        return bytes
      }),
    write: (k, content) => storeRequest(at(k), "write", () => put(k, content)),
    create: (k, content) =>
      storeRequest(at(k), "create", () =>
        put(k, content, true).then(
          () => true,
          (e) => {
            // 412: the key exists; 409: another conditional write of the key is in progress (S3).
            const status = (e as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode
            if (status === 412 || status === 409) return false
            throw e
          }
        )),
    stat: (k) =>
      storeRequest(at(k), "read", async () => {
        const { HeadObjectCommand } = await sdk()
        try {
          const head = await client.send(new HeadObjectCommand({ Bucket, Key: key(k) }))
          return Option.some<Entry>({
            name: k.slice(k.lastIndexOf("/") + 1),
            dir: false,
            size: head.ContentLength ?? 0,
            etag: head.ETag
          })
        } catch (e) {
          if (isMissing(e)) return Option.none<Entry>()
          throw e
        }
      }),
    list: (dir) =>
      storeRequest(at(dir), "list", async () => {
        const { ListObjectsV2Command } = await sdk()
        const prefix = key(dir) === "" ? "" : `${key(dir)}/`
        const listed: Array<Entry> = []
        let ContinuationToken: string | undefined
        do {
          const page = await client.send(
            new ListObjectsV2Command({
              Bucket,
              Prefix: prefix,
              Delimiter: "/",
              ...(ContinuationToken === undefined ? {} : { ContinuationToken })
            })
          )
          for (const p of page.CommonPrefixes ?? []) {
            listed.push({ name: p.Prefix!.slice(prefix.length).replace(/\/$/, ""), dir: true, size: 0 })
          }
          for (const o of page.Contents ?? []) {
            listed.push({ name: o.Key!.slice(prefix.length), dir: false, size: o.Size ?? 0, etag: o.ETag })
          }
          ContinuationToken = page.IsTruncated === true ? page.NextContinuationToken : undefined
        } while (ContinuationToken !== undefined)
        return listed.filter((e) => e.name !== "")
      }),
    remove: (keys) =>
      keys.length === 0 ? Effect.void : storeRequest(at(keys[0]!), "remove", () => deleteKeys(keys.map(key))),
    removeAll: (dir) => storeRequest(at(dir), "remove", () => everything(dir, deleteKeys)),
    abortUploads: (dir) =>
      storeRequest(at(dir), "abort the unfinished uploads below", async () => {
        const { AbortMultipartUploadCommand, ListMultipartUploadsCommand } = await sdk()
        let aborted = 0
        let KeyMarker: string | undefined
        let UploadIdMarker: string | undefined
        do {
          const page = await client.send(
            new ListMultipartUploadsCommand({
              Bucket,
              Prefix: `${key(dir)}/`,
              ...(KeyMarker === undefined ? {} : { KeyMarker, UploadIdMarker })
            })
          ).catch((e) => {
            // A store without the listing (some S3 look-alikes): the bucket's lifecycle rule has to do it.
            const code = (e as { name?: string; Code?: string })?.Code ?? (e as { name?: string })?.name
            if (code === "NotImplemented" || code === "MethodNotAllowed") return undefined
            throw e
          })
          if (page === undefined) return aborted
          for (const u of page.Uploads ?? []) {
            await client.send(new AbortMultipartUploadCommand({ Bucket, Key: u.Key!, UploadId: u.UploadId! }))
            aborted++
          }
          KeyMarker = page.IsTruncated === true ? page.NextKeyMarker : undefined
          UploadIdMarker = page.NextUploadIdMarker
        } while (KeyMarker !== undefined)
        return aborted
      }),
    pruneEmpty: () => Effect.void
  }
}

export { isObjectStore }
