import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findOne, single, write } from "./Database.ts"

/** An asynchronous config operation behind a status link. */
export const OperationRow = Schema.Struct({
  token: Schema.String,
  kind: Schema.Literal("create", "update", "delete", "layer-delete"),
  catalog_hrn: Schema.String,
  title: Schema.String,
  state: Schema.Literal("pending", "success", "failure"),
  created: Schema.Number
})
export type OperationRow = typeof OperationRow.Type

/** The config API's asynchronous operations and the status polls each has seen. */
export class OperationsRepo extends Context.Tag("catalog-export/server/OperationsRepo")<OperationsRepo, {
  readonly insert: (row: OperationRow) => Effect.Effect<void>
  readonly byToken: (token: string) => Effect.Effect<OperationRow | undefined>
  /** Counts a status poll; returns the number of polls before this one. */
  readonly countPoll: (token: string) => Effect.Effect<number>
}>() {
  static readonly layer = Layer.effect(
    OperationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const countPoll = single({
        Request: Schema.String,
        Result: Schema.Struct({ polls: Schema.Number }),
        execute: (token) =>
          sql`INSERT INTO operation_polls (token, polls) VALUES (${token}, 1)
            ON CONFLICT (token) DO UPDATE SET polls = polls + 1 RETURNING polls`
      })
      return OperationsRepo.of({
        insert: write({ Request: OperationRow, execute: (row) => sql`INSERT INTO operations ${sql.insert(row)}` }),
        byToken: findOne({
          Request: Schema.String,
          Result: OperationRow,
          execute: (token) => sql`SELECT * FROM operations WHERE token = ${token}`
        }),
        countPoll: (token) => Effect.map(countPoll(token), (row) => row.polls - 1)
      })
    })
  )
}
