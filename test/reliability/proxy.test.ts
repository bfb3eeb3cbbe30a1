/**
 * Corporate networks, through the real CLI: every request through the forward proxy HTTP_PROXY /
 * HTTPS_PROXY name (a real CONNECT proxy on loopback, the `proxy` package), NO_PROXY honoured,
 * redirects through the proxy without Authorization to another origin, HTTPS through the tunnel with
 * a private CA from NODE_EXTRA_CA_CERTS and the TLS 1.2 floor kept; a credentials file other users
 * can read is warned about.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { createProxy } from "proxy"
import { beforeAll, describe, expect, it } from "vitest"
import { cli } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { cleanups } from "../support/files.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"
import { authorizedGetter, expectMatchesService, isBlobRequest, serviceState, startProxy } from "./support.ts"

const { cleanup, tempDir } = cleanups()
let svc: TestService
let credentials: string

beforeAll(async () => {
  svc = await startService({ seed: { partitions: 60, versions: 1, blobBytes: 64 } })
  credentials = await svc.credentialsFile()
  cleanup.push(() => svc.close())
})

const listen = async (server: http.Server) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanup.push(() =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  )
  return (server.address() as AddressInfo).port
}

/** A forward proxy as corporate networks have: CONNECT tunnels (and plain requests), each recorded. */
const forwardProxy = async () => {
  const server = createProxy(http.createServer())
  const tunnels: Array<string> = []
  const plain: Array<string> = []
  server.on("connect", (req: http.IncomingMessage) => tunnels.push(req.url ?? ""))
  server.on("request", (req: http.IncomingMessage) => plain.push(req.url ?? ""))
  const port = await listen(server)
  return { url: `http://127.0.0.1:${port}`, tunnels, plain }
}

/** Another origin serving blob bytes (as presigned storage would), recording the Authorization it was sent. */
const storage = async () => {
  const get = authorizedGetter(svc)
  const seen: Array<string | undefined> = []
  const port = await listen(http.createServer(async (req, res) => {
    seen.push(req.headers.authorization)
    const blob = await get(
      `/blobstore/v1/catalogs/${DEMO}/layers/places/data/${(req.url ?? "").slice("/store/".length)}`
    )
    res.writeHead(blob.status, { "content-type": "application/json" })
    res.end(Buffer.from(await blob.arrayBuffer()))
  }))
  return { origin: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}`, seen }
}

/** The service's API origin (a recording proxy in front of it) answering every blob GET with a redirect to `storage`. */
const redirectingBlobs = async (storageUrl: string, status: number) => {
  const service = await startProxy(svc.url)
  cleanup.push(() => service.close())
  service.decide = (req) => {
    const url = req.url ?? ""
    return req.method === "GET" && /\/data\/[^/?]+$/.test(url)
      ? { kind: "respond", status, headers: { location: `${storageUrl}/store/${url.slice(url.lastIndexOf("/") + 1)}` } }
      : { kind: "forward" }
  }
  return service
}

const exportPlaces = (lookupUrl: string, env: Record<string, string | undefined>, extra: Array<string> = []) => {
  const out = tempDir("proxy-out-")
  return cli(
    [
      "export",
      "--catalog",
      DEMO,
      "--layer",
      "places",
      "--version",
      "0",
      "--out",
      out,
      "--parts",
      "1",
      "--lookup-url",
      lookupUrl,
      "--credentials",
      credentials,
      "--quiet",
      ...extra
    ],
    {
      env: {
        HTTP_PROXY: undefined,
        HTTPS_PROXY: undefined,
        NO_PROXY: undefined,
        http_proxy: undefined,
        https_proxy: undefined,
        no_proxy: undefined,
        ...env
      }
    }
  ).then((run) => ({ run, out }))
}

describe("behind a forward proxy", () => {
  it("sends every request through HTTP_PROXY, follows blob redirects through it, and drops Authorization leaving the origin", async () => {
    const forward = await forwardProxy()
    const store = await storage()
    const service = await redirectingBlobs(store.url, 307)

    const { run, out } = await exportPlaces(service.lookupUrl, { HTTP_PROXY: forward.url })
    expect(run.code, run.stderr).toBe(0)
    expectMatchesService(
      await readParquet(path.join(out, "demo", "places", "version=0")),
      await serviceState(svc, "places", 0)
    )
    // Tunnels to the three origins: the token service (the credentials' endpoint), the service's API origin and the storage.
    const serviceOrigin = new URL(service.url).host
    const tokenOrigin = new URL(svc.tokenUrl).host
    expect(new Set(forward.tunnels)).toEqual(new Set([serviceOrigin, tokenOrigin, store.origin]))
    // The blob requests reached the service's origin with the token, the storage without it.
    expect(service.log.filter(isBlobRequest).every((e) => e.authorization?.startsWith("Bearer "))).toBe(true)
    expect(store.seen.length).toBe(60)
    expect(store.seen.filter((a) => a !== undefined)).toEqual([])
  })

  it("goes direct to the hosts NO_PROXY names, through the proxy to the others", async () => {
    const forward = await forwardProxy()
    const store = await storage()
    const service = await redirectingBlobs(store.url, 302)
    const { run } = await exportPlaces(service.lookupUrl, {
      http_proxy: forward.url,
      no_proxy: `${store.origin}, ${new URL(svc.tokenUrl).host}`
    })
    expect(run.code, run.stderr).toBe(0)
    expect(forward.tunnels.length).toBeGreaterThan(0)
    expect(new Set(forward.tunnels)).toEqual(new Set([new URL(service.url).host]))
    expect(store.seen.length).toBe(60)

    const none = await forwardProxy()
    const direct = await exportPlaces(svc.lookupUrl, { HTTP_PROXY: none.url, NO_PROXY: "127.0.0.1" })
    expect(direct.run.code, direct.run.stderr).toBe(0)
    expect([...none.tunnels, ...none.plain]).toEqual([])
  })

  it("speaks HTTPS through the tunnel: a private CA from NODE_EXTRA_CA_CERTS is trusted, and TLS below 1.2 is refused", async () => {
    const dir = tempDir("proxy-tls-")
    const key = path.join(dir, "key.pem")
    const cert = path.join(dir, "cert.pem")
    execFileSync("openssl", [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1"
    ], { stdio: "ignore" })
    /** The service behind a TLS front (as a gateway would be), which tells it the scheme so lookup answers https URLs. */
    const front = async (tls: https.ServerOptions) => {
      const upstream = new URL(svc.url)
      const server = https.createServer(
        { key: fs.readFileSync(key), cert: fs.readFileSync(cert), ...tls },
        (req, res) => {
          const forwarded = http.request({
            host: upstream.hostname,
            port: upstream.port,
            method: req.method,
            path: req.url,
            headers: { ...req.headers, "x-forwarded-proto": "https" }
          }, (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.pipe(res)
          })
          req.pipe(forwarded)
        }
      )
      return `https://127.0.0.1:${await listen(server)}`
    }
    const secure = await front({})
    const forward = await forwardProxy()
    const trusted = await exportPlaces(`${secure}/lookup/v1`, { HTTPS_PROXY: forward.url, NODE_EXTRA_CA_CERTS: cert })
    expect(trusted.run.code, trusted.run.stderr).toBe(0)
    expectMatchesService(
      await readParquet(path.join(trusted.out, "demo", "places", "version=0")),
      await serviceState(svc, "places", 0)
    )
    expect(forward.tunnels).toContain(new URL(secure).host)

    const untrusted = await exportPlaces(`${secure}/lookup/v1`, { HTTPS_PROXY: forward.url })
    expect(untrusted.run.code).toBe(1)
    expect(untrusted.run.stderr).toMatch(/certificate is not trusted: .*NODE_EXTRA_CA_CERTS/)

    const old = await front({ minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" })
    const refused = await exportPlaces(`${old}/lookup/v1`, { HTTPS_PROXY: forward.url, NODE_EXTRA_CA_CERTS: cert })
    expect(refused.run.code).toBe(1)
    expect(refused.run.stderr).toMatch(
      /ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION|ERR_SSL_UNSUPPORTED_PROTOCOL|protocol version/i
    )
    expect(forward.tunnels).toContain(new URL(old).host)
  })
})

describe("the credentials file", () => {
  it("is warned about when other users can read it, as ssh does for keys", async () => {
    const dir = tempDir("proxy-creds-")
    const loose = path.join(dir, "credentials.properties")
    fs.writeFileSync(loose, await svc.credentialsText())
    fs.chmodSync(loose, 0o640)
    const run = await cli(["catalogs", "list", "--json", "--lookup-url", svc.lookupUrl, "--credentials", loose])
    expect(run.code, run.stderr).toBe(0)
    const warnings = run.stderr.split("\n").filter((l) => l.includes("is accessible by other users"))
    expect(warnings).toHaveLength(1)
    expect(JSON.parse(warnings[0]!)).toMatchObject({
      logLevel: "WARN",
      message:
        `credentials file ${loose} is accessible by other users (mode 0640): anyone who can read it can act as your app. Restrict it: chmod 600 ${loose}`
    })
    fs.chmodSync(loose, 0o600)
    const quiet = await cli(["catalogs", "list", "--json", "--lookup-url", svc.lookupUrl, "--credentials", loose])
    expect(quiet.code).toBe(0)
    expect(quiet.stderr).not.toContain("accessible by other users")
  })
})
