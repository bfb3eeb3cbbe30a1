import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findOne, run, write } from "./Database.ts"

/** An application (a client id) and its access key. */
export const AppRow = Schema.Struct({
  id: Schema.String,
  key_id: Schema.String,
  key_secret: Schema.String,
  user_id: Schema.String,
  realm: Schema.String
})
export type AppRow = typeof AppRow.Type

/** Applications, their access keys and the bearer tokens issued to them. */
export class AppsRepo extends Context.Tag("catalog-export/server/AppsRepo")<AppsRepo, {
  /** Creates the application, or gives an existing one a new key. */
  readonly upsert: (app: AppRow) => Effect.Effect<void>
  readonly byId: (id: string) => Effect.Effect<AppRow | undefined>
  readonly byKeyId: (keyId: string) => Effect.Effect<AppRow | undefined>
  readonly insertToken: (tokenHash: string, appId: string, expiresAt: number) => Effect.Effect<void>
}>() {
  static readonly layer = Layer.effect(
    AppsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return AppsRepo.of({
        upsert: write({
          Request: AppRow,
          execute: (app) =>
            sql`INSERT INTO apps ${
              sql.insert(app)
            } ON CONFLICT (id) DO UPDATE SET key_id = excluded.key_id, key_secret = excluded.key_secret`
        }),
        byId: findOne({
          Request: Schema.String,
          Result: AppRow,
          execute: (id) => sql`SELECT * FROM apps WHERE id = ${id}`
        }),
        byKeyId: findOne({
          Request: Schema.String,
          Result: AppRow,
          execute: (keyId) => sql`SELECT * FROM apps WHERE key_id = ${keyId}`
        }),
        insertToken: (tokenHash, appId, expiresAt) =>
          run(sql`INSERT INTO tokens (token_hash, app_id, expires_at) VALUES (${tokenHash}, ${appId}, ${expiresAt})`)
      })
    })
  )
}
