import * as Effect from "effect/Effect"
import { type DecodeOptions, type Decoder, decoderOf, type LayerContent } from "./Decoder.ts"
import { DecodeSetupError } from "./Errors.ts"

/**
 * The decoder for a layer. Fails with DecodeSetupError when the settings cannot work (protobuf without a
 * schema, a bundle that does not load, an --explode field that is not a repeated field).
 */
export const makeDecoder = (layer: LayerContent, options: DecodeOptions): Effect.Effect<Decoder, DecodeSetupError> =>
  Effect.try({
    try: () => decoderOf(layer, options),
    catch: (e) => new DecodeSetupError({ layer: layer.layerId, reason: e instanceof Error ? e.message : String(e) })
  })
