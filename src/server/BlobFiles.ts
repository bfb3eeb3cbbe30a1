import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"

/**
 * Blob bytes, content-addressed by SHA-256, appended to pack files `<dir>/packs/pack-<n>.dat`
 * (rolled at PACK_BYTES) and indexed in SQLite. One file per blob made a million-partition seed
 * take minutes to create and to delete; a pack is one open file descriptor and one `pread` per read.
 * Names are numbers chosen here, never taken from a request, so no data handle can reach a path.
 */
export interface BlobFilesShape {
  readonly put: (bytes: Uint8Array) => Effect.Effect<Stored>
  /** Stores many blobs with two queries (the seed's path). */
  readonly putMany: (blobs: ReadonlyArray<Uint8Array>) => Effect.Effect<ReadonlyArray<Stored>>
  /**
   * Stores the concatenation of files (an upload's parts, in order), streamed: never more than one
   * chunk in memory, other writes going on meanwhile. `sha256`, when the caller already knows it,
   * lets known content be found without copying it.
   */
  readonly putFiles: (files: ReadonlyArray<string>, sha256?: string) => Effect.Effect<Stored>
  readonly read: (sha256: string) => Effect.Effect<Uint8Array | undefined>
  /** Reads content already located (by a query that joined `contents`). */
  readonly readAt: (location: Location) => Uint8Array
  /** Forgets the content; its bytes stay in the pack until the pack is rewritten. */
  readonly remove: (sha256: string) => Effect.Effect<void>
}

export class BlobFiles extends Context.Tag("catalog-export/server/BlobFiles")<BlobFiles, BlobFilesShape>() {
  static readonly layer = (dataDir: string) => Layer.scoped(BlobFiles, make(dataDir))
}

export interface Stored {
  readonly sha256: string
  readonly size: number
}

export const PACK_BYTES = 1024 * 1024 * 1024

const packName = (n: number) => `pack-${String(n).padStart(6, "0")}.dat`

/** Where content lives in the packs (the `contents` table, db/Migrations.ts). */
export type Location = {
  readonly pack: number
  readonly offset: number
  readonly length: number
}

/** Bytes read and written at a time when a blob is copied from files into a pack. */
const COPY_CHUNK = 4 * 1024 * 1024

const read = promisify(fs.read)
const write = promisify(fs.write)

export const make = (dataDir: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dir = path.join(dataDir, "packs")
    fs.mkdirSync(dir, { recursive: true })
    const existing = fs.readdirSync(dir).map((f) => /^pack-(\d+)\.dat$/.exec(f)).filter((m) => m !== null).map((m) =>
      Number(m[1])
    )
    // One descriptor per pack for reads and writes alike. Writes are positional (no O_APPEND): a
    // streamed copy writes into the region it reserved while other blobs are appended after it.
    const fds = new Map<number, number>()
    const fdOf = (n: number) => {
      let fd = fds.get(n)
      if (fd === undefined) {
        fd = fs.openSync(path.join(dir, packName(n)), fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644)
        fds.set(n, fd)
      }
      return fd
    }
    let pack = existing.length === 0 ? 0 : Math.max(...existing)
    let size = fs.fstatSync(fdOf(pack)).size
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const fd of fds.values()) fs.closeSync(fd)
      })
    )

    const locate = (sha256: string) =>
      sql<Location>`SELECT pack, offset, length FROM contents WHERE sha256 = ${sha256}`.pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    // allocUnsafe takes small blobs from Node's buffer pool (a fresh ArrayBuffer per read costs more
    // than the read); every byte is overwritten, and a short read is refused rather than served.
    const readAt = (at: Location) => {
      const bytes = Buffer.allocUnsafe(at.length)
      if (at.length > 0 && fs.readSync(fdOf(at.pack), bytes, 0, at.length, at.offset) !== at.length) {
        throw new Error(`${packName(at.pack)} ends before byte ${at.offset + at.length}: the pack is damaged`)
      }
      return bytes
    }

    /**
     * Claims `length` bytes at the end of the current pack, starting a new one when they would pass
     * PACK_BYTES. Bytes claimed but never recorded in `contents` (a copy that failed, content that
     * turned out to be known) are dead space, like the bytes of removed content.
     */
    const reserve = (length: number): Location => {
      if (size > 0 && size + length > PACK_BYTES) {
        pack++
        size = 0
      }
      const offset = size
      size += length
      return { pack, offset, length }
    }

    const append = (bytes: Uint8Array): Location => {
      const at = reserve(bytes.byteLength)
      fs.writeSync(fdOf(at.pack), bytes, 0, bytes.byteLength, at.offset)
      return at
    }

    const putMany = (blobs: ReadonlyArray<Uint8Array>) =>
      Effect.gen(function*() {
        const stored = blobs.map((bytes) => ({
          sha256: createHash("sha256").update(bytes).digest("hex"),
          size: bytes.byteLength
        }))
        if (blobs.length === 0) return stored
        const known = new Set(
          (yield* sql<{ sha256: string }>`SELECT sha256 FROM contents WHERE ${
            sql.in("sha256", stored.map((s) => s.sha256))
          }`.pipe(Effect.orDie))
            .map((r) => r.sha256)
        )
        const rows: Array<Location & { sha256: string }> = []
        blobs.forEach((bytes, i) => {
          const { sha256 } = stored[i]!
          if (known.has(sha256)) return
          known.add(sha256)
          rows.push({ sha256, ...append(bytes) })
        })
        if (rows.length > 0) yield* sql`INSERT OR IGNORE INTO contents ${sql.insert(rows)}`.pipe(Effect.orDie)
        return stored
      })

    /** Copies the files one after the other into `at`; the bytes' SHA-256 unless the caller knows it. */
    const copyInto = async (files: ReadonlyArray<string>, at: Location, sha256: string | undefined) => {
      const hash = sha256 === undefined ? createHash("sha256") : undefined
      const buffer = Buffer.allocUnsafe(Math.min(COPY_CHUNK, Math.max(1, at.length)))
      const target = fdOf(at.pack)
      let position = at.offset
      for (const file of files) {
        const fd = fs.openSync(file, "r")
        try {
          for (;;) {
            const { bytesRead } = await read(fd, buffer, 0, buffer.byteLength, null)
            if (bytesRead === 0) break
            const chunk = buffer.subarray(0, bytesRead)
            hash?.update(chunk)
            for (let done = 0; done < bytesRead;) {
              done += (await write(target, chunk, done, bytesRead - done, position + done)).bytesWritten
            }
            position += bytesRead
          }
        } finally {
          fs.closeSync(fd)
        }
      }
      if (position !== at.offset + at.length) throw new Error(`${files.join(", ")} changed while being stored`)
      return hash?.digest("hex") ?? sha256!
    }

    const putFiles = (files: ReadonlyArray<string>, sha256?: string) =>
      Effect.gen(function*() {
        const length = files.reduce((n, file) => n + fs.statSync(file).size, 0)
        if (sha256 !== undefined && (yield* locate(sha256)) !== undefined) return { sha256, size: length }
        const at = reserve(length)
        const digest = yield* Effect.promise(() => copyInto(files, at, sha256))
        yield* sql`INSERT OR IGNORE INTO contents ${sql.insert({ sha256: digest, ...at })}`.pipe(Effect.orDie)
        return { sha256: digest, size: length }
      })

    return BlobFiles.of({
      put: (bytes) => Effect.map(putMany([bytes]), (stored) => stored[0]!),
      putMany,
      putFiles,
      read: (sha256) => Effect.map(locate(sha256), (at) => (at === undefined ? undefined : readAt(at))),
      readAt,
      remove: (sha256) => sql`DELETE FROM contents WHERE sha256 = ${sha256}`.pipe(Effect.asVoid, Effect.orDie)
    })
  })
