import type { DecodeCounts, DecodeSettings } from "../decode/Decoder.ts"
import { type CompletedFile, loadWriters, type Settings as FileSettings, type Writers } from "../sinks/Files.ts"

/**
 * The encoder's choice of file writers, wherever it encodes (inline or on its thread): decode's
 * decoding writers (and the decoders) for decoding exports, sinks' plain writers otherwise, each
 * loaded only when a writer opens. Plain code: the encoder thread loads no Effect.
 */

/** What one writer of the encoder writes: its files (sinks/Files.ts), and whether it decodes them. */
export interface Settings extends FileSettings {
  /** Decode the blobs into columns (`--decode`); absent: the raw columns. */
  readonly decode?: DecodeSettings | undefined
}

/** The file writers of one writer; decoding ones tell what they decoded so far. */
export interface ChosenWriters {
  readonly factories: Writers
  readonly decoded?: () => DecodeCounts
}

export const chooseWriters = async (settings: Pick<Settings, "formats" | "decode">): Promise<ChosenWriters> => {
  const { formats, decode } = settings
  if (decode === undefined) return { factories: await loadWriters(formats) }
  const { decodingWriters } = await import("../decode/DecodingWriters.ts")
  return decodingWriters(formats, decode)
}

/** The files of a completed writer, and what decoding did to its rows. */
export interface Completed {
  readonly files: ReadonlyArray<CompletedFile>
  readonly decoded?: DecodeCounts | undefined
}
