/**
 * The OAuth 1.0a token endpoint over HTTP: JSON and form bodies, token lifetimes and their cap,
 * and every account error the endpoint produces, with HERE Account's error body shape.
 */
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  authorizationHeader,
  baseString,
  type OAuthParams,
  sign,
  signRequest,
  signWithKey
} from "../../src/domain/OAuth1.ts"
import { type Credentials, requestToken, startService, type TestService } from "../support/service.ts"
import { bearer, expectJson, sleep } from "./helpers.ts"

const MAX = 5

const nonce = () => randomBytes(16).toString("hex")
const now = () => Math.floor(Date.now() / 1000)

interface SignOptions {
  readonly url?: string
  readonly keyId?: string
  readonly secret?: string
  readonly timestamp?: number
  readonly nonce?: string
  readonly formParams?: ReadonlyArray<readonly [string, string]>
}

const header = (c: Credentials, o: SignOptions = {}) =>
  signRequest({
    url: o.url ?? c.tokenUrl,
    keyId: o.keyId ?? c.keyId,
    secret: o.secret ?? c.secret,
    timestamp: o.timestamp ?? now(),
    nonce: o.nonce ?? nonce(),
    ...(o.formParams === undefined ? {} : { formParams: o.formParams })
  })

const postJson = (url: string, authorization: string | undefined, body: unknown) =>
  fetch(url, {
    method: "POST",
    headers: { ...(authorization === undefined ? {} : { authorization }), "content-type": "application/json" },
    body: JSON.stringify(body)
  })

const postForm = (url: string, authorization: string, params: ReadonlyArray<readonly [string, string]>) =>
  fetch(url, {
    method: "POST",
    headers: { authorization, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params.map(([k, v]): [string, string] => [k, v])).toString()
  })

/** HERE Account's error body: exactly `{errorId, httpStatus, errorCode, message}`. */
const expectAccountError = async (res: Response, status: number, errorCode: number) => {
  const body = await expectJson<Record<string, unknown>>(res, status)
  expect(res.headers.get("content-type")).toMatch(/^application\/json/)
  expect(Object.keys(body).sort()).toEqual(["errorCode", "errorId", "httpStatus", "message"])
  expect(body.errorId).toMatch(/^ERROR-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  expect(body.httpStatus).toBe(status)
  expect(body.errorCode).toBe(errorCode)
  expect(typeof body.message).toBe("string")
  expect((body.message as string).length).toBeGreaterThan(0)
  return body
}

const catalogsWith = (svc: TestService, token: string) =>
  fetch(`${svc.url}/config/v1/catalogs`, { headers: bearer(token) })

describe("token endpoint", () => {
  let svc: TestService
  let demo: Credentials
  let other: Credentials

  beforeAll(async () => {
    svc = await startService({ seed: false, auth: { maxTokenSeconds: MAX } })
    demo = await svc.credentials()
    other = await svc.credentials("other-app")
  })
  afterAll(() => svc?.close())

  it("writes credentials.properties with the HERE keys for each application", async () => {
    const text = await svc.credentialsText()
    const keys = text.split("\n").filter((l) => l.includes("=")).map((l) => l.split("=")[0]!.trim())
    expect(keys.sort()).toEqual([
      "here.access.key.id",
      "here.access.key.secret",
      "here.client.id",
      "here.token.endpoint.url",
      "here.user.id"
    ])
    expect(demo.appId).toBe("demo-app")
    expect(other.appId).toBe("other-app")
    expect(demo.tokenUrl).toBe(svc.tokenUrl)
    expect(demo.keyId).not.toBe(other.keyId)
    expect(demo.secret).not.toBe(other.secret)
  })

  it("issues a bearer token for a signed JSON request, in camelCase, honouring expiresIn below the maximum", async () => {
    const res = await requestToken(demo, { grantType: "client_credentials", expiresIn: 3 })
    const body = await expectJson<Record<string, unknown>>(res, 200)
    expect(res.headers.get("content-type")).toMatch(/^application\/json/)
    expect(Object.keys(body).sort()).toEqual(["accessToken", "expiresIn", "tokenType"])
    expect(body.tokenType).toBe("bearer")
    expect(body.expiresIn).toBe(3)
    expect(typeof body.accessToken).toBe("string")
    expect((await catalogsWith(svc, body.accessToken as string)).status).toBe(200)
  })

  it("caps expiresIn at the service maximum and uses the maximum when none is asked for", async () => {
    const capped = await expectJson<{ expiresIn: number }>(
      await requestToken(demo, { grantType: "client_credentials", expiresIn: 86_400 }),
      200
    )
    expect(capped.expiresIn).toBe(MAX)
    const unspecified = await expectJson<{ expiresIn: number }>(
      await requestToken(demo, { grantType: "client_credentials" }),
      200
    )
    expect(unspecified.expiresIn).toBe(MAX)
  })

  it("echoes the requested scope", async () => {
    const scope = "hrn:here:authorization::myrealm:project/demo"
    const body = await expectJson<Record<string, unknown>>(
      await requestToken(demo, { grantType: "client_credentials", expiresIn: 2, scope }),
      200
    )
    expect(body.scope).toBe(scope)
  })

  it("refuses tokens once their (capped) lifetime is over", async () => {
    const t0 = Date.now()
    const short = await expectJson<{ accessToken: string; expiresIn: number }>(
      await requestToken(demo, { grantType: "client_credentials", expiresIn: 2 }),
      200
    )
    const long = await expectJson<{ accessToken: string; expiresIn: number }>(
      await requestToken(demo, { grantType: "client_credentials", expiresIn: 3600 }),
      200
    )
    const issued = Date.now()
    expect(short.expiresIn).toBe(2)
    expect(long.expiresIn).toBe(MAX)
    expect((await catalogsWith(svc, short.accessToken)).status).toBe(200)
    expect((await catalogsWith(svc, long.accessToken)).status).toBe(200)

    await sleep(Math.max(0, issued + 2_300 - Date.now()))
    const expired = await catalogsWith(svc, short.accessToken)
    const body = await expectJson<Record<string, string>>(expired, 401)
    expect(body).toEqual({ error: "Unauthorized", error_description: expect.stringMatching(/time/) })
    expect(expired.headers.get("www-authenticate")).toMatch(/^Bearer/)
    // The capped token is still good: it lives MAX seconds, not 2.
    expect(Date.now() - t0).toBeLessThan(MAX * 1000)
    expect((await catalogsWith(svc, long.accessToken)).status).toBe(200)

    // ...and not a second longer, although 3600 were asked for.
    await sleep(Math.max(0, issued + MAX * 1000 + 300 - Date.now()))
    expect((await catalogsWith(svc, long.accessToken)).status).toBe(401)
  })

  it("accepts a form-encoded body whose parameters are in the signature base string and answers in snake_case", async () => {
    const params = [["grant_type", "client_credentials"], ["expires_in", "4"]] as const
    const res = await postForm(demo.tokenUrl, header(demo, { formParams: params }), params)
    const body = await expectJson<Record<string, unknown>>(res, 200)
    expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "token_type"])
    expect(body.token_type).toBe("bearer")
    expect(body.expires_in).toBe(4)
    expect((await catalogsWith(svc, body.access_token as string)).status).toBe(200)

    const capped = await expectJson<Record<string, unknown>>(
      await postForm(
        demo.tokenUrl,
        header(demo, { formParams: [["grant_type", "client_credentials"], ["expires_in", "999"]] }),
        [
          ["grant_type", "client_credentials"],
          ["expires_in", "999"]
        ]
      ),
      200
    )
    expect(capped.expires_in).toBe(MAX)
  })

  it("refuses a form body that was signed without its parameters (they belong in the base string)", async () => {
    const params = [["grant_type", "client_credentials"]] as const
    await expectAccountError(await postForm(demo.tokenUrl, header(demo), params), 401, 401300)
  })

  it("does not sign JSON bodies: signing the JSON fields as parameters is a mismatch", async () => {
    const res = await postJson(demo.tokenUrl, header(demo, { formParams: [["grantType", "client_credentials"]] }), {
      grantType: "client_credentials"
    })
    await expectAccountError(res, 401, 401300)
  })

  it("includes query parameters of the token URL in the base string, as the TS SDK's sentWith", async () => {
    const url = `${demo.tokenUrl}?sentWith=OLP-TS-SDK-1.11.0`
    const ok = await postJson(url, header(demo, { url }), { grantType: "client_credentials" })
    expect((await expectJson<{ accessToken: string }>(ok, 200)).accessToken).toMatch(/\S/)
    const unsigned = await postJson(url, header(demo), { grantType: "client_credentials" })
    await expectAccountError(unsigned, 401, 401300)
  })

  it("accepts a header built step by step with baseString + sign (RFC 5849 key) and with signWithKey", async () => {
    for (
      const signer of [
        (base: string) => sign(base, demo.secret),
        (base: string) => signWithKey(base, `${demo.secret}&`)
      ]
    ) {
      const params: OAuthParams = {
        oauth_consumer_key: demo.keyId,
        oauth_nonce: nonce(),
        oauth_signature_method: "HMAC-SHA256",
        oauth_timestamp: String(now()),
        oauth_version: "1.0"
      }
      const base = baseString("POST", demo.tokenUrl, Object.entries(params))
      expect(base.startsWith(`POST&${encodeURIComponent(demo.tokenUrl)}&`)).toBe(true)
      const res = await postJson(demo.tokenUrl, authorizationHeader(params, signer(base)), {
        grantType: "client_credentials"
      })
      expect((await expectJson<{ tokenType: string }>(res, 200)).tokenType).toBe("bearer")
    }
  })

  it("answers a bad signature with 401 / 401300", async () => {
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo, { secret: `${demo.secret}x` }), { grantType: "client_credentials" }),
      401,
      401300
    )
    // Another application's secret with this key id.
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo, { secret: other.secret }), { grantType: "client_credentials" }),
      401,
      401300
    )
    // Signed for another URL.
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo, { url: `${svc.url}/oauth2/other` }), {
        grantType: "client_credentials"
      }),
      401,
      401300
    )
  })

  it("answers an unknown key id with 401 / 401300", async () => {
    const res = await postJson(demo.tokenUrl, header(demo, { keyId: "no-such-key-id" }), {
      grantType: "client_credentials"
    })
    await expectAccountError(res, 401, 401300)
  })

  it("answers a timestamp outside the window with 401 / 401204 and accepts one inside it", async () => {
    for (const timestamp of [now() - 3600, now() + 3600]) {
      await expectAccountError(
        await postJson(demo.tokenUrl, header(demo, { timestamp }), { grantType: "client_credentials" }),
        401,
        401204
      )
    }
    const inside = await postJson(demo.tokenUrl, header(demo, { timestamp: now() - 120 }), {
      grantType: "client_credentials"
    })
    expect(inside.status).toBe(200)
  })

  it("answers a reused nonce with 401 / 401207, per consumer key", async () => {
    const used = nonce()
    expect((await postJson(demo.tokenUrl, header(demo, { nonce: used }), { grantType: "client_credentials" })).status)
      .toBe(200)
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo, { nonce: used }), { grantType: "client_credentials" }),
      401,
      401207
    )
    // The same nonce under another key is a different request.
    expect((await postJson(other.tokenUrl, header(other, { nonce: used }), { grantType: "client_credentials" })).status)
      .toBe(200)
  })

  it("answers missing or malformed Authorization headers with 401 / 401202", async () => {
    const good = header(demo)
    const malformed = [
      undefined,
      "Bearer abc",
      "OAuth",
      "OAuth oauth_consumer_key=unquoted",
      good.replace(/oauth_nonce="[^"]*",/, ""),
      good.replace(/,oauth_signature="[^"]*"/, ""),
      good.replace(/oauth_consumer_key="[^"]*",/, "")
    ]
    for (const authorization of malformed) {
      await expectAccountError(
        await postJson(demo.tokenUrl, authorization, { grantType: "client_credentials" }),
        401,
        401202
      )
    }
  })

  it("answers an unsupported signature method or OAuth version with 401205 / 401206", async () => {
    await expectAccountError(
      await postJson(
        demo.tokenUrl,
        header(demo).replace("oauth_signature_method=\"HMAC-SHA256\"", "oauth_signature_method=\"HMAC-SHA1\""),
        {
          grantType: "client_credentials"
        }
      ),
      401,
      401205
    )
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo).replace("oauth_version=\"1.0\"", "oauth_version=\"2.0\""), {
        grantType: "client_credentials"
      }),
      401,
      401206
    )
  })

  it("answers a signed request with a bad body with 400 / 400200", async () => {
    await expectAccountError(await postJson(demo.tokenUrl, header(demo), { grantType: "password" }), 400, 400200)
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo), { grantType: "client_credentials", expiresIn: -5 }),
      400,
      400200
    )
    await expectAccountError(
      await postJson(demo.tokenUrl, header(demo), { grantType: "client_credentials", expiresIn: "soon" }),
      400,
      400200
    )
    const notJson = await fetch(demo.tokenUrl, {
      method: "POST",
      headers: { authorization: header(demo), "content-type": "application/json" },
      body: "{nope"
    })
    await expectAccountError(notJson, 400, 400200)
  })
})
