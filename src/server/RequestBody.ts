import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { once } from "node:events"
import * as fs from "node:fs"
import type { Readable } from "node:stream"
import { badRequest, payloadTooLarge, type Reply } from "./Reply.ts"

/*
 * Request bodies as the data APIs read them: a body that cannot be read or parsed answers 400 with
 * the same words on every route, one longer than the service takes (Server.ts: maxBodyBytes) 413.
 */

/** The body parsed as JSON, not yet checked. */
export const json: Effect.Effect<unknown, Reply, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => request.json
).pipe(Effect.catchAll(() => badRequest("body", "the request body is not valid JSON")))

/** The JSON body decoded with `schema`; by default a mismatch answers 400 with the decoder's message. */
export const decodeJson = <A, I>(
  schema: Schema.Schema<A, I>,
  invalid: (error: ParseResult.ParseError) => Reply = (e) => badRequest("body", e.message)
) => Effect.flatMap(json, (raw) => Schema.decodeUnknown(schema)(raw).pipe(Effect.mapError(invalid)))

class TooLarge extends Error {}

/**
 * Feeds the body to `chunk` as it arrives. Past `maxBytes` it stops reading (the request stays
 * open for the 413) and throws TooLarge; a body cut short throws what the socket said.
 */
const receive = async (source: Readable, maxBytes: number, chunk: (bytes: Buffer) => Promise<void> | void) => {
  let size = 0
  for await (const bytes of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += bytes.byteLength
    if (size > maxBytes) throw new TooLarge()
    await chunk(bytes)
  }
  return size
}

/** The request's body as a Node stream, the largest body the service takes, and how a failure to read it answers. */
const withBody = <A>(read: (source: Readable, maxBytes: number) => Promise<A>, blob = false) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const limit = yield* HttpIncomingMessage.MaxBodySize
    const maxBytes = Option.match(limit, { onNone: () => Number.MAX_SAFE_INTEGER, onSome: Number })
    return yield* Effect.tryPromise({
      try: () => read(NodeHttpServerRequest.toIncomingMessage(request), maxBytes),
      catch: (e) =>
        e instanceof TooLarge
          ? payloadTooLarge(maxBytes, blob)
          : badRequest("body", "the request body could not be read")
    })
  })

/** The body's bytes (one copy, however many chunks it came in). */
export const bytes: Effect.Effect<Uint8Array, Reply, HttpServerRequest.HttpServerRequest> = withBody(
  async (source, maxBytes) => {
    const chunks: Array<Buffer> = []
    await receive(source, maxBytes, (bytes) => void chunks.push(bytes))
    return new Uint8Array(Buffer.concat(chunks))
  }
)

/** A body streamed into a file: its length and its digests by algorithm (node:crypto names). */
export interface Received {
  readonly size: number
  readonly digests: Readonly<Record<string, string>>
}

/**
 * Streams a blob's body (`wholeBlob`) or a part of one into a new file `file`, hashing it on the way
 * with each of `algorithms`: a body of any size in constant memory. The file is removed when the
 * body cannot be read whole.
 */
export const toFile = (
  file: string,
  algorithms: ReadonlyArray<string>,
  wholeBlob: boolean
): Effect.Effect<Received, Reply, HttpServerRequest.HttpServerRequest> =>
  withBody(async (source, maxBytes) => {
    const hashes = algorithms.map((algorithm) => [algorithm, createHash(algorithm)] as const)
    const out = fs.createWriteStream(file, { flags: "wx" })
    // Kept, not thrown: a write that fails between two awaits, or after the stream was given up
    // (a client gone mid-body), must neither pass unnoticed nor reach the process as uncaught.
    let failure: Error | undefined
    out.on("error", (e) => (failure ??= e))
    try {
      const size = await receive(source, maxBytes, async (bytes) => {
        for (const [, hash] of hashes) hash.update(bytes)
        if (!out.write(bytes)) await once(out, "drain")
      })
      out.end()
      await once(out, "close")
      if (failure !== undefined) throw failure
      return { size, digests: Object.fromEntries(hashes.map(([algorithm, hash]) => [algorithm, hash.digest("hex")])) }
    } catch (e) {
      out.destroy()
      fs.rmSync(file, { force: true })
      throw e
    }
  }, wholeBlob)
