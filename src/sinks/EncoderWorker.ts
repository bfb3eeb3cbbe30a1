import { parentPort } from "node:worker_threads"
import { UndecodableBlob } from "../decode/Shared.ts"
import type { EncoderReply, EncoderRequest } from "./Encoder.ts"
import { loadWriters, OpenFiles } from "./Files.ts"
import { describeSinkFailure } from "./SinkFailure.ts"

/** The encoder thread: the open writers, driven by Encoder.ts's requests in order. */
const files = new OpenFiles()

const handle = async (request: EncoderRequest): Promise<unknown> => {
  switch (request.op) {
    case "open":
      return files.open(request.id, request.settings, await loadWriters(request.settings))
    case "add":
      return files.add(request.id, request.batch)
    case "complete":
      return files.complete(request.id)
    case "abandon":
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
