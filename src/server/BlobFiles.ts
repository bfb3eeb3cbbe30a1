import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

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

export const make = (dataDir: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dir = path.join(dataDir, "packs")
    fs.mkdirSync(dir, { recursive: true })
    const existing = fs.readdirSync(dir).map((f) => /^pack-(\d+)\.dat$/.exec(f)).filter((m) => m !== null).map((m) =>
      Number(m[1])
    )
    let pack = existing.length === 0 ? 0 : Math.max(...existing)
    let writer = fs.openSync(path.join(dir, packName(pack)), "a")
    let size = fs.fstatSync(writer).size
    const readers = new Map<number, number>()
    const reader = (n: number) => {
      let fd = readers.get(n)
      if (fd === undefined) {
        fd = fs.openSync(path.join(dir, packName(n)), "r")
        readers.set(n, fd)
      }
      return fd
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        fs.closeSync(writer)
        for (const fd of readers.values()) fs.closeSync(fd)
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
      if (at.length > 0 && fs.readSync(reader(at.pack), bytes, 0, at.length, at.offset) !== at.length) {
        throw new Error(`${packName(at.pack)} ends before byte ${at.offset + at.length}: the pack is damaged`)
      }
      return bytes
    }

    /** Appends to the current pack, starting a new one when it would pass PACK_BYTES. */
    const append = (bytes: Uint8Array): Location => {
      if (size > 0 && size + bytes.byteLength > PACK_BYTES) {
        fs.closeSync(writer)
        pack++
        writer = fs.openSync(path.join(dir, packName(pack)), "a")
        size = 0
      }
      const offset = size
      fs.writeSync(writer, bytes)
      size += bytes.byteLength
      return { pack, offset, length: bytes.byteLength }
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

    return BlobFiles.of({
      put: (bytes) => Effect.map(putMany([bytes]), (stored) => stored[0]!),
      putMany,
      read: (sha256) => Effect.map(locate(sha256), (at) => (at === undefined ? undefined : readAt(at))),
      readAt,
      remove: (sha256) => sql`DELETE FROM contents WHERE sha256 = ${sha256}`.pipe(Effect.asVoid, Effect.orDie)
    })
  })
