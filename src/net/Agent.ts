import * as Duration from "effect/Duration"
import { Agent, type Dispatcher, EnvHttpProxyAgent } from "undici"

/**
 * The connections under every HTTP request of ours (the client's, and telemetry's OTLP exports): one
 * undici Agent (keep-alive, bounded connections per origin, timeouts, TLS >= 1.2, HTTP/1.1,
 * HTTPS_PROXY/NO_PROXY). The client sets it up from its HttpOptions (client/HttpOptions.ts).
 */

export interface AgentOptions {
  /** Connections per origin; size it to the number of requests the caller runs at once. */
  readonly concurrency: number
  readonly connectTimeout: Duration.DurationInput
  /** Time to the first byte of the response headers. */
  readonly firstByteTimeout: Duration.DurationInput
  /** Longest pause between two body chunks. */
  readonly idleTimeout: Duration.DurationInput
  readonly keepAliveTimeout: Duration.DurationInput
}

export const defaultAgentOptions: AgentOptions = {
  concurrency: 16,
  connectTimeout: "10 seconds",
  firstByteTimeout: "60 seconds",
  idleTimeout: "30 seconds",
  keepAliveTimeout: "10 seconds"
}

/** Connections per origin beyond `concurrency`: room for the listings of an export's parts and the odd lookup. */
const CONTROL_CONNECTIONS = 8

/** Whether the standard proxy variables ask for one (then NO_PROXY / no_proxy says which hosts go direct). */
export const proxyConfigured = (env: NodeJS.ProcessEnv = process.env) =>
  [env.HTTPS_PROXY, env.https_proxy, env.HTTP_PROXY, env.http_proxy].some((v) => v !== undefined && v !== "")

/**
 * undici Agent tuned for many small requests to few origins; behind HTTPS_PROXY / HTTP_PROXY (and
 * NO_PROXY) an EnvHttpProxyAgent with the same pool, timeouts and TLS floor, towards the proxy and
 * through its CONNECT tunnel to the service alike. Extra CA certificates (a corporate proxy's) come
 * from NODE_EXTRA_CA_CERTS, which Node reads at start.
 */
export const makeAgent = (options: AgentOptions) => {
  const headersTimeout = Duration.toMillis(options.firstByteTimeout)
  const bodyTimeout = Duration.toMillis(options.idleTimeout)
  const tls = { timeout: Duration.toMillis(options.connectTimeout), minVersion: "TLSv1.2" as const }
  const agentOptions = {
    // Listings, lookups and token requests run beside the `concurrency` blob downloads, often on the
    // same origin (the local service): they get connections of their own rather than one of those.
    connections: options.concurrency + CONTROL_CONNECTIONS,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: Duration.toMillis(options.keepAliveTimeout),
    keepAliveMaxTimeout: Math.max(Duration.toMillis(options.keepAliveTimeout), 60_000),
    headersTimeout,
    bodyTimeout,
    connect: tls
  }
  const agent: Dispatcher = proxyConfigured()
    ? new EnvHttpProxyAgent({ ...agentOptions, proxyTls: tls, requestTls: tls })
    : new Agent(agentOptions)
  // @effect/platform-node passes its own (disabled) timeouts with every request; restore ours.
  const dispatcher = agent.compose((dispatch) => (opts, handler) =>
    dispatch({ ...opts, headersTimeout, bodyTimeout }, handler)
  )
  return { agent, dispatcher }
}
