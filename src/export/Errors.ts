import * as Schema from "effect/Schema"
import { ExitCode } from "../domain/ExitCode.ts"

/** The layer exists but is of a type the export cannot read (stream, index, objectstore, interactive map). */
export class LayerNotExportable extends Schema.TaggedError<LayerNotExportable>()("LayerNotExportable", {
  catalogHrn: Schema.String,
  layerId: Schema.String,
  layerType: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message() {
    return `Layer '${this.layerId}' of ${this.catalogHrn} is a ${this.layerType} layer; only versioned and volatile layers can be exported. Choose a versioned or volatile layer.`
  }
}

/** A layer id that no catalog can have (and that must not name a directory): `../x`, `a/b`, empty. */
export class InvalidLayerId extends Schema.TaggedError<InvalidLayerId>()("InvalidLayerId", {
  layerId: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message() {
    return `Layer id ${
      JSON.stringify(this.layerId)
    } is not a valid layer id (up to 50 characters: letters, digits, '_', '.', '-', starting with a letter or digit); check --layer.`
  }
}

/** A catalog, layer or version that is not there (or no longer: below the minimum version). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  what: Schema.Literal("catalog", "layer", "version"),
  message: Schema.String
}) {
  get exitCode() {
    return ExitCode.notFound
  }
}

/** Data that does not match its metadata even after the retries the policy allows. */
export class IntegrityError extends Schema.TaggedError<IntegrityError>()("IntegrityError", {
  message: Schema.String
}) {
  get exitCode() {
    return ExitCode.integrity
  }
}

/** The output directory already holds something that contradicts this run. */
export class OutputConflict extends Schema.TaggedError<OutputConflict>()("OutputConflict", {
  message: Schema.String
}) {
  get exitCode() {
    return ExitCode.integrity
  }
}

/** A volatile layer where versions are needed (backfill): it keeps only its current data. */
export class LayerNotVersioned extends Schema.TaggedError<LayerNotVersioned>()("LayerNotVersioned", {
  catalogHrn: Schema.String,
  layerId: Schema.String
}) {
  get exitCode() {
    return ExitCode.usage
  }

  override get message() {
    return `Layer '${this.layerId}' of ${this.catalogHrn} is volatile: it keeps no versions to backfill, only its current data; export that with catalog-export export --catalog ${this.catalogHrn} --layer ${this.layerId} --out DIR.`
  }
}

/** `commit` of a sharded plan before every shard has finished, or with a shard whose files are not as its manifest says. */
export class ShardsUnfinished extends Schema.TaggedError<ShardsUnfinished>()("ShardsUnfinished", {
  plan: Schema.String,
  missing: Schema.Array(Schema.Number),
  broken: Schema.Array(Schema.Struct({ shard: Schema.Number, reason: Schema.String }))
}) {
  get exitCode() {
    return ExitCode.unfinished
  }

  override get message() {
    const shards = (ids: ReadonlyArray<number>) => `${ids.length === 1 ? "shard" : "shards"} ${ids.join(", ")}`
    const missing = this.missing.length === 0
      ? []
      : [`${shards(this.missing)} ${this.missing.length === 1 ? "has" : "have"} not finished`]
    const broken = this.broken.map((b) => `shard ${b.shard} is damaged (${b.reason})`)
    const run = [...this.missing, ...this.broken.map((b) => b.shard)].sort((a, b) => a - b)
    return `Not committing ${this.plan}: ${[...missing, ...broken].join("; ")}. Nothing was committed. Run ` +
      `catalog-export export --plan ${this.plan} --shard I for ${shards(run)}, then commit again.`
  }
}
