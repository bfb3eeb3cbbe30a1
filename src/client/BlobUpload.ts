import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { createHash, type Hash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pipeline } from "node:stream/promises"
import { createGzip } from "node:zlib"
import { MultipartLinks, MultipartStatus } from "../domain/Multipart.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { BlobApi, type BlobShape, VolatileBlobApi } from "./BlobApi.ts"
import { ApiError, BlobIntegrityError, LocalFileError, redactUrl, ResponseDecodeError } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/**
 * Files into blobs (blob API v1, volatile blob API v1), read from disk as they are sent, so memory
 * stays flat whatever the file's size. Below SINGLE_PUT_LIMIT stored bytes a blob goes in one PUT
 * with `X-HERE-Digest`, so the service checks what it received; from there on (and whenever the
 * service answers a PUT with 413) through a multipart upload: parts of PART_BYTES, PARTS_IN_FLIGHT at
 * a time, each retried on its own, then completed and its status awaited. Volatile layers take PUT
 * only. A 409 (the handle exists: a retried request whose first attempt reached the service) is
 * success when the blob under the handle is this one, byte for byte, and BlobIntegrityError when not.
 */

/** Stored bytes from which a blob goes through a multipart upload (the platform's advice: one PUT below 50 MB). */
export const SINGLE_PUT_LIMIT = 50_000_000
/** Bytes per part (at least the 5 MiB the platform asks of every part but the last). */
export const PART_BYTES = 8 * 1024 * 1024
/** Parts of one upload on the wire at once. */
export const PARTS_IN_FLIGHT = 4
/** How long a completed multipart upload may stay `processing` before the upload gives up on it. */
const PROCESSING_LIMIT = "10 minutes"

export type DigestAlgorithm = "sha1" | "sha256" | "md5"

/** Where a blob goes: the API (blob for versioned and index layers, volatile-blob), catalog, layer and new data handle. */
export interface BlobTarget {
  readonly api: "blob" | "volatile-blob"
  readonly hrn: string
  readonly layer: string
  readonly dataHandle: string
}

export interface FileUploadOptions {
  /** The layer's content type. */
  readonly contentType: string
  /** Store the file gzip-compressed (a layer whose content encoding is gzip). */
  readonly gzip: boolean
  /** The layer's digest, computed over the file's bytes (the partition's `checksum`). */
  readonly checksum?: DigestAlgorithm | undefined
}

/** What the partition's metadata says about an uploaded file. */
export interface UploadedFile {
  readonly dataSize: number
  readonly compressedDataSize?: number
  readonly checksum?: string
}

export type UploadFailure = LookupFailure | ResponseDecodeError | BlobIntegrityError | LocalFileError

export interface BlobUploadsShape {
  /** Uploads `file` as the blob `target` (a data handle no one has used). */
  readonly uploadFile: (
    target: BlobTarget,
    file: string,
    options: FileUploadOptions
  ) => Effect.Effect<UploadedFile, UploadFailure>
}

/**
 * The bytes to store, in a file (the one given, or its gzip in a temporary directory), and their
 * SHA-256 when a PUT sends it (a multipart upload does without: hashing costs a pass over the bytes).
 */
interface Staged {
  readonly path: string
  readonly size: number
  readonly sha256: string | undefined
}

const hashing = (hashes: ReadonlyArray<Hash | undefined>, count: (n: number) => void) =>
  async function*(chunks: AsyncIterable<Buffer>) {
    for await (const chunk of chunks) {
      count(chunk.byteLength)
      for (const hash of hashes) hash?.update(chunk)
      yield chunk
    }
  }

const unreadable = (file: string) => (e: unknown) =>
  new LocalFileError({ path: file, reason: e instanceof Error ? e.message : String(e) })

const readFile = (file: string) => fs.createReadStream(file, { highWaterMark: 1024 * 1024 })

/** Feeds a file to `hashes` through one reused buffer (no allocation per chunk); its length. */
const hashFile = async (file: string, hashes: ReadonlyArray<Hash | undefined>) => {
  const handle = await fs.promises.open(file, "r")
  try {
    const buffer = Buffer.allocUnsafe(1024 * 1024)
    let size = 0
    for (let n; (n = (await handle.read(buffer, 0, buffer.byteLength, null)).bytesRead) > 0; size += n) {
      for (const hash of hashes) hash?.update(buffer.subarray(0, n))
    }
    return size
  } finally {
    await handle.close()
  }
}

/** The SHA-256 of a file's bytes. */
const sha256Of = (file: string) =>
  Effect.tryPromise({
    try: async () => {
      const hash = createHash("sha256")
      await hashFile(file, [hash])
      return hash.digest("hex")
    },
    catch: unreadable(file)
  })

/**
 * Reads `file` once: its size and checksum, and the bytes to store (gzip: written to a temporary file,
 * removed with the scope) with their SHA-256 when `digest` says that size needs it.
 */
const stage = (file: string, options: FileUploadOptions, digest: (storedSize: number) => boolean) =>
  Effect.gen(function*() {
    const checksum = options.checksum === undefined ? undefined : createHash(options.checksum)
    const sha256 = createHash("sha256")
    let dataSize = 0
    let size = 0
    let staged: Staged
    if (options.gzip) {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-upload-"))),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      const stored = path.join(dir, "blob.gz")
      yield* Effect.tryPromise({
        try: () =>
          pipeline(
            readFile(file),
            hashing([checksum], (n) => (dataSize += n)),
            createGzip(),
            hashing([sha256], (n) => (size += n)),
            fs.createWriteStream(stored)
          ),
        catch: unreadable(file)
      })
      staged = { path: stored, size, sha256: sha256.digest("hex") }
    } else {
      const expected = yield* Effect.try({ try: () => fs.statSync(file).size, catch: unreadable(file) })
      const hashes = digest(expected) ? [checksum, sha256] : [checksum]
      dataSize = size = yield* Effect.tryPromise({ try: () => hashFile(file, hashes), catch: unreadable(file) })
      staged = { path: file, size, sha256: hashes.length === 2 ? sha256.digest("hex") : undefined }
    }
    const uploaded: UploadedFile = {
      dataSize,
      ...(options.gzip ? { compressedDataSize: size } : {}),
      ...(checksum === undefined ? {} : { checksum: checksum.digest("hex") })
    }
    return { staged, uploaded }
  })

/**
 * `length` bytes of the file from `start` as a request body, read as they are sent: an iterable that
 * opens the file afresh for each attempt of the request. A streamed body also keeps undici's
 * first-byte timeout from counting the upload itself (it restarts while the body is being written).
 */
const withFileBody = (staged: Staged, start: number, length: number, contentType: string) =>
  length === 0
    ? HttpClientRequest.bodyUint8Array(new Uint8Array(0), contentType)
    : HttpClientRequest.setBody(
      HttpBody.raw({
        [Symbol.asyncIterator]: () =>
          fs.createReadStream(staged.path, { start, end: start + length - 1, highWaterMark: 1024 * 1024 })[
            Symbol.asyncIterator
          ]()
      }, { contentType, contentLength: length })
    )

/** Volatile layers take blobs in one PUT only (their API has no multipart upload). */
const goesInParts = (target: BlobTarget, size: number) => target.api === "blob" && size >= SINGLE_PUT_LIMIT

const isStatus = (status: number) => (e: unknown): e is ApiError => e instanceof ApiError && e.status === status

export class BlobUploads extends Context.Tag("catalog-export/client/BlobUploads")<BlobUploads, BlobUploadsShape>() {
  static readonly layer: Layer.Layer<BlobUploads, never, ApiClient | Lookup | BlobApi | VolatileBlobApi> = Layer
    .effect(
      BlobUploads,
      Effect.gen(function*() {
        const api = yield* ApiClient
        const lookup = yield* Lookup
        const readers: Record<BlobTarget["api"], BlobShape> = {
          blob: yield* BlobApi,
          "volatile-blob": yield* VolatileBlobApi
        }

        const blobUrl = (target: BlobTarget) =>
          Effect.map(
            lookup.baseUrl({ api: target.api, version: "v1", hrn: target.hrn }),
            (root) => joinUrl(root, `/layers/${segment(target.layer)}/data/${segment(target.dataHandle)}`)
          )

        const integrity = (target: BlobTarget, reason: string) =>
          new BlobIntegrityError({ hrn: target.hrn, layer: target.layer, dataHandle: target.dataHandle, reason })

        /**
         * After a 409: whether the blob under the handle is `staged`, byte for byte (the ETag when the
         * service gives the bytes' SHA-256, as the local one does, else a download). The platform may
         * take a moment before a blob it took is readable, so a missing one is asked for again.
         */
        const verifyOwn = (target: BlobTarget, staged: Staged) =>
          Effect.gen(function*() {
            const reader = readers[target.api]
            const head = reader.head(target.hrn, target.layer, target.dataHandle)
            let info = yield* head
            for (let asked = 1; !info.exists && asked < 10; asked++) {
              info = yield* Effect.zipRight(Effect.sleep("1 second"), head)
            }
            if (!info.exists) {
              return yield* integrity(
                target,
                "the service answered 409 (the handle exists) but serves no blob under it"
              )
            }
            if (info.contentLength !== undefined && info.contentLength !== staged.size) {
              return yield* integrity(
                target,
                `it already holds another blob (${info.contentLength} bytes, not the ${staged.size} bytes uploaded)`
              )
            }
            const sha256 = staged.sha256 ?? (yield* sha256Of(staged.path))
            if (info.etag !== `"${sha256}"`) {
              const digest = yield* Stream.runFold(
                reader.getStream(target.hrn, target.layer, target.dataHandle),
                createHash("sha256"),
                (hash, chunk) => hash.update(chunk)
              )
              if (digest.digest("hex") !== sha256) {
                return yield* integrity(target, "it already holds another blob of the same size")
              }
            }
            yield* Effect.logInfo("blob already stored by an earlier attempt; counted as uploaded").pipe(
              Effect.annotateLogs({ layer: target.layer, dataHandle: target.dataHandle })
            )
          })

        const put = (target: BlobTarget, staged: Staged, contentType: string, encoding: string | undefined) =>
          Effect.gen(function*() {
            const sha256 = staged.sha256 ?? (yield* sha256Of(staged.path))
            let request = HttpClientRequest.put(yield* blobUrl(target)).pipe(
              withFileBody(staged, 0, staged.size, contentType),
              HttpClientRequest.setHeader("x-here-digest", `SHA256:${sha256}`)
            )
            if (encoding !== undefined) request = HttpClientRequest.setHeader(request, "content-encoding", encoding)
            yield* api.discard(request)
          }).pipe(Effect.catchIf(isStatus(409), () => verifyOwn(target, staged)))

        const uploadPart = (href: string, staged: Staged, number: number, contentType: string) => {
          const start = (number - 1) * PART_BYTES
          const url = new URL(href)
          url.searchParams.set("partNumber", String(number))
          const request = HttpClientRequest.post(url.toString()).pipe(
            withFileBody(staged, start, Math.min(PART_BYTES, staged.size - start), contentType)
          )
          return Effect.flatMap(api.discard(request), (response) => {
            const etag = response.headers["etag"]
            return etag === undefined
              ? new ResponseDecodeError({
                method: "POST",
                url: redactUrl(href),
                status: response.status,
                reason: `part ${number} was answered without an ETag`
              })
              : Effect.succeed({ etag, number })
          })
        }

        /** Polls the status link until the upload is no longer `processing` (backing off up to 5 s between polls). */
        const awaitStored = (target: BlobTarget, href: string) =>
          Effect.gen(function*() {
            const poll = api.json(HttpClientRequest.get(href), MultipartStatus)
            const deadline = Date.now() + Duration.toMillis(PROCESSING_LIMIT)
            let { status } = yield* poll
            for (let wait = 100; status === "processing" && Date.now() < deadline; wait = Math.min(wait * 2, 5000)) {
              status = (yield* Effect.zipRight(Effect.sleep(wait), poll)).status
            }
            if (status === "failed") {
              return yield* integrity(target, "the service reports that the multipart upload failed")
            }
            if (status === "processing") {
              return yield* integrity(target, `the multipart upload was still processing after ${PROCESSING_LIMIT}`)
            }
          })

        const multipart = (target: BlobTarget, staged: Staged, contentType: string, encoding: string | undefined) =>
          Effect.gen(function*() {
            const request = HttpClientRequest.post(`${yield* blobUrl(target)}/multiparts`).pipe(
              HttpClientRequest.bodyUnsafeJson({
                contentType,
                ...(encoding === undefined ? {} : { contentEncoding: encoding })
              })
            )
            const started = yield* api.json(request, MultipartLinks).pipe(
              Effect.map(Option.some),
              Effect.catchIf(isStatus(409), () => Effect.as(verifyOwn(target, staged), Option.none()))
            )
            if (Option.isNone(started)) return
            const { links } = started.value
            yield* Effect.gen(function*() {
              const count = Math.max(1, Math.ceil(staged.size / PART_BYTES))
              const parts = yield* Effect.forEach(
                Array.from({ length: count }, (_, i) => i + 1),
                (number) => uploadPart(links.uploadPart.href, staged, number, contentType),
                { concurrency: PARTS_IN_FLIGHT }
              )
              const complete = HttpClientRequest.put(links.complete.href).pipe(
                HttpClientRequest.bodyUnsafeJson({ parts })
              )
              // A 409 here: the handle got a blob meanwhile, this upload's own only if its bytes are these.
              const completed = yield* api.discard(complete).pipe(
                Effect.as(true),
                Effect.catchIf(isStatus(409), () => Effect.as(verifyOwn(target, staged), false))
              )
              if (completed) yield* awaitStored(target, links.status.href)
            }).pipe(
              // Nothing of a cancelled upload is readable; one abandoned (a killed process) expires on its own.
              Effect.onError(() => Effect.ignore(api.discard(HttpClientRequest.del(links.delete.href))))
            )
          })

        const upload = (target: BlobTarget, staged: Staged, options: FileUploadOptions) => {
          const encoding = options.gzip ? "gzip" : undefined
          if (goesInParts(target, staged.size)) return multipart(target, staged, options.contentType, encoding)
          if (target.api === "volatile-blob") return put(target, staged, options.contentType, encoding)
          // A service that takes smaller bodies than the platform's advice (413) still takes the blob in parts.
          return put(target, staged, options.contentType, encoding).pipe(
            Effect.catchIf(isStatus(413), () => multipart(target, staged, options.contentType, encoding))
          )
        }

        const uploadFile = Effect.fn("BlobUploads.uploadFile")(
          function*(target: BlobTarget, file: string, options: FileUploadOptions) {
            const { staged, uploaded } = yield* stage(file, options, (size) => !goesInParts(target, size))
            yield* upload(target, staged, options)
            return uploaded
          },
          Effect.scoped
        )

        return BlobUploads.of({ uploadFile })
      })
    )
}
