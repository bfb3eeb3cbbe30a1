import { type DuckDBConnection, DuckDBInstance } from "@duckdb/node-api"
import * as path from "node:path"

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

/** A row of an export's Parquet files as DuckDB reads it, with `data` as its sha1. */
export interface ReadRow {
  readonly partition: string
  readonly partition_version: bigint
  readonly data_handle: string
  readonly data_size: bigint | null
  readonly checksum: string | null
  readonly data_sha1: string | null
  readonly [column: string]: unknown
}

/**
 * Every Parquet row of an export directory, read by DuckDB (an independent reader), sorted by
 * partition: the export's columns (or `columns`) and `data_sha1`.
 */
export const readParquet = (
  dir: string,
  columns = "partition, partition_version, data_handle, data_size, checksum"
): Promise<Array<ReadRow>> =>
  withDuckDB((c) =>
    query(
      c,
      `SELECT ${columns}, sha1(data) AS data_sha1
       FROM read_parquet(${literal(path.join(dir, "*.parquet"))}, hive_partitioning = false) ORDER BY partition`
    )
  ) as unknown as Promise<Array<ReadRow>>
