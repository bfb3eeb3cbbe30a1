import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import * as Migrations from "./Migrations.ts"
import * as Sqlite from "./Sqlite.ts"

/**
 * The service's SQLite database, migrated before anything uses it (so the read-only connection of
 * Reads.ts, opened after this layer, always sees the tables).
 */
export const layer = (filename: string) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe("PRAGMA synchronous = NORMAL")
      yield* sql.unsafe("PRAGMA foreign_keys = OFF")
      // 16 MB of page cache, as better-sqlite3's build had (node:sqlite's default is 2 MB).
      yield* sql.unsafe("PRAGMA cache_size = -16000")
      yield* Migrations.run
    })
  ).pipe(Layer.provideMerge(Sqlite.layer(filename)))

/*
 * The repositories (db/*Repo.ts) answer `Effect<A>`: the database is the service's own, so a failed
 * statement or a row that does not decode is a defect (answered 500 by the router), never a
 * request's error.
 */

/** Runs `self` in one transaction (nested calls use savepoints); it rolls back when `self` fails or dies. */
export const transaction = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(self).pipe(
      Effect.catchIf((e): e is SqlError => e instanceof SqlError, (e) => Effect.die(e))
    ))

interface Query<IA, II, A, AI, E> {
  readonly Request: Schema.Schema<IA, II>
  readonly Result: Schema.Schema<A, AI>
  readonly execute: (request: II) => Effect.Effect<ReadonlyArray<unknown>, E>
}

const dying = <I, A, E>(query: (request: I) => Effect.Effect<A, E>) => (request: I): Effect.Effect<A> =>
  Effect.orDie(query(request))

/** `SqlSchema.findOne` answering `undefined` when no row matches. */
export const findOne = <IA, II, A, AI, E>(options: Query<IA, II, A, AI, E>) => {
  const find = dying(SqlSchema.findOne(options))
  return (request: IA): Effect.Effect<A | undefined> => Effect.map(find(request), Option.getOrUndefined)
}

export const findAll = <IA, II, A, AI, E>(options: Query<IA, II, A, AI, E>) => dying(SqlSchema.findAll(options))

export const single = <IA, II, A, AI, E>(options: Query<IA, II, A, AI, E>) => dying(SqlSchema.single(options))

export const write = <IA, II, E>(options: {
  readonly Request: Schema.Schema<IA, II>
  readonly execute: (request: II) => Effect.Effect<unknown, E>
}) => dying(SqlSchema.void(options))

/** A statement whose outcome the caller does not decode (updates, deletes, bulk inserts). */
export const run = <A, E>(statement: Effect.Effect<A, E>): Effect.Effect<void> => Effect.orDie(Effect.asVoid(statement))
