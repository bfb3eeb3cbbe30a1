import type avro from "avsc"
import { randomBytes } from "node:crypto"

/**
 * Avro object container files (the manifests and manifest lists of a table, spec "Appendix A:
 * Avro") in memory, through avsc: its block encoder writes the schema as given, so the `field-id`
 * attributes Iceberg readers project by survive, and takes the header metadata Iceberg requires.
 * Uncompressed (codec `null`): manifests are small, and every reader reads it.
 */

/** avsc, loaded by the first table read or commit: every export checks its output for a table, few have one. */
const avsc = () => import("avsc").then((m) => m.default)

/** An Avro file of `records` with `schema`, the header carrying `metadata`. */
export const encodeContainer = (
  schema: object,
  records: ReadonlyArray<unknown>,
  metadata: Readonly<Record<string, string>>
): Promise<Uint8Array> =>
  avsc().then((avro) =>
    new Promise((resolve, reject) => {
      const options = {
        codec: "null",
        writeHeader: true,
        syncMarker: randomBytes(16),
        metadata: Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, Buffer.from(v, "utf8")]))
      }
      const encoder = new avro.streams.BlockEncoder(schema as avro.Schema, options)
      const chunks: Array<Buffer> = []
      encoder.on("data", (chunk: Buffer) => chunks.push(chunk))
      encoder.on("error", reject)
      encoder.on("end", () => resolve(Buffer.concat(chunks)))
      for (const record of records) encoder.write(record)
      encoder.end()
    })
  )

export interface Container<A> {
  /** The header metadata (without the `avro.` keys). */
  readonly metadata: Readonly<Record<string, string>>
  readonly records: ReadonlyArray<A>
}

/** The records and header metadata of an Avro file, decoded with the schema in its header. */
export const decodeContainer = <A>(bytes: Uint8Array): Promise<Container<A>> =>
  avsc().then((avro) =>
    new Promise((resolve, reject) => {
      const decoder = new avro.streams.BlockDecoder()
      const records: Array<A> = []
      let metadata: Record<string, string> = {}
      decoder.on("metadata", (_type: unknown, _codec: unknown, header: { meta: Record<string, Buffer> }) => {
        metadata = Object.fromEntries(
          Object.entries(header.meta).filter(([k]) => !k.startsWith("avro.")).map(([k, v]) => [k, v.toString("utf8")])
        )
      })
      decoder.on("data", (record: A) => records.push(record))
      decoder.on("error", reject)
      decoder.on("end", () => resolve({ metadata, records }))
      decoder.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
    })
  )
