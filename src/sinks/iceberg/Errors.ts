import * as Schema from "effect/Schema"
import { ExitCode } from "../../domain/ExitCode.ts"

const IcebergErrorReason = Schema.Literal("Conflict", "Mismatch", "SchemaChange", "Corrupt")

/**
 * Why an Iceberg table could not be read or committed. `table` is the table's location; `message` a
 * sentence naming it and saying what to do.
 */
export class IcebergError extends Schema.TaggedError<IcebergError>()("IcebergError", {
  table: Schema.String,
  reason: IcebergErrorReason,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  get exitCode() {
    return EXIT_CODES[this.reason]
  }
}

const EXIT_CODES: Record<typeof IcebergErrorReason.Type, ExitCode> = {
  /** Other writers kept winning the commit: run again. */
  Conflict: ExitCode.transient,
  /** The location holds something else than this layer's table. */
  Mismatch: ExitCode.usage,
  /** The columns changed in a way Iceberg cannot evolve to. */
  SchemaChange: ExitCode.usage,
  /** A file the table references is missing or unreadable. */
  Corrupt: ExitCode.integrity
}
