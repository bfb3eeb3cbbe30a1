import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { readFile, stat } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { CredentialsError } from "./Errors.ts"

/** What a HERE credentials.properties holds. The secret stays Redacted everywhere. */
export interface CredentialsShape {
  /** Where the values came from (a file path, or a description for values given in code). */
  readonly source: string
  readonly userId: string | undefined
  readonly clientId: string | undefined
  readonly accessKeyId: string
  readonly accessKeySecret: Redacted.Redacted<string>
  readonly tokenEndpointUrl: string
  readonly scope: string | undefined
}

export const KEYS = {
  userId: "here.user.id",
  clientId: "here.client.id",
  accessKeyId: "here.access.key.id",
  accessKeySecret: "here.access.key.secret",
  tokenEndpointUrl: "here.token.endpoint.url",
  scope: "here.token.scope"
} as const

const REQUIRED = [KEYS.accessKeyId, KEYS.accessKeySecret, KEYS.tokenEndpointUrl] as const

export const ENV_VAR = "HERE_CREDENTIALS_FILE"
export const defaultPath = () => join(homedir(), ".here", "credentials.properties")

export class Credentials extends Context.Tag("catalog-export/client/Credentials")<Credentials, CredentialsShape>() {
  /** Reads the file at `path`, else at $HERE_CREDENTIALS_FILE, else ~/.here/credentials.properties. */
  static readonly layer = (path?: string) =>
    Layer.effect(
      Credentials,
      Effect.tap(load(path), (c) =>
        Effect.flatMap(looseAccess(c.source), (why) => (why === undefined ? Effect.void : Effect.logWarning(why))))
    )
  static readonly layerValue = (
    value: Omit<CredentialsShape, "source" | "userId" | "clientId" | "scope"> & Partial<CredentialsShape>
  ) =>
    Layer.succeed(
      Credentials,
      Credentials.of({ source: "given in code", userId: undefined, clientId: undefined, scope: undefined, ...value })
    )
}

export const resolvePath = (explicit?: string) =>
  Effect.gen(function*() {
    if (explicit !== undefined && explicit !== "") return { path: explicit, origin: "given" as const }
    const fromEnv = yield* Effect.orElseSucceed(Config.option(Config.string(ENV_VAR)), () => Option.none<string>())
    if (Option.isSome(fromEnv) && fromEnv.value !== "") return { path: fromEnv.value, origin: "env" as const }
    return { path: defaultPath(), origin: "default" as const }
  })

const HOW_TO_FIX = `Pass --credentials FILE, set ${ENV_VAR}, or save the credentials.properties of your app ` +
  `(platform portal: Access Manager > Apps > Credentials) as ~/.here/credentials.properties.`

export const load = Effect.fn("Credentials.load")(function*(explicitPath?: string) {
  const { path, origin } = yield* resolvePath(explicitPath)
  const text = yield* Effect.tryPromise({
    try: () => readFile(path, "utf8"),
    catch: (e) => {
      const code = (e as NodeJS.ErrnoException).code
      const from = origin === "env" ? ` (from ${ENV_VAR})` : origin === "default" ? " (the default location)" : ""
      const reason = code === "ENOENT"
        ? `the file does not exist${from}. ${HOW_TO_FIX}`
        : code === "EACCES"
        ? `the file cannot be read (permission denied)${from}. Make it readable by this user.`
        : code === "EISDIR"
        ? `this is a directory, not a file${from}. ${HOW_TO_FIX}`
        : `the file cannot be read${from}: ${code ?? String(e)}`
      return new CredentialsError({ path, reason })
    }
  })
  return yield* fromProperties(parseProperties(text), path)
})

/**
 * Why the file is too open, as ssh says of a private key readable by others; undefined when only its
 * owner may read or write it (or on Windows, which has no such mode bits).
 */
export const looseAccess = (path: string) =>
  Effect.promise(() => stat(path).then((s) => s.mode, () => undefined)).pipe(
    Effect.map((mode) =>
      mode === undefined || process.platform === "win32" || (mode & 0o077) === 0
        ? undefined
        : `credentials file ${path} is accessible by other users (mode ${
          (mode & 0o777).toString(8).padStart(4, "0")
        }): ` +
          `anyone who can read it can act as your app. Restrict it: chmod 600 ${path}`
    )
  )

export const fromProperties = (properties: ReadonlyMap<string, string>, path: string) =>
  Effect.gen(function*() {
    for (const key of REQUIRED) {
      if ((properties.get(key) ?? "") === "") {
        return yield* new CredentialsError({
          path,
          key,
          reason: `the key is missing or empty. The file needs ${REQUIRED.join(", ")}; ` +
            `download your app's credentials.properties again from the platform portal, or pass another file with --credentials FILE.`
        })
      }
    }
    const endpoint = properties.get(KEYS.tokenEndpointUrl)!
    if (!/^https?:\/\/[^\s]+$/i.test(endpoint) || !URL.canParse(endpoint)) {
      return yield* new CredentialsError({
        path,
        key: KEYS.tokenEndpointUrl,
        reason: `"${endpoint}" is not an http(s) URL (expected e.g. https://account.api.here.com/oauth2/token)`
      })
    }
    const optional = (key: string) => {
      const value = properties.get(key)
      return value === undefined || value === "" ? undefined : value
    }
    return Credentials.of({
      source: path,
      userId: optional(KEYS.userId),
      clientId: optional(KEYS.clientId),
      accessKeyId: properties.get(KEYS.accessKeyId)!,
      accessKeySecret: Redacted.make(properties.get(KEYS.accessKeySecret)!),
      tokenEndpointUrl: endpoint,
      scope: optional(KEYS.scope)
    })
  })

const isBlank = (c: string | undefined) => c === " " || c === "\t" || c === "\f"

const stripLeading = (s: string) => {
  let i = 0
  while (isBlank(s[i])) i++
  return s.slice(i)
}

const endsWithOddBackslashes = (s: string) => {
  let n = 0
  for (let i = s.length - 1; i >= 0 && s[i] === "\\"; i--) n++
  return n % 2 === 1
}

const unescape = (s: string): string => {
  if (!s.includes("\\")) return s
  let out = ""
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!
    if (c !== "\\") {
      out += c
      continue
    }
    const e = s[++i]
    if (e === undefined) break
    if (e === "t") out += "\t"
    else if (e === "n") out += "\n"
    else if (e === "r") out += "\r"
    else if (e === "f") out += "\f"
    else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(s.slice(i + 1, i + 5))) {
      out += String.fromCharCode(parseInt(s.slice(i + 1, i + 5), 16))
      i += 4
    } else out += e
  }
  return out
}

/**
 * Java `.properties` syntax: `key = value`, `key=value`, `key: value`, `key value`; `#` and `!` comment
 * lines; backslash escapes (\t \n \r \f \uXXXX, `\x` for any other x); a line ending in an odd
 * number of backslashes continues on the next one, whose leading blanks are dropped.
 */
export const parseProperties = (text: string): Map<string, string> => {
  const lines = text.replace(/^\uFEFF/, "").split(/\r\n|\r|\n/)
  const properties = new Map<string, string>()
  for (let n = 0; n < lines.length; n++) {
    let line = stripLeading(lines[n]!)
    if (line === "" || line[0] === "#" || line[0] === "!") continue
    while (endsWithOddBackslashes(line)) {
      line = line.slice(0, -1)
      if (n + 1 >= lines.length) break
      line += stripLeading(lines[++n]!)
    }
    let end = 0
    while (end < line.length) {
      const c = line[end]!
      if (c === "\\") end += 2
      else if (c === "=" || c === ":" || isBlank(c)) break
      else end++
    }
    const key = line.slice(0, Math.min(end, line.length))
    let valueStart = end
    while (isBlank(line[valueStart])) valueStart++
    if (line[valueStart] === "=" || line[valueStart] === ":") valueStart++
    while (isBlank(line[valueStart])) valueStart++
    properties.set(unescape(key), unescape(line.slice(valueStart)))
  }
  return properties
}
