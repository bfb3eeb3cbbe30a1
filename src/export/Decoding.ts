import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { ArtifactApi, type ArtifactFailure } from "../client/ArtifactApi.ts"
import { ConfigApi } from "../client/ConfigApi.ts"
import type { DecodeCounts, DecodeSettings, LayerContent } from "../decode/Decoder.ts"
import { DecodeSetupError } from "../decode/Errors.ts"
import { type DecodeMode, isProtobufContentType, MAX_REPORTED_FAILURES, type OnDecodeError } from "../decode/Shared.ts"
import { isHereTile, type Layer } from "../domain/Catalog.ts"
import type { Column } from "../sinks/Columns.ts"
import { NotFound } from "./Errors.ts"
import { DecodeIdentity, type DecodeSummary } from "./Manifest.ts"
import type { Plan } from "./Plan.ts"

/**
 * `--decode` for one export: resolved once, on the main thread, before anything is fetched (so bad
 * settings fail with exit code 2 at once), then carried to the writers (DecodeSettings, decoded where
 * the files are encoded) and recorded in the checkpoints and the manifest (DecodeIdentity), so that
 * parts decoded otherwise are never reused by a resumed run.
 */

/** What the user asked for (flags or job config). */
export interface DecodeRequest {
  readonly mode: DecodeMode
  readonly explode?: string | undefined
  readonly onError: OnDecodeError
  /** a schema bundle file to decode protobuf with, instead of the layer's schema */
  readonly schemaBundle?: string | undefined
}

export interface Decoding {
  readonly settings: DecodeSettings
  readonly identity: DecodeIdentity
  /** The columns the decoding writes (an Iceberg table's schema is made of them). */
  readonly columns: ReadonlyArray<Column>
}

/**
 * How `plan` is to be decoded: undefined for the raw columns (`none`, or `auto` on content it has no
 * decoder for). Reads the layer's configuration and, for protobuf, its schema bundle from the artifact
 * API (or the --schema-bundle file), and builds the decoder once to prove the settings work.
 */
export const prepareDecoding = (plan: Plan, request: DecodeRequest | undefined) =>
  Effect.gen(function*() {
    const setupError = (reason: string) => new DecodeSetupError({ layer: plan.layerId, reason })
    if (request === undefined || request.mode === "none") {
      if (request?.explode !== undefined) return yield* setupError("--explode needs --decode auto or protobuf")
      if (request?.schemaBundle !== undefined) {
        return yield* setupError("--schema-bundle needs --decode auto or protobuf")
      }
      return undefined
    }
    // Loaded only by decoding exports: protobuf.js and the decoders are no part of raw ones.
    const [{ resolveKind }, { makeDecoder }] = yield* Effect.promise(() =>
      Promise.all([import("../decode/Decoder.ts"), import("../decode/LayerContent.ts")])
    )
    const catalog = yield* (yield* ConfigApi).getCatalog(plan.catalogHrn)
    const layer = catalog.layers.find((l) => l.id === plan.layerId)
    if (layer === undefined) {
      return yield* new NotFound({
        what: "layer",
        message: `Catalog ${plan.catalogHrn} no longer has the layer '${plan.layerId}'.`
      })
    }
    // The plan's content type, as the files' metadata has it.
    const content = {
      ...(yield* layerContent(layer, request.mode, request.schemaBundle)),
      contentType: plan.contentType
    }
    const kind = resolveKind(content, request.mode)
    if (request.schemaBundle !== undefined && kind !== "protobuf") {
      return yield* setupError(
        `--schema-bundle is for protobuf, and this layer (content type ${plan.contentType}) decodes as ${kind}; add --decode protobuf to decode it with the bundle`
      )
    }
    if (kind === "raw") {
      if (request.explode !== undefined) {
        return yield* setupError(
          `--explode applies to protobuf decoding, and this layer (content type ${plan.contentType}) has no schema to decode with`
        )
      }
      return undefined
    }
    const options = {
      mode: kind,
      onError: request.onError,
      ...(request.explode === undefined ? {} : { explode: request.explode })
    }
    const decoder = yield* makeDecoder(content, options)
    const bundle = kind === "protobuf" ? content.schemaBundle : undefined
    const identity: DecodeIdentity = {
      kind,
      ...(request.explode === undefined ? {} : { explode: request.explode }),
      onError: request.onError,
      ...(bundle === undefined
        ? {}
        : request.schemaBundle !== undefined
        ? { schemaBundle: request.schemaBundle }
        : { schema: layer.schema!.hrn }),
      ...(bundle === undefined ? {} : { bundleSha256: createHash("sha256").update(bundle).digest("hex") })
    }
    return { settings: { content, options }, identity, columns: decoder.columns } satisfies Decoding
  })

/**
 * What `makeDecoder` needs to know about a layer, from its configuration: the schema bundle comes from
 * `--schema-bundle FILE` when given, else from the artifact API when the layer names a schema and
 * protobuf decoding may be wanted; nothing is fetched for `--decode none|geojson|json`.
 */
export const layerContent = (
  layer: Layer,
  mode: DecodeMode,
  schemaBundleFile?: string
): Effect.Effect<LayerContent, DecodeSetupError | ArtifactFailure, ArtifactApi> =>
  Effect.gen(function*() {
    const base: LayerContent = { layerId: layer.id, contentType: layer.contentType, heretile: isHereTile(layer) }
    if (schemaBundleFile !== undefined) {
      const bytes = yield* Effect.try({
        try: () => new Uint8Array(fs.readFileSync(schemaBundleFile)),
        catch: (e) =>
          new DecodeSetupError({
            layer: layer.id,
            reason: `--schema-bundle ${schemaBundleFile} cannot be read (${e instanceof Error ? e.message : String(e)})`
          })
      })
      return { ...base, schemaBundle: bytes }
    }
    const wanted = mode === "protobuf" || (mode === "auto" && isProtobufContentType(layer.contentType))
    if (!wanted || layer.schema?.hrn === undefined) return base
    const bundle = yield* (yield* ArtifactApi).getSchemaBundle(layer.schema.hrn)
    return { ...base, schemaBundle: bundle }
  })

const identityKeys = Object.keys(DecodeIdentity.fields) as ReadonlyArray<keyof DecodeIdentity>

/** Whether a part was decoded as `identity` says (both undefined: raw). */
export const sameDecoding = (summary: DecodeSummary | undefined, identity: DecodeIdentity | undefined): boolean =>
  summary === undefined || identity === undefined
    ? summary === identity
    : identityKeys.every((key) => summary[key] === identity[key])

/** One part's decode summary: `counts` from its writer; `partitions`, `deleted` as the part counted them. */
export const partSummary = (
  identity: DecodeIdentity,
  counts: DecodeCounts,
  partitions: number,
  deleted: number
): DecodeSummary => ({
  ...identity,
  decoded: partitions - deleted - counts.failed,
  failed: counts.failed,
  rows: counts.rows,
  failures: counts.failures.slice(0, MAX_REPORTED_FAILURES)
})

/** The parts' summaries added up, for the manifest. */
export const exportSummary = (parts: ReadonlyArray<DecodeSummary>): DecodeSummary | undefined => {
  if (parts.length === 0) return undefined
  return {
    ...parts[0]!,
    decoded: parts.reduce((n, p) => n + p.decoded, 0),
    failed: parts.reduce((n, p) => n + p.failed, 0),
    rows: parts.reduce((n, p) => n + p.rows, 0),
    failures: parts.flatMap((p) => p.failures).slice(0, MAX_REPORTED_FAILURES)
  }
}
