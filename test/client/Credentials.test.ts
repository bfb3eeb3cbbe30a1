import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { inspect } from "node:util"
import { Credentials, load, parseProperties } from "../../src/client/Credentials.ts"
import { CredentialsError } from "../../src/client/Errors.ts"

const dir = mkdtempSync(join(tmpdir(), "credentials-test-"))
const file = (name: string, text: string) => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

const SECRET = "Zm9vYmFy-very/secret+value=="
const complete = [
  "here.user.id = HERE-user",
  "here.client.id = client-1",
  "here.access.key.id = KEYID",
  `here.access.key.secret = ${SECRET}`,
  "here.token.endpoint.url = https://account.api.here.com/oauth2/token"
].join("\n")

const failure = <A>(exit: Exit.Exit<A, CredentialsError>): CredentialsError => {
  if (Exit.isSuccess(exit)) throw new Error("expected a failure")
  const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (!(error instanceof CredentialsError)) throw new Error(`expected a CredentialsError, got ${String(exit.cause)}`)
  return error
}

describe("parseProperties", () => {
  it("reads the separators of the Java properties format", () => {
    const p = parseProperties("a = 1\nb=2\nc: 3\nd 4\n  e\t=\t5  \nf=\ng")
    expect(Object.fromEntries(p)).toEqual({ a: "1", b: "2", c: "3", d: "4", e: "5  ", f: "", g: "" })
  })

  it("skips # and ! comments and blank lines, keeps # inside values", () => {
    const p = parseProperties("# comment\n! other comment\n\n   \nkey = value # not a comment\n  # indented comment")
    expect(Object.fromEntries(p)).toEqual({ key: "value # not a comment" })
  })

  it("decodes escapes, \\uXXXX and escaped separators in keys", () => {
    const p = parseProperties(
      "tab=a\\tb\nnl=a\\nb\nuni=caf\\u00e9 \\u2603\nback=c:\\\\dir\\\\x\nkey\\ with\\=odd\\:chars = v\nplain=\\q"
    )
    expect(p.get("tab")).toBe("a\tb")
    expect(p.get("nl")).toBe("a\nb")
    expect(p.get("uni")).toBe("café ☃")
    expect(p.get("back")).toBe("c:\\dir\\x")
    expect(p.get("key with=odd:chars")).toBe("v")
    expect(p.get("plain")).toBe("q")
  })

  it("joins continuation lines and drops their leading blanks; an even number of backslashes does not continue", () => {
    const p = parseProperties(
      "long = first \\\n     second \\\n\tthird\nnext = x\\\\\nafter = y\r\nwin = z\\\r\n  continued"
    )
    expect(p.get("long")).toBe("first second third")
    expect(p.get("next")).toBe("x\\")
    expect(p.get("after")).toBe("y")
    expect(p.get("win")).toBe("zcontinued")
  })

  it("does not treat a continued line starting with # as a comment", () => {
    const p = parseProperties("k = a\\\n  #b")
    expect(p.get("k")).toBe("a#b")
  })
})

describe("Credentials.load", () => {
  it.effect("reads the keys from an explicit path and keeps the secret redacted", () =>
    Effect.gen(function*() {
      const path = file("ok.properties", complete + "\nhere.token.scope = hrn:here:authorization::org:project/p1\n")
      const credentials = yield* load(path)
      expect(credentials.accessKeyId).toBe("KEYID")
      expect(credentials.userId).toBe("HERE-user")
      expect(credentials.clientId).toBe("client-1")
      expect(credentials.tokenEndpointUrl).toBe("https://account.api.here.com/oauth2/token")
      expect(credentials.scope).toBe("hrn:here:authorization::org:project/p1")
      expect(Redacted.value(credentials.accessKeySecret)).toBe(SECRET)
      for (
        const text of [
          String(credentials.accessKeySecret),
          JSON.stringify(credentials),
          inspect(credentials, { depth: 10 })
        ]
      ) {
        expect(text).not.toContain(SECRET)
      }
    }))

  it.effect("falls back to HERE_CREDENTIALS_FILE", () =>
    Effect.gen(function*() {
      const path = file("env.properties", complete.replace("KEYID", "FROM-ENV"))
      const credentials = yield* load().pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["HERE_CREDENTIALS_FILE", path]])))
      )
      expect(credentials.accessKeyId).toBe("FROM-ENV")
      expect(credentials.source).toBe(path)
    }))

  it.effect("a missing file names the file and says what to do", () =>
    Effect.gen(function*() {
      const path = join(dir, "does-not-exist.properties")
      const error = failure(yield* Effect.exit(load(path)))
      expect(error.path).toBe(path)
      expect(error.message).toContain(path)
      expect(error.message).toContain("does not exist")
      expect(error.message).toContain("--credentials")
      expect(error.message).toContain("HERE_CREDENTIALS_FILE")
    }))

  it.effect("a missing file named by HERE_CREDENTIALS_FILE says where the path came from", () =>
    Effect.gen(function*() {
      const error = failure(
        yield* Effect.exit(
          load().pipe(
            Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["HERE_CREDENTIALS_FILE", join(dir, "nope")]])))
          )
        )
      )
      expect(error.message).toContain("from HERE_CREDENTIALS_FILE")
    }))

  it.effect("each missing required key is named; the secret never appears in the error", () =>
    Effect.gen(function*() {
      for (const key of ["here.access.key.id", "here.access.key.secret", "here.token.endpoint.url"]) {
        const text = complete
          .split("\n")
          .filter((line) => !line.startsWith(key))
          .join("\n")
        const path = file(`missing-${key}.properties`, text)
        const error = failure(yield* Effect.exit(load(path)))
        expect(error.key).toBe(key)
        expect(error.message).toContain(path)
        expect(error.message).toContain(`"${key}"`)
        expect(error.message).toContain("download")
        for (const shown of [error.message, String(error), JSON.stringify(error), inspect(error)]) {
          expect(shown).not.toContain(SECRET)
        }
      }
    }))

  it.effect("an empty value counts as missing; a token URL that is not a URL is rejected", () =>
    Effect.gen(function*() {
      const empty = failure(yield* Effect.exit(load(file("empty.properties", complete.replace("= KEYID", "=")))))
      expect(empty.key).toBe("here.access.key.id")
      const badUrl = failure(
        yield* Effect.exit(
          load(
            file(
              "badurl.properties",
              complete.replace("https://account.api.here.com/oauth2/token", "account.api.here.com")
            )
          )
        )
      )
      expect(badUrl.key).toBe("here.token.endpoint.url")
    }))

  it.effect("Credentials.layer provides the service", () =>
    Effect.gen(function*() {
      const credentials = yield* Credentials
      expect(credentials.accessKeyId).toBe("KEYID")
    }).pipe(Effect.provide(Credentials.layer(file("layer.properties", complete)))))
})
