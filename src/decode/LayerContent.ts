import * as fs from "node:fs"
import { Effect } from "effect"
import { ArtifactApi, type ArtifactFailure } from "../client/ArtifactApi.ts"
import type { Layer } from "../domain/Catalog.ts"
import { DecodeSetupError, type DecodeMode, isProtobufContentType, type LayerContent } from "./Decoder.ts"

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
    const base: LayerContent = { layerId: layer.id, contentType: layer.contentType, heretile: (layer.partitioning?.scheme ?? layer.partitioningScheme) === "heretile" }
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
