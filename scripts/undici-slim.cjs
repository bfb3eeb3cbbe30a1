// What the CLI bundle takes from undici, in place of its index.js (see build.mjs): the dispatchers
// and their request API, without fetch, WebSocket, EventSource, cookies, caches and mocks, which
// the CLI never uses and every command would otherwise compile at start-up (~300 KiB; the cookies
// module also makes Node load its own copy of undici).
"use strict"

const Dispatcher = require("undici/lib/dispatcher/dispatcher")
const api = require("undici/lib/api")
const { getGlobalDispatcher } = require("undici/lib/global")

// undici's index.js does the same: request(), stream() and the rest are methods of every dispatcher.
Object.assign(Dispatcher.prototype, api)

// What src/net/Agent.ts and @effect/platform-node (NodeHttpClient, NodeClusterSocket) use.
module.exports = {
  Dispatcher,
  Agent: require("undici/lib/dispatcher/agent"),
  EnvHttpProxyAgent: require("undici/lib/dispatcher/env-http-proxy-agent"),
  getGlobalDispatcher
}
