/**
 * A reverse proxy in front of a test service that lets a test step into one exchange: do something
 * first (store a blob under the handle the request names, kill the client), or forward the request
 * and then lose the answer (the service did the work, the client never hears of it). It keeps the
 * Host header, so the lookup service hands out base URLs that lead back through it.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { TestService } from "./service.ts"

/** What becomes of a request: relayed, or relayed with its answer dropped (the client's connection is cut). */
export type Verdict = "forward" | "lose-answer"

export type Hook = (request: http.IncomingMessage) => Verdict | Promise<Verdict>

export interface Interceptor {
  readonly lookupUrl: string
  /** Every request seen, as `METHOD path`. */
  readonly seen: Array<string>
  readonly close: () => Promise<void>
}

export interface InterceptOptions {
  /** Request bodies reach the service at most this fast (a slow uplink). */
  readonly bytesPerSecond?: number
}

export const intercept = async (
  svc: TestService,
  hook: Hook,
  options: InterceptOptions = {}
): Promise<Interceptor> => {
  const target = new URL(svc.url)
  const seen: Array<string> = []
  const server = http.createServer(async (req, res) => {
    seen.push(`${req.method} ${req.url}`)
    const verdict = await hook(req)
    const upstream = http.request({
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: req.headers,
      agent: false
    }, (answer) => {
      answer.on("error", () => res.destroy())
      if (verdict === "lose-answer") {
        answer.resume()
        answer.on("end", () => req.socket.destroy())
        return
      }
      res.writeHead(answer.statusCode!, answer.headers)
      answer.pipe(res)
    })
    // A side that goes away (a killed client, a cut answer) ends the exchange on the other side too.
    upstream.on("error", () => req.socket.destroy())
    req.on("error", () => upstream.destroy())
    res.on("error", () => upstream.destroy())
    req.on("close", () => {
      if (!req.complete) upstream.destroy()
    })
    if (options.bytesPerSecond === undefined) {
      req.pipe(upstream)
    } else {
      const rate = options.bytesPerSecond
      req.on("data", (chunk: Buffer) => {
        req.pause()
        upstream.write(chunk)
        setTimeout(() => req.resume(), (chunk.byteLength / rate) * 1000)
      })
      req.on("end", () => upstream.end())
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    lookupUrl: `http://127.0.0.1:${port}/lookup/v1`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
