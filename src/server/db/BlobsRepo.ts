import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findOne, run } from "./Database.ts"

/** A layer's blob: the content its data handle names. */
export const BlobRow = Schema.Struct({
  sha256: Schema.String,
  size: Schema.Number,
  content_encoding: Schema.NullOr(Schema.String)
})
export type BlobRow = typeof BlobRow.Type

const LayerAndHandle = Schema.Struct({ layerPk: Schema.Number, dataHandle: Schema.String })

/**
 * Data handles of layers and the content (by SHA-256) each refers to; the bytes are in BlobFiles.
 * A blob written by a publication is owned by the version that committed it (`owner_version`).
 */
export class BlobsRepo extends Context.Tag("catalog-export/server/BlobsRepo")<BlobsRepo, {
  readonly blob: (layerPk: number, dataHandle: string) => Effect.Effect<BlobRow | undefined>
  readonly putBlob: (
    layerPk: number,
    dataHandle: string,
    sha256: string,
    size: number,
    contentEncoding: string | null
  ) => Effect.Effect<void>
  /** Many blobs in one statement (the seed's path). */
  readonly putBlobs: (
    layerPk: number,
    blobs: ReadonlyArray<{ readonly handle: string; readonly sha256: string; readonly size: number }>,
    contentEncoding: string | null
  ) => Effect.Effect<void>
  readonly deleteBlob: (layerPk: number, dataHandle: string) => Effect.Effect<void>
  readonly contentInUse: (sha256: string) => Effect.Effect<boolean>
  /** Content digests (of those given) that no blob refers to any more. */
  readonly unusedContents: (digests: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
  /** Makes the blobs `handles` of replica `to` what they are in replica `from`; returns the contents it stopped using. */
  readonly copyBlobs: (from: number, to: number, handles: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
}>() {
  static readonly layer = Layer.effect(
    BlobsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const uses = (sha256: string) =>
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM blobs WHERE sha256 = ${sha256}`.pipe(
          Effect.map((rows) => rows[0]!.n),
          Effect.orDie
        )
      const blob = findOne({
        Request: LayerAndHandle,
        Result: BlobRow,
        execute: ({ dataHandle, layerPk }) =>
          sql`SELECT sha256, size, content_encoding FROM blobs WHERE layer_pk = ${layerPk} AND data_handle = ${dataHandle}`
      })
      return BlobsRepo.of({
        blob: (layerPk, dataHandle) => blob({ layerPk, dataHandle }),
        putBlob: (layerPk, dataHandle, sha256, size, contentEncoding) =>
          run(sql`INSERT INTO blobs (layer_pk, data_handle, sha256, size, content_encoding, owner_version)
            VALUES (${layerPk}, ${dataHandle}, ${sha256}, ${size}, ${contentEncoding}, NULL)
            ON CONFLICT (layer_pk, data_handle) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, content_encoding = excluded.content_encoding`),
        putBlobs: (layerPk, blobs, contentEncoding) =>
          blobs.length === 0 ? Effect.void : run(sql`INSERT OR REPLACE INTO blobs ${
            sql.insert(blobs.map((b) => ({
              layer_pk: layerPk,
              data_handle: b.handle,
              sha256: b.sha256,
              size: b.size,
              content_encoding: contentEncoding,
              owner_version: null
            })))
          }`),
        deleteBlob: (layerPk, dataHandle) =>
          run(sql`DELETE FROM blobs WHERE layer_pk = ${layerPk} AND data_handle = ${dataHandle}`),
        contentInUse: (sha256) => Effect.map(uses(sha256), (n) => n > 0),
        unusedContents: (digests) =>
          Effect.filter(new Set(digests), (sha256) => Effect.map(uses(sha256), (n) => n === 0)),
        copyBlobs: (from, to, handles) =>
          Effect.gen(function*() {
            const list = JSON.stringify(handles)
            const replaced = yield* sql<{ sha256: string }>`DELETE FROM blobs WHERE layer_pk = ${to}
              AND data_handle IN (SELECT value FROM json_each(${list})) RETURNING sha256`
            yield* sql`INSERT INTO blobs (layer_pk, data_handle, sha256, size, content_encoding, owner_version)
              SELECT ${to}, data_handle, sha256, size, content_encoding, owner_version
              FROM blobs WHERE layer_pk = ${from} AND data_handle IN (SELECT value FROM json_each(${list}))`
            return replaced.map((r) => r.sha256)
          }).pipe(Effect.orDie)
      })
    })
  )
}
