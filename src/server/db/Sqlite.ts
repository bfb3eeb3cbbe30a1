import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite"

/**
 * SQLite through Node's own `node:sqlite`: no native module to build, nothing tied to one Node ABI
 * (better-sqlite3 12 aborts on Node 24.19 and later when the GC finalises a statement; 13 re-prepares
 * the blob-location statement on every call). `open` is a plain connection (Reads.ts, tests);
 * `layer` the service's SqlClient over one connection, as @effect/sql-sqlite-node built it over
 * better-sqlite3.
 */

/** Node 22 announces node:sqlite as experimental on stderr when it loads; the CLI's stderr is its users'. */
const sqlite = (): typeof import("node:sqlite") => {
  const emitWarning = process.emitWarning
  process.emitWarning = ((warning: string | Error, ...rest: Array<never>) => {
    if (!String(warning).startsWith("SQLite is an experimental feature")) emitWarning.call(process, warning, ...rest)
  }) as typeof process.emitWarning
  try {
    return process.getBuiltinModule("node:sqlite")
  } finally {
    process.emitWarning = emitWarning
  }
}

/**
 * A connection that waits up to 5 s for another connection's lock (better-sqlite3's default; node:sqlite
 * would fail at once). Read-only connections need the file to exist.
 */
export const open = (filename: string, options: { readonly readOnly?: boolean } = {}): DatabaseSync =>
  new (sqlite().DatabaseSync)(filename, { readOnly: options.readOnly ?? false, timeout: 5000 })

/** A prepared statement with the parameters and row type its SQL has; `arrays` returns rows as arrays. */
export interface Query<P extends Array<unknown>, R> {
  readonly get: (...params: P) => R | undefined
  readonly all: (...params: P) => Array<R>
}

export const query = <P extends Array<unknown>, R>(
  db: DatabaseSync,
  sql: string,
  options: { readonly arrays?: boolean } = {}
): Query<P, R> => {
  const statement = db.prepare(sql)
  if (options.arrays === true) statement.setReturnArrays(true)
  return statement as unknown as Query<P, R>
}

/** Prepared statements kept per SQL text, least recently used dropped first (@effect/sql-sqlite-node kept 200). */
const PREPARED_MAX = 200

/** better-sqlite3 bound `undefined` as NULL; node:sqlite refuses it. */
const bindable = (params: ReadonlyArray<unknown>) =>
  params.map((p) => (p === undefined ? null : p)) as Array<SQLInputValue>

const failed = (message: string) => (cause: unknown) => new SqlError({ cause, message })

/** The SqlClient (with SqlClient.SqlClient's transactions and savepoints) over one connection to `filename`, in WAL mode. */
export const layer = (filename: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const db = yield* Effect.acquireRelease(
        Effect.sync(() => {
          const db = open(filename)
          db.exec("PRAGMA journal_mode = WAL")
          return db
        }),
        (db) => Effect.sync(() => db.close())
      )

      const prepared = new Map<string, StatementSync>()
      const prepare = (sql: string) =>
        Effect.try({
          try: () => {
            let statement = prepared.get(sql)
            if (statement !== undefined) {
              prepared.delete(sql)
            } else {
              statement = db.prepare(sql)
              if (prepared.size >= PREPARED_MAX) prepared.delete(prepared.keys().next().value!)
            }
            prepared.set(sql, statement)
            return statement
          },
          catch: failed("Failed to prepare statement")
        })

      /** Rows of a query; an empty array for a statement that returns none (`all` runs it all the same). */
      const rows = (statement: StatementSync, params: ReadonlyArray<unknown>, arrays: boolean) =>
        Effect.withFiberRuntime<Array<any>, SqlError>((fiber) =>
          Effect.try({
            try: () => {
              statement.setReadBigInts(Context.get(fiber.currentContext, SqlClient.SafeIntegers))
              statement.setReturnArrays(arrays)
              return statement.all(...bindable(params))
            },
            catch: failed("Failed to execute statement")
          })
        )

      const execute = (
        statement: StatementSync,
        params: ReadonlyArray<unknown>,
        transformRows: (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
      ) => {
        const result = rows(statement, params, false)
        return transformRows === undefined ? result : Effect.map(result, transformRows)
      }

      const connection: Connection = {
        execute: (sql, params, transformRows) =>
          Effect.flatMap(prepare(sql), (statement) => execute(statement, params, transformRows)),
        executeRaw: (sql, params) =>
          Effect.flatMap(prepare(sql), (statement): Effect.Effect<unknown, SqlError> =>
            statement.columns().length > 0
              ? rows(statement, params, false)
              : Effect.try({
                try: () => statement.run(...bindable(params)),
                catch: failed("Failed to execute statement")
              })),
        executeValues: (sql, params) => Effect.flatMap(prepare(sql), (statement) => rows(statement, params, true)),
        executeUnprepared: (sql, params, transformRows) =>
          Effect.flatMap(
            Effect.try({ try: () => db.prepare(sql), catch: failed("Failed to prepare statement") }),
            (statement) => execute(statement, params, transformRows)
          ),
        executeStream: () => Stream.dieMessage("executeStream is not implemented for SQLite")
      }

      // One connection: a transaction holds it until it ends, every other statement waits its turn.
      const semaphore = yield* Effect.makeSemaphore(1)
      return yield* SqlClient.make({
        acquirer: semaphore.withPermits(1)(Effect.succeed(connection)),
        transactionAcquirer: Effect.uninterruptibleMask((restore) =>
          Effect.as(
            Effect.zipRight(
              restore(semaphore.take(1)),
              Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
            ),
            connection
          )
        ),
        compiler: Statement.makeCompilerSqlite(),
        spanAttributes: [["db.system.name", "sqlite"]]
      })
    })
  ).pipe(Layer.provide(Reactivity.layer))
