import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { signRequest } from "../../src/domain/OAuth1.ts"
import * as LocalService from "../../src/server/LocalService.ts"
import { DEMO_APP } from "../../src/server/Seed.ts"
import { defaultSeed, noSeed } from "../../src/server/Seed.ts"
import { defaultServiceOptions, type ServiceOptions } from "../../src/server/Server.ts"

/** The catalogs of the demo seed: one the demo application reads and writes, one it may not read. */
export const DEMO = "hrn:local:data:::demo"
export const RESTRICTED = "hrn:local:data:::restricted"

export interface Credentials {
  readonly userId: string
  readonly appId: string
  readonly keyId: string
  readonly secret: string
  readonly tokenUrl: string
}

export interface TestService {
  readonly url: string
  readonly lookupUrl: string
  readonly tokenUrl: string
  /** A directory removed on close, for files a test writes. */
  readonly dir: string
  readonly credentialsText: (appId?: string) => Promise<string>
  readonly credentials: (appId?: string) => Promise<Credentials>
  /** Writes credentials.properties for an application and returns its path. */
  readonly credentialsFile: (appId?: string) => Promise<string>
  /** A fresh bearer token for an application (the demo application by default). */
  readonly token: (appId?: string, expiresIn?: number) => Promise<string>
  /** fetch with the demo application's bearer token. */
  readonly get: (pathOrUrl: string, init?: RequestInit & { appId?: string }) => Promise<Response>
  readonly close: () => Promise<void>
}

export const parseCredentials = (text: string): Credentials => {
  const props = Object.fromEntries(
    text.split("\n").filter((l) => l.includes("=")).map((l) => {
      const i = l.indexOf("=")
      return [l.slice(0, i).trim(), l.slice(i + 1).trim()]
    })
  )
  return {
    userId: props["here.user.id"]!,
    appId: props["here.client.id"]!,
    keyId: props["here.access.key.id"]!,
    secret: props["here.access.key.secret"]!,
    tokenUrl: props["here.token.endpoint.url"]!
  }
}

export const requestToken = async (
  c: Credentials,
  body: Record<string, unknown> = { grantType: "client_credentials" }
) => {
  const authorization = signRequest({
    url: c.tokenUrl,
    keyId: c.keyId,
    secret: c.secret,
    timestamp: Math.floor(Date.now() / 1000),
    nonce: crypto.randomUUID().replace(/-/g, "")
  })
  return fetch(c.tokenUrl, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
}

export type TestServiceOptions = Partial<Omit<ServiceOptions, "seed">> & {
  readonly seed?: Partial<typeof defaultSeed> | false
}

/** Starts the real local service in this process on a free loopback port. */
export const startService = async (options: TestServiceOptions = {}): Promise<TestService> => {
  const scope = Effect.runSync(Scope.make())
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-test-"))
  const seed = options.seed === false ? noSeed : { ...defaultSeed, partitions: 300, versions: 12, ...options.seed }
  const running = await Effect.runPromise(
    LocalService.start({ ...defaultServiceOptions, port: 0, ...options, seed }).pipe(Scope.extend(scope))
  )
  const credentialsText = (appId = DEMO_APP) => Effect.runPromise(running.credentialsFor(appId))
  const credentials = async (appId = DEMO_APP) => parseCredentials(await credentialsText(appId))
  const tokens = new Map<string, string>()
  const token = async (appId = DEMO_APP, expiresIn?: number) => {
    const body = expiresIn === undefined
      ? { grantType: "client_credentials" }
      : { grantType: "client_credentials", expiresIn }
    const res = await requestToken(await credentials(appId), body)
    if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`)
    return ((await res.json()) as { accessToken: string }).accessToken
  }
  return {
    url: running.url,
    lookupUrl: running.lookupUrl,
    tokenUrl: running.tokenUrl,
    dir,
    credentialsText,
    credentials,
    credentialsFile: async (appId = DEMO_APP) => {
      const file = path.join(dir, `${appId}.properties`)
      fs.writeFileSync(file, await credentialsText(appId), { mode: 0o600 })
      return file
    },
    token,
    get: async (pathOrUrl, init = {}) => {
      const appId = init.appId ?? DEMO_APP
      if (!tokens.has(appId)) tokens.set(appId, await token(appId))
      const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${running.url}${pathOrUrl}`
      return fetch(url, { ...init, headers: { authorization: `Bearer ${tokens.get(appId)}`, ...(init.headers ?? {}) } })
    },
    close: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** The running test service, for tests written with @effect/vitest's `layer(...)`. */
export class Service extends Context.Tag("test/Service")<Service, TestService>() {
  /** Starts the service when the layer is built and closes it when the layer's scope closes. */
  static readonly layer = (options: TestServiceOptions = {}) =>
    Layer.scoped(
      Service,
      Effect.acquireRelease(Effect.promise(() => startService(options)), (svc) => Effect.promise(() => svc.close()))
    )
}
