import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { MAX_PARTS, MIN_PART_BYTES, type MultipartStatus } from "../domain/Multipart.ts"
import { BlobFiles } from "./BlobFiles.ts"
import { BlobsRepo } from "./db/BlobsRepo.ts"
import { type UploadRow, UploadsRepo } from "./db/UploadsRepo.ts"
import { badRequest, conflict, type Reply } from "./Reply.ts"
import * as RequestBody from "./RequestBody.ts"

/**
 * Blob bodies on their way in, on disk: the parts of multipart uploads (routes/Multipart.ts) and the
 * body of a single PUT (routes/Blob.ts), under `<data>/uploads/`. A part is the file
 * `<token>/<number>.<etag>.part` (the ETag is random: hashing every part too would cost a pass over
 * the bytes); a part uploaded again under its number replaces the earlier one, whose ETag then no
 * longer completes the upload. Completing an
 * upload streams its parts, in order, into the blob packs (BlobFiles.putFiles); until then nothing
 * of it is readable. An upload untouched for `expiryMs` (default a day) is forgotten with its parts,
 * completed or not, when the next upload starts or the service starts.
 */

export const DEFAULT_UPLOAD_EXPIRY_MS = 24 * 60 * 60 * 1000

/** Upload tokens are chosen here (32 hex digits); a token from a request reaches a path only once it matched. */
export const UPLOAD_TOKEN = /^[0-9a-f]{32}$/
const ETAG = /^[0-9a-f]{32}$/

export interface CompletedPart {
  readonly etag: string
  readonly number: number
}

/** What the status link answers: `processing` until the upload's blob is stored. */
export type UploadStatus = typeof MultipartStatus.Type["status"]

export interface UploadsShape {
  /** A new file name for a single PUT's body; the caller removes it (leftovers go at the next start). */
  readonly scratchFile: () => string
  readonly start: (
    layerPk: number,
    dataHandle: string,
    contentType: string,
    contentEncoding: string | null
  ) => Effect.Effect<string>
  /** The upload `token` of this layer and data handle, if it is still there. */
  readonly find: (token: string, layerPk: number, dataHandle: string) => Effect.Effect<UploadRow | undefined>
  /** Streams the request's body in as part `number`; its ETag. */
  readonly putPart: (
    upload: UploadRow,
    number: number
  ) => Effect.Effect<string, Reply, HttpServerRequest.HttpServerRequest>
  /**
   * Stores the blob made of `parts` under the upload's data handle. A completion already done with
   * the same parts succeeds again; one running is joined. A refused one fails the upload.
   */
  readonly complete: (upload: UploadRow, parts: ReadonlyArray<CompletedPart>) => Effect.Effect<void, Reply>
  readonly status: (upload: UploadRow) => UploadStatus
  /** Forgets an upload that is not completed, with its parts. */
  readonly cancel: (upload: UploadRow) => Effect.Effect<void, Reply>
}

export class Uploads extends Context.Tag("catalog-export/server/Uploads")<Uploads, UploadsShape>() {
  static readonly layer = (dataDir: string, expiryMs: number) => Layer.effect(Uploads, make(dataDir, expiryMs))
}

const unquote = (etag: string) => etag.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1")

/** A completion's parts in a canonical form (by number, ETags unquoted), to recognise the same list again. */
const partList = (parts: ReadonlyArray<CompletedPart>) =>
  JSON.stringify(
    [...parts].sort((a, b) => a.number - b.number).map((p) => ({ number: p.number, etag: unquote(p.etag) }))
  )

const make = (dataDir: string, expiryMs: number) =>
  Effect.gen(function*() {
    const repo = yield* UploadsRepo
    const blobs = yield* BlobsRepo
    const files = yield* BlobFiles
    const root = path.join(dataDir, "uploads")
    fs.mkdirSync(root, { recursive: true })
    const dirOf = (token: string) => path.join(root, token)
    const completing = new Map<string, Deferred.Deferred<void, Reply>>()

    // Off the main thread: unlinking the parts of a large blob takes a while.
    const removeParts = (token: string) =>
      Effect.promise(() => fs.promises.rm(dirOf(token), { recursive: true, force: true }))

    const forget = (token: string) => Effect.zipRight(repo.remove(token), removeParts(token))

    const sweep = Effect.gen(function*() {
      const expired = yield* repo.untouchedSince(Date.now() - expiryMs)
      for (const token of expired) if (!completing.has(token)) yield* forget(token)
    })

    // At start no body is on its way in: scratch files and directories of forgotten uploads are leftovers.
    const known = new Set(yield* repo.tokens)
    for (const entry of fs.readdirSync(root)) {
      if (!known.has(entry)) fs.rmSync(path.join(root, entry), { recursive: true, force: true })
    }
    yield* sweep

    const partFiles = (token: string) =>
      fs.readdirSync(dirOf(token)).map((name) => /^(\d+)\.([0-9a-f]{32})\.part$/.exec(name)).filter((m) => m !== null)

    const putPart = (upload: UploadRow, number: number) =>
      Effect.gen(function*() {
        const dir = dirOf(upload.token)
        const etag = randomBytes(16).toString("hex")
        const incoming = path.join(dir, `${number}.${etag}.tmp`)
        yield* RequestBody.toFile(incoming, [], false)
        fs.renameSync(incoming, path.join(dir, `${number}.${etag}.part`))
        for (const m of partFiles(upload.token)) {
          if (Number(m[1]) === number && m[2] !== etag) fs.rmSync(path.join(dir, m[0]), { force: true })
        }
        yield* repo.touch(upload.token, Date.now())
        return etag
      })

    /** The part files to concatenate, or why the list cannot make a blob. */
    const filesOf = (upload: UploadRow, parts: ReadonlyArray<CompletedPart>): Array<string> | Reply => {
      const refused = (error: string) => badRequest("parts", error)
      if (parts.length === 0) return refused("the list of parts is empty")
      if (parts.length > MAX_PARTS) return refused(`a multipart upload has at most ${MAX_PARTS} parts`)
      const sorted = [...parts].sort((a, b) => a.number - b.number)
      const out: Array<string> = []
      for (const [i, part] of sorted.entries()) {
        if (part.number !== i + 1) {
          return refused(`parts are numbered 1 to ${parts.length} without gaps or repeats; got ${part.number}`)
        }
        const etag = unquote(part.etag)
        const file = path.join(dirOf(upload.token), `${part.number}.${etag}.part`)
        if (!ETAG.test(etag) || !fs.existsSync(file)) {
          return refused(`no part ${part.number} with ETag ${part.etag} was uploaded (or it was replaced since)`)
        }
        const size = fs.statSync(file).size
        if (i < sorted.length - 1 && size < MIN_PART_BYTES) {
          return refused(
            `part ${part.number} has ${size} bytes; every part but the last needs at least ${MIN_PART_BYTES} bytes (5 MiB)`
          )
        }
        out.push(file)
      }
      return out
    }

    const fail = (upload: UploadRow, reply: Reply) =>
      Effect.gen(function*() {
        yield* repo.setState(upload.token, "failed", null, Date.now())
        yield* removeParts(upload.token)
        return yield* reply
      })

    const assemble = (upload: UploadRow, parts: ReadonlyArray<CompletedPart>) =>
      Effect.gen(function*() {
        const list = filesOf(upload, parts)
        if (!Array.isArray(list)) return yield* fail(upload, list)
        if ((yield* blobs.blob(upload.layer_pk, upload.data_handle)) !== undefined) {
          return yield* fail(
            upload,
            conflict("dataHandle", `data handle '${upload.data_handle}' already exists; blobs are immutable`)
          )
        }
        const stored = yield* files.putFiles(list)
        yield* blobs.putBlob(upload.layer_pk, upload.data_handle, stored.sha256, stored.size, upload.content_encoding)
        yield* repo.setState(upload.token, "completed", partList(parts), Date.now())
        yield* removeParts(upload.token)
      })

    const complete = (upload: UploadRow, parts: ReadonlyArray<CompletedPart>) =>
      Effect.gen(function*() {
        const running = completing.get(upload.token)
        if (running !== undefined) return yield* Deferred.await(running)
        if (upload.state === "completed") {
          if (upload.parts === partList(parts)) return
          return yield* conflict("parts", `multipart upload ${upload.token} was completed with other parts`)
        }
        if (upload.state === "failed") return yield* failedUpload(upload)
        const done = yield* Deferred.make<void, Reply>()
        completing.set(upload.token, done)
        // Runs to its end even when the caller goes away: a retried completion then finds it done.
        const exit = yield* Effect.exit(Effect.uninterruptible(assemble(upload, parts)))
        completing.delete(upload.token)
        yield* Deferred.done(done, exit)
        return yield* exit
      })

    const cancel = (upload: UploadRow) =>
      upload.state === "completed" || completing.has(upload.token)
        ? conflict("multipart", `multipart upload ${upload.token} is completed; it cannot be cancelled any more`)
        : forget(upload.token)

    return Uploads.of({
      scratchFile: () => path.join(root, `put-${randomBytes(12).toString("hex")}.tmp`),
      start: (layerPk, dataHandle, contentType, contentEncoding) =>
        Effect.gen(function*() {
          yield* sweep
          const token = randomBytes(16).toString("hex")
          fs.mkdirSync(dirOf(token))
          const now = Date.now()
          yield* repo.insert({
            token,
            layer_pk: layerPk,
            data_handle: dataHandle,
            content_type: contentType,
            content_encoding: contentEncoding,
            state: "open",
            parts: null,
            created: now,
            touched: now
          })
          return token
        }),
      find: (token, layerPk, dataHandle) =>
        Effect.map(
          repo.byToken(token),
          (row) => row !== undefined && row.layer_pk === layerPk && row.data_handle === dataHandle ? row : undefined
        ),
      putPart: (upload, number) =>
        upload.state !== "open" || completing.has(upload.token)
          ? failedUpload(upload)
          : putPart(upload, number),
      complete,
      status: (upload) =>
        completing.has(upload.token) ? "processing" : upload.state === "open" ? "processing" : upload.state,
      cancel
    })
  })

const failedUpload = (upload: UploadRow) =>
  conflict(
    "multipart",
    upload.state === "failed"
      ? `multipart upload ${upload.token} failed (its completion was refused); start a new upload`
      : `multipart upload ${upload.token} is completed or being completed; it takes no more parts`
  )
