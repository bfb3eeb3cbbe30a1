import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as DataClient from "../../src/client/DataClient.ts"
import { Encoder } from "../../src/encoder/Encoder.ts"
import { Service, type TestService } from "./service.ts"

/** What the product's commands run with: the Data API client and the encoder thread of the export. */
export type ClientLayer = Layer.Layer<DataClient.DataClient | Encoder, unknown>

/** The product's Data API client, configured for a running test service as the demo application (or another). */
export const clientLayerFor = async (
  svc: TestService,
  options: {
    readonly appId?: string
    readonly concurrency?: number
    readonly retry?: DataClient.DataClientOptions["retry"]
  } = {}
): Promise<ClientLayer> =>
  Layer.merge(
    DataClient.layer({
      lookupUrl: svc.lookupUrl,
      credentialsPath: await svc.credentialsFile(options.appId),
      concurrency: options.concurrency ?? 16,
      ...(options.retry === undefined ? {} : { retry: options.retry })
    }),
    Encoder.auto
  )

/** `clientLayerFor` the test service in the environment (`Service.layer`), for tests written with @effect/vitest's `layer(...)`. */
export const clientLayer = (
  options: Parameters<typeof clientLayerFor>[1] = {}
): Layer.Layer<DataClient.DataClient | Encoder, unknown, Service> =>
  Layer.unwrapEffect(Effect.flatMap(Service, (svc) => Effect.promise(() => clientLayerFor(svc, options))))

/** Provides the product's Data API client for a running test service (and the encoder) to an Effect: `it.live(..., () => program.pipe(provideClient(svc)))` (live: the client's retries and polls wait real time). */
export const provideClient =
  (svc: TestService, options: Parameters<typeof clientLayerFor>[1] = {}) =>
  <A, E>(effect: Effect.Effect<A, E, DataClient.DataClient | Encoder>): Effect.Effect<A, unknown> =>
    Effect.provide(effect, Layer.unwrapEffect(Effect.promise(() => clientLayerFor(svc, options))))

export const runWith = <A, E>(layer: ClientLayer, effect: Effect.Effect<A, E, DataClient.DataClient | Encoder>) =>
  Effect.runPromise(effect.pipe(Effect.provide(layer)) as Effect.Effect<A, unknown>)
