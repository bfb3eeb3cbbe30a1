import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findOne, run, write } from "./Database.ts"

/** `open`: taking parts; `completed`: its blob is stored; `failed`: its completion was refused, it takes nothing more. */
export type UploadState = "open" | "completed" | "failed"

export const UploadRow = Schema.Struct({
  token: Schema.String,
  layer_pk: Schema.Number,
  data_handle: Schema.String,
  content_type: Schema.String,
  content_encoding: Schema.NullOr(Schema.String),
  state: Schema.Literal("open", "completed", "failed"),
  parts: Schema.NullOr(Schema.String),
  created: Schema.Number,
  touched: Schema.Number
})
export type UploadRow = typeof UploadRow.Type

/** Multipart uploads of blobs (Uploads.ts keeps their parts as files). */
export class UploadsRepo extends Context.Tag("catalog-export/server/UploadsRepo")<UploadsRepo, {
  readonly insert: (row: UploadRow) => Effect.Effect<void>
  readonly byToken: (token: string) => Effect.Effect<UploadRow | undefined>
  readonly touch: (token: string, now: number) => Effect.Effect<void>
  readonly setState: (token: string, state: UploadState, parts: string | null, now: number) => Effect.Effect<void>
  readonly remove: (token: string) => Effect.Effect<void>
  /** Uploads last touched before `time`. */
  readonly untouchedSince: (time: number) => Effect.Effect<ReadonlyArray<string>>
  readonly tokens: Effect.Effect<ReadonlyArray<string>>
}>() {
  static readonly layer = Layer.effect(
    UploadsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return UploadsRepo.of({
        insert: write({ Request: UploadRow, execute: (row) => sql`INSERT INTO multipart_uploads ${sql.insert(row)}` }),
        byToken: findOne({
          Request: Schema.String,
          Result: UploadRow,
          execute: (token) => sql`SELECT * FROM multipart_uploads WHERE token = ${token}`
        }),
        touch: (token, now) => run(sql`UPDATE multipart_uploads SET touched = ${now} WHERE token = ${token}`),
        setState: (token, state, parts, now) =>
          run(
            sql`UPDATE multipart_uploads SET state = ${state}, parts = ${parts}, touched = ${now} WHERE token = ${token}`
          ),
        remove: (token) => run(sql`DELETE FROM multipart_uploads WHERE token = ${token}`),
        untouchedSince: (time) =>
          sql<{ token: string }>`SELECT token FROM multipart_uploads WHERE touched < ${time}`.pipe(
            Effect.map((rows) => rows.map((r) => r.token)),
            Effect.orDie
          ),
        tokens: sql<{ token: string }>`SELECT token FROM multipart_uploads`.pipe(
          Effect.map((rows) => rows.map((r) => r.token)),
          Effect.orDie
        )
      })
    })
  )
}
