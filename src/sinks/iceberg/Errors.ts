import * as Schema from "effect/Schema"

/**
 * Why an Iceberg table could not be read or committed. `table` is the table's location; `message` a
 * sentence naming it and saying what to do. Exit classes (cli/Exit.ts): `Conflict` 5 (other writers
 * kept winning the commit: run again), `Mismatch` and `SchemaChange` 2 (the location holds something
 * else, or the columns changed in a way Iceberg cannot evolve to), `Corrupt` 6 (a file the table
 * references is missing or unreadable).
 */
export class IcebergError extends Schema.TaggedError<IcebergError>()("IcebergError", {
  table: Schema.String,
  reason: Schema.Literal("Conflict", "Mismatch", "SchemaChange", "Corrupt"),
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}
