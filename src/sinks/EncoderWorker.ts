import { parentPort } from "node:worker_threads"
import type { EncoderReply, EncoderRequest } from "./Encoder.ts"
import { Files, loadWriters } from "./Files.ts"
import { describeSinkFailure } from "./SinkFailure.ts"

/** The encoder thread: one `Files` per writer, driven by Encoder.ts's requests in order. */
const files = new Map<number, Files>()

const handle = async (request: EncoderRequest): Promise<unknown> => {
  switch (request.op) {
    case "open":
      files.set(request.id, new Files(request.settings, await loadWriters(request.settings.formats)))
      return undefined
    case "add":
      return files.get(request.id)!.add(request.batch)
    case "complete": {
      const completed = files.get(request.id)!.complete()
      files.delete(request.id)
      return completed
    }
    case "abandon":
      files.get(request.id)?.abandon()
      files.delete(request.id)
      return undefined
  }
}

const run = async (request: EncoderRequest & { readonly seq: number }) => {
  let reply: EncoderReply
  try {
    reply = { seq: request.seq, ok: true, value: await handle(request) }
  } catch (cause) {
    reply = { seq: request.seq, ok: false, error: describeSinkFailure("", "encode", cause) }
  }
  parentPort!.postMessage(reply)
}

// One request at a time, in order (opening a writer may wait for its format's module to load).
let queue = Promise.resolve()
parentPort!.on("message", (request: EncoderRequest & { readonly seq: number }) => {
  queue = queue.then(() => run(request))
})
