// The encoder thread run from the TypeScript sources (tests, tsx scripts): the built CLI runs
// dist/encoder-worker.mjs instead, bundled from EncoderWorker.ts.
import { register } from "tsx/esm/api"

register()
await import("./EncoderWorker.ts")
