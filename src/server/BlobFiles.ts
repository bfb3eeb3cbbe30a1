import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Context, Effect, Layer } from "effect"

/**
 * Blob bytes in content-addressed files: `<dir>/blobs/<sha256[0:2]>/<sha256>`. Names are hex digests
 * computed here, never taken from a request, so no data handle can reach outside the directory.
 */
export interface BlobFilesShape {
  readonly put: (bytes: Uint8Array) => Effect.Effect<{ readonly sha256: string; readonly size: number }>
  readonly read: (sha256: string) => Effect.Effect<Uint8Array | undefined>
  readonly remove: (sha256: string) => Effect.Effect<void>
}

export class BlobFiles extends Context.Tag("catalog-export/server/BlobFiles")<BlobFiles, BlobFilesShape>() {
  static readonly layer = (dataDir: string) => Layer.sync(BlobFiles, () => make(dataDir))
}

const HEX64 = /^[0-9a-f]{64}$/

export const make = (dataDir: string): BlobFilesShape => {
  const root = path.join(dataDir, "blobs")
  const fileOf = (sha256: string) => {
    if (!HEX64.test(sha256)) throw new Error(`not a sha256 digest: ${sha256}`)
    return path.join(root, sha256.slice(0, 2), sha256)
  }
  return {
    put: (bytes) =>
      Effect.promise(async () => {
        const sha256 = createHash("sha256").update(bytes).digest("hex")
        const file = fileOf(sha256)
        const exists = await fs.stat(file).then(() => true, () => false)
        if (!exists) {
          await fs.mkdir(path.dirname(file), { recursive: true })
          const temp = `${file}.${randomBytes(6).toString("hex")}.tmp`
          await fs.writeFile(temp, bytes)
          await fs.rename(temp, file)
        }
        return { sha256, size: bytes.byteLength }
      }),
    read: (sha256) =>
      Effect.promise(() =>
        fs.readFile(fileOf(sha256)).then(
          (b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength),
          () => undefined
        )
      ),
    remove: (sha256) => Effect.promise(() => fs.rm(fileOf(sha256), { force: true }))
  }
}
