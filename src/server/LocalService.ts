import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { ExitCode } from "../domain/ExitCode.ts"
import { AppsRepo } from "./db/AppsRepo.ts"
import { DEMO_APP } from "./Seed.ts"
import * as Server from "./Server.ts"

export interface RunningService {
  readonly url: string
  readonly lookupUrl: string
  readonly tokenUrl: string
  /** credentials.properties text for an application (the demo application by default). */
  readonly credentialsFor: (appId?: string) => Effect.Effect<string>
}

export const listeningLine = (service: RunningService) =>
  JSON.stringify({ event: "listening", url: service.url, lookupUrl: service.lookupUrl, tokenUrl: service.tokenUrl })

/** The service could not start (its port taken, its database unusable); the message is its cause's. */
export class StartFailed extends Schema.TaggedError<StartFailed>()("StartFailed", { cause: Schema.Defect }) {
  get exitCode() {
    return ExitCode.failure
  }

  override get message() {
    const message = (this.cause as { message?: unknown } | undefined)?.message
    return typeof message === "string" && message !== "" ? message : String(this.cause)
  }
}

/** Starts the service for the lifetime of the scope. */
export const start = (options: Server.ServiceOptions): Effect.Effect<RunningService, StartFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Server.layer(options))
    const server = Layer.succeedContext(context)
    const address = (yield* Effect.provide(HttpServer.HttpServer, server)).address
    const host = address._tag === "TcpAddress"
      ? (address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname)
      : "127.0.0.1"
    const port = address._tag === "TcpAddress" ? address.port : 0
    const url = `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${port}`
    const apps = yield* Effect.provide(AppsRepo, server)
    const tokenUrl = `${url}/oauth2/token`
    return {
      url,
      lookupUrl: `${url}/lookup/v1`,
      tokenUrl,
      credentialsFor: (appId = DEMO_APP) =>
        Effect.map(apps.byId(appId), (app) => {
          if (app === undefined) throw new Error(`no application ${appId}`)
          return [
            `here.user.id = ${app.user_id}`,
            `here.client.id = ${app.id}`,
            `here.access.key.id = ${app.key_id}`,
            `here.access.key.secret = ${app.key_secret}`,
            `here.token.endpoint.url = ${tokenUrl}`,
            ""
          ].join("\n")
        }).pipe(Effect.orDie)
    }
  }).pipe(Effect.mapError((cause) => new StartFailed({ cause })))

/**
 * Writes credentials.properties readable only by the owner: it holds a key secret. The mode given to
 * open applies only to a new file, so an existing one is narrowed (after truncation, before the secret
 * is written).
 */
export const writeCredentials = (file: string, text: string) =>
  Effect.sync(() => {
    const fd = fs.openSync(file, "w", 0o600)
    try {
      fs.fchmodSync(fd, 0o600)
      fs.writeFileSync(fd, text)
    } finally {
      fs.closeSync(fd)
    }
  })
