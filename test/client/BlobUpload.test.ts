/**
 * BlobUploads against the local service through a slow uplink: a body that takes longer to send than
 * the first-byte timeout still succeeds in one attempt, because the timeout runs from the body's last
 * byte (undici restarts it while a streamed body is being written), not from its first.
 */
import * as Effect from "effect/Effect"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BlobApi } from "../../src/client/BlobApi.ts"
import { BlobUploads } from "../../src/client/BlobUpload.ts"
import * as DataClient from "../../src/client/DataClient.ts"
import { intercept, type Interceptor } from "../support/interceptor.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const MB = 1_000_000

describe("BlobUploads through a slow uplink", () => {
  let svc: TestService
  let slow: Interceptor

  beforeAll(async () => {
    svc = await startService({ seed: { partitions: 5, versions: 1 } })
    slow = await intercept(svc, () => "forward", { bytesPerSecond: 8 * MB })
  })
  afterAll(async () => {
    await slow?.close()
    await svc?.close()
  })

  it("sends a 20 MB PUT taking ~2.5 s with a 1 s first-byte timeout, once, and the blob is exact", async () => {
    const file = path.join(svc.dir, "20mb.bin")
    const bytes = randomBytes(20 * MB)
    fs.writeFileSync(file, bytes)
    const client = DataClient.layer({
      lookupUrl: slow.lookupUrl,
      credentialsPath: await svc.credentialsFile(),
      timeouts: { firstByte: "1 second" },
      retry: { maxRetries: 0 }
    })
    const started = performance.now()
    const stored = await Effect.runPromise(
      Effect.gen(function*() {
        const target = { api: "blob", hrn: DEMO, layer: "places", dataHandle: "slow-uplink" } as const
        const uploaded = yield* (yield* BlobUploads).uploadFile(target, file, {
          contentType: "application/json",
          gzip: false,
          checksum: "sha1"
        })
        return { uploaded, back: yield* (yield* BlobApi).get(DEMO, "places", "slow-uplink") }
      }).pipe(Effect.provide(client))
    )
    // The upload itself outlasted the first-byte timeout.
    expect(performance.now() - started).toBeGreaterThan(1000)
    expect(slow.seen.filter((r) => r.startsWith("PUT "))).toHaveLength(1)
    expect(stored.uploaded).toEqual({ dataSize: 20 * MB, checksum: createHash("sha1").update(bytes).digest("hex") })
    expect(Buffer.from(stored.back).equals(bytes)).toBe(true)
  })
})
