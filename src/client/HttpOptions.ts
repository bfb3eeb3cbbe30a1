import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Dispatcher } from "undici"
import { TOOL } from "../domain/Tool.ts"
import { type AgentOptions, defaultAgentOptions, makeAgent } from "../net/Agent.ts"

/**
 * The connections under every request: one undici Agent (net/Agent.ts: keep-alive, bounded
 * connections per origin, timeouts, TLS >= 1.2, HTTP/1.1, HTTPS_PROXY/NO_PROXY), set up from `HttpOptions`.
 */

export interface HttpOptionsShape extends AgentOptions {
  readonly maxRedirects: number
  readonly userAgent: string
}

export class HttpOptions extends Context.Tag("catalog-export/client/HttpOptions")<HttpOptions, HttpOptionsShape>() {
  static readonly defaults: HttpOptionsShape = {
    ...defaultAgentOptions,
    maxRedirects: 10,
    userAgent: `${TOOL.name}/${TOOL.version}`
  }
  static readonly layer = (options: Partial<HttpOptionsShape> = {}) =>
    Layer.succeed(HttpOptions, { ...HttpOptions.defaults, ...options })
}

/** The undici Agent every request of the client goes through. */
export class UndiciDispatcher
  extends Context.Tag("catalog-export/client/UndiciDispatcher")<UndiciDispatcher, Dispatcher>()
{}

/** HttpClient over a tuned undici Agent (closed with the layer's scope), and the Agent itself. */
export const undiciLayer: Layer.Layer<HttpClient.HttpClient | UndiciDispatcher, never, HttpOptions> = Layer
  .unwrapScoped(
    Effect.gen(function*() {
      const options = yield* HttpOptions
      const { agent, dispatcher } = yield* Effect.acquireRelease(
        Effect.sync(() => makeAgent(options)),
        ({ agent }) => Effect.promise(() => agent.destroy())
      )
      return Layer.merge(
        NodeHttpClient.layerUndiciWithoutDispatcher.pipe(
          Layer.provide(Layer.succeed(NodeHttpClient.Dispatcher, dispatcher))
        ),
        Layer.succeed(UndiciDispatcher, agent)
      )
    })
  )
