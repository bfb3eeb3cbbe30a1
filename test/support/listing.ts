import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { MetadataApi } from "../../src/client/MetadataApi.ts"
import { clientLayerFor } from "./client.ts"
import { startService } from "./service.ts"

/**
 * Publishes one version of `total` partitions to the local service, lists them through the client
 * and measures the live heap (after full collections) every 100,000 partitions: what the listing
 * retains, not garbage waiting for collection.
 */
export const listingHeapGrowth = async (total: number) => {
  const svc = await startService({ seed: { partitions: 0, versions: 1 } })
  try {
    const hrn = "hrn:local:data:::demo"
    const headers = { authorization: `Bearer ${await svc.token()}`, "content-type": "application/json" }
    const base = `${svc.url}/publish/v2/catalogs/${hrn}`
    const init = (await (await fetch(`${base}/publications`, {
      method: "POST",
      headers,
      body: JSON.stringify({ layerIds: ["places"] })
    })).json()) as { id: string }
    const BATCH = 10_000
    for (let start = 0; start < total; start += BATCH) {
      const partitions = Array.from(
        { length: Math.min(BATCH, total - start) },
        (_, i) => ({ partition: `p${String(start + i).padStart(8, "0")}`, dataHandle: `h${start + i}` })
      )
      const res = await fetch(`${base}/layers/places/publications/${init.id}/partitions`, {
        method: "POST",
        headers,
        body: JSON.stringify({ partitions })
      })
      if (res.status !== 204) throw new Error(`publishing failed: ${res.status} ${await res.text()}`)
    }
    await fetch(`${base}/publications/${init.id}`, { method: "PUT", headers })
    const version =
      ((await (await fetch(`${svc.url}/metadata/v1/catalogs/${hrn}/versions/latest`, { headers })).json()) as {
        version: number
      }).version

    v8.setFlagsFromString("--expose-gc")
    const gc = vm.runInNewContext("gc") as () => void
    gc()
    const baseline = process.memoryUsage().heapUsed
    let peak = baseline
    let count = 0
    let last = ""
    let ordered = true
    await Effect.runPromise(
      Effect.flatMap(MetadataApi, (m) =>
        m.partitions(hrn, "places", { version }).pipe(
          Stream.runForEach((p) =>
            Effect.sync(() => {
              if (p.partition <= last) ordered = false
              last = p.partition
              if (++count % 100_000 === 0) {
                gc()
                peak = Math.max(peak, process.memoryUsage().heapUsed)
              }
            })
          )
        )).pipe(Effect.provide(await clientLayerFor(svc))) as Effect.Effect<void, unknown>
    )
    return { count, ordered, growthMb: (peak - baseline) / 1e6 }
  } finally {
    await svc.close()
  }
}
