#!/usr/bin/env node
// `duckdb` for the doc tests (test/docs/snippets.test.ts), where no DuckDB CLI is installed: runs
// `duckdb -c SQL` (or the SQL on stdin) with @duckdb/node-api, in the working directory, statement
// by statement. Prints one JSON line per statement, {"statement", "type", "rows", "first"}, so the
// test can see how many rows each query returned; a failing statement prints "Error: ..." on stderr
// and exits 1, as the DuckDB CLI does.
import { DuckDBInstance, StatementType } from "@duckdb/node-api"
import * as fs from "node:fs"

const args = process.argv.slice(2)
const sql = args[0] === "-c" && args[1] !== undefined ? args[1] : fs.readFileSync(0, "utf8")

const instance = await DuckDBInstance.create()
const connection = await instance.connect()
try {
  const statements = await connection.extractStatements(sql)
  for (let i = 0; i < statements.count; i++) {
    const prepared = await statements.prepare(i)
    const reader = await prepared.runAndReadAll()
    const rows = reader.getRowObjectsJson()
    process.stdout.write(
      JSON.stringify({
        statement: i + 1,
        type: StatementType[prepared.statementType],
        rows: rows.length,
        first: rows.slice(0, 3)
      }) + "\n"
    )
  }
} catch (e) {
  process.stderr.write(`Error: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
} finally {
  connection.closeSync()
  instance.closeSync()
}
