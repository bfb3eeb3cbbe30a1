import { parentPort } from "node:worker_threads"
import type { DecodeCounts } from "../decode/Decoder.ts"
import { UndecodableBlob } from "../decode/Shared.ts"
import { loadBacklog, loadOutputs, OpenFiles } from "../sinks/Files.ts"
import { describeSinkFailure } from "../sinks/SinkFailure.ts"
import type { EncoderReply, EncoderRequest } from "./Encoder.ts"
import { chooseWriters, type Completed } from "./Writers.ts"

/** The encoder thread: the open writers, driven by Encoder.ts's requests in order. */
const files = new OpenFiles()
/** Per writer: uploads in flight are behind (object stores). */
const backlogs = new Map<number, () => Promise<void> | undefined>()
/** Per decoding writer: what it decoded so far. */
const decoded = new Map<number, () => DecodeCounts>()

const handle = async (request: EncoderRequest): Promise<unknown> => {
  switch (request.op) {
    case "open": {
      const { settings } = request
      const [writers, outputs, backlog] = await Promise.all([
        chooseWriters(settings),
        loadOutputs(settings.dir),
        loadBacklog(settings.dir)
      ])
      backlogs.set(request.id, backlog)
      if (writers.decoded !== undefined) decoded.set(request.id, writers.decoded)
      return files.open(request.id, settings, writers.factories, outputs)
    }
    case "add": {
      files.add(request.id, request.batch)
      // The reply is the main thread's backpressure: it comes once uploads have caught up.
      await backlogs.get(request.id)?.()
      return
    }
    case "complete": {
      const decodedSoFar = decoded.get(request.id)
      backlogs.delete(request.id)
      decoded.delete(request.id)
      return { files: await files.complete(request.id), decoded: decodedSoFar?.() } satisfies Completed
    }
    case "abandon":
      backlogs.delete(request.id)
      decoded.delete(request.id)
      return files.abandon(request.id)
  }
}

const run = async (request: EncoderRequest & { readonly seq: number }) => {
  let reply: EncoderReply
  try {
    reply = { seq: request.seq, ok: true, value: await handle(request) }
  } catch (cause) {
    reply = cause instanceof UndecodableBlob
      ? { seq: request.seq, ok: false, undecodable: cause.fields }
      : { seq: request.seq, ok: false, error: describeSinkFailure("", "encode", cause) }
  }
  parentPort!.postMessage(reply)
}

// One request at a time, in order (opening a writer may wait for its format's module to load).
let queue = Promise.resolve()
parentPort!.on("message", (request: EncoderRequest & { readonly seq: number }) => {
  queue = queue.then(() => run(request))
})
