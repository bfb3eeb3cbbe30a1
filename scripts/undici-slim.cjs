// What the CLI bundle takes from undici, in place of its index.js (see build.mjs): the dispatchers
// and their request API, without fetch, WebSocket, EventSource, cookies, caches and mocks, which
// the CLI never uses and every command would otherwise compile at start-up (~300 KiB; the cookies
// module also makes Node load its own copy of undici).
"use strict"

const Dispatcher = require("undici/lib/dispatcher/dispatcher")
const api = require("undici/lib/api")
const { getGlobalDispatcher, setGlobalDispatcher } = require("undici/lib/global")

// undici's index.js does the same: request(), stream() and the rest are methods of every dispatcher.
Object.assign(Dispatcher.prototype, api)

module.exports = {
  Dispatcher,
  Agent: require("undici/lib/dispatcher/agent"),
  Pool: require("undici/lib/dispatcher/pool"),
  ProxyAgent: require("undici/lib/dispatcher/proxy-agent"),
  EnvHttpProxyAgent: require("undici/lib/dispatcher/env-http-proxy-agent"),
  errors: require("undici/lib/core/errors"),
  getGlobalDispatcher,
  setGlobalDispatcher
}
