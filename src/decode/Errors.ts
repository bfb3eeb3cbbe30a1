import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"
import type { UndecodableFields } from "./Shared.ts"

/** Bad decode settings for the layer (exit code 2). */
export class DecodeSetupError extends Schema.TaggedError<DecodeSetupError>()("DecodeSetupError", {
  layer: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message(): string {
    return `Cannot decode layer ${this.layer}: ${this.reason}.`
  }
}

/** A blob that does not decode, with `--on-decode-error fail` (exit code 6). */
export class DecodeError extends Schema.TaggedError<DecodeError>()("DecodeError", {
  layer: Schema.String,
  partition: Schema.String,
  dataHandle: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.integrity
  }

  static of(fields: UndecodableFields): DecodeError {
    return new DecodeError({
      layer: fields.layer,
      partition: fields.partition,
      dataHandle: fields.dataHandle,
      reason: fields.reason
    })
  }

  override get message(): string {
    return `Partition ${this.partition} of layer ${this.layer} (data handle ${this.dataHandle}) does not decode as the layer's content: ${this.reason}. ` +
      `Nothing of this version was committed. Pass --on-decode-error skip or raw to export it anyway, or --decode none for the raw bytes.`
  }
}
