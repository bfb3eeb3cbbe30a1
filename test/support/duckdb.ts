import { type DuckDBConnection, DuckDBInstance } from "@duckdb/node-api"

/** An in-memory DuckDB for reading back what a test wrote: the independent reader of our Parquet files. */
export const withDuckDB = async <A>(use: (connection: DuckDBConnection) => Promise<A>): Promise<A> => {
  const instance = await DuckDBInstance.create()
  const connection = await instance.connect()
  try {
    return await use(connection)
  } finally {
    connection.closeSync()
    instance.closeSync()
  }
}

export const query = async (connection: DuckDBConnection, sql: string): Promise<Array<Record<string, unknown>>> =>
  (await connection.runAndReadAll(sql)).getRowObjectsJS() as Array<Record<string, unknown>>

/** A SQL string literal. */
export const literal = (s: string) => `'${s.replace(/'/g, "''")}'`
