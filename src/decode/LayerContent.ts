import * as fs from "node:fs"
import { Effect } from "effect"
import { ArtifactApi, type ArtifactFailure } from "../client/ArtifactApi.ts"
import { isHereTile, type Layer } from "../domain/Catalog.ts"
import { type DecodeMode, type DecodeOptions, type Decoder, decoderOf, isProtobufContentType, type LayerContent } from "./Decoder.ts"
import { DecodeSetupError } from "./Errors.ts"

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
        catch: (e) => new DecodeSetupError({ layer: layer.id, reason: `--schema-bundle ${schemaBundleFile} cannot be read (${e instanceof Error ? e.message : String(e)})` })
      })
      return { ...base, schemaBundle: bytes }
    }
    const wanted = mode === "protobuf" || (mode === "auto" && isProtobufContentType(layer.contentType))
    if (!wanted || layer.schema?.hrn === undefined) return base
    const bundle = yield* (yield* ArtifactApi).getSchemaBundle(layer.schema.hrn)
    return { ...base, schemaBundle: bundle }
  })

/**
 * The decoder for a layer. Fails with DecodeSetupError when the settings cannot work (protobuf without a
 * schema, a bundle that does not load, an --explode field that is not a repeated field).
 */
export const makeDecoder = (layer: LayerContent, options: DecodeOptions): Effect.Effect<Decoder, DecodeSetupError> =>
  Effect.try({
    try: () => decoderOf(layer, options),
    catch: (e) => new DecodeSetupError({ layer: layer.layerId, reason: e instanceof Error ? e.message : String(e) })
  })
