import { createHmac } from "node:crypto"

/**
 * OAuth 1.0a HMAC-SHA256 signing as HERE Account uses it for client-credential token requests:
 * signing key `<secret>&`; base string `POST&enc(url without query)&enc(sorted params)`, where the
 * params are the oauth_* values, the query params and, for form bodies only, the form params.
 */
export const percentEncode = (s: string): string =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase())

export const baseString = (method: string, url: string, params: ReadonlyArray<readonly [string, string]>): string => {
  const u = new URL(url)
  const base = `${u.protocol}//${u.host}${u.pathname}`
  const all: Array<readonly [string, string]> = [...params]
  u.searchParams.forEach((v, k) => all.push([k, v]))
  const normalized = all
    .map(([k, v]) => [percentEncode(k), percentEncode(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")
  return [method.toUpperCase(), percentEncode(base), percentEncode(normalized)].join("&")
}

export const signWithKey = (base: string, key: string): string =>
  createHmac("sha256", key).update(base).digest("base64")

/** RFC 5849 signing: the key is the percent-encoded secret plus `&` (empty token secret). */
export const sign = (base: string, secret: string): string => signWithKey(base, `${percentEncode(secret)}&`)

export interface OAuthParams {
  readonly oauth_consumer_key: string
  readonly oauth_nonce: string
  readonly oauth_signature_method: string
  readonly oauth_timestamp: string
  readonly oauth_version: string
}

export const authorizationHeader = (params: OAuthParams, signature: string): string =>
  "OAuth " +
  [...Object.entries(params), ["oauth_signature", signature]]
    .map(([k, v]) => `${k}="${percentEncode(v)}"`)
    .join(",")

/** Parses `OAuth k="v",k2="v2"` (values percent-decoded). */
export const parseAuthorizationHeader = (header: string): Record<string, string> | undefined => {
  const m = /^OAuth\s+(.*)$/i.exec(header.trim())
  if (!m) return undefined
  const out: Record<string, string> = {}
  for (const part of m[1]!.split(",")) {
    const kv = /^\s*([A-Za-z0-9_]+)\s*=\s*"([^"]*)"\s*$/.exec(part)
    if (!kv) return undefined
    try {
      out[kv[1]!] = decodeURIComponent(kv[2]!)
    } catch {
      return undefined
    }
  }
  return out
}

/**
 * Builds the signed header for a token request. `formParams` only when the body is form-encoded.
 * Signs with the unencoded `<secret>&` as the HERE SDKs do (the same as RFC 5849 for the usual secrets).
 */
export const signRequest = (opts: {
  readonly url: string
  readonly keyId: string
  readonly secret: string
  readonly timestamp: number
  readonly nonce: string
  readonly formParams?: ReadonlyArray<readonly [string, string]>
}): string => {
  const params: OAuthParams = {
    oauth_consumer_key: opts.keyId,
    oauth_nonce: opts.nonce,
    oauth_signature_method: "HMAC-SHA256",
    oauth_timestamp: String(opts.timestamp),
    oauth_version: "1.0"
  }
  const base = baseString("POST", opts.url, [...Object.entries(params), ...(opts.formParams ?? [])])
  return authorizationHeader(params, signWithKey(base, `${opts.secret}&`))
}
