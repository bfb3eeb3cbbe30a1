import { Effect, type Layer } from "effect"
import * as DataClient from "../../src/client/DataClient.ts"
import type { TestService } from "./service.ts"

/** The product's Data API client, configured for a running test service as the demo application (or another). */
export const clientLayerFor = async (
  svc: TestService,
  options: { readonly appId?: string; readonly concurrency?: number; readonly retry?: DataClient.DataClientOptions["retry"] } = {}
): Promise<Layer.Layer<DataClient.DataClient, unknown>> =>
  DataClient.layer({
    lookupUrl: svc.lookupUrl,
    credentialsPath: await svc.credentialsFile(options.appId),
    concurrency: options.concurrency ?? 16,
    ...(options.retry === undefined ? {} : { retry: options.retry })
  })

export const runWith = <A, E>(layer: Layer.Layer<DataClient.DataClient, unknown>, effect: Effect.Effect<A, E, DataClient.DataClient>) =>
  Effect.runPromise(effect.pipe(Effect.provide(layer)) as Effect.Effect<A, unknown>)
