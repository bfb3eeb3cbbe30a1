/**
 * Error bodies of the platform (facts §10). No single format exists, so `describe` reads any of them
 * (and plain text) into one shape; the `make*` helpers build the ones the local service emits.
 */
export interface ErrorDescription {
  readonly title: string | undefined
  readonly detail: string | undefined
  readonly code: string | undefined
  readonly correlationId: string | undefined
}

export interface DetailEntry {
  readonly name: string
  readonly error: string
}

/** metadata/query/lookup style: `{title, status, detail: [{name, error}]}` */
export const dataApiError = (status: number, title: string, detail: ReadonlyArray<DetailEntry> = []) =>
  detail.length === 0 ? { title, status } : { title, status, detail }

/** gateway style for 401/403: `{error, error_description}` */
export const gatewayError = (error: string, description: string) => ({ error, error_description: description })

/** HERE Account style: `{errorId, httpStatus, errorCode, message}` */
export const accountError = (httpStatus: number, errorCode: number, message: string, errorId: string) => ({
  errorId,
  httpStatus,
  errorCode,
  message
})

const str = (v: unknown): string | undefined =>
  typeof v === "string" && v.length > 0 ? v : typeof v === "number" ? String(v) : undefined

const detailText = (v: unknown): string | undefined => {
  if (Array.isArray(v)) {
    const parts = v
      .map((
        d
      ) => (d && typeof d === "object"
        ? [str((d as any).name), str((d as any).error ?? (d as any).message)].filter(Boolean).join(": ")
        : str(d))
      )
      .filter((s): s is string => !!s)
    return parts.length > 0 ? parts.join("; ") : undefined
  }
  return str(v)
}

const TITLE_KEYS = ["title", "error", "message"] as const

export const describe = (body: string, headers: Record<string, string | undefined> = {}): ErrorDescription => {
  const headerCorrelation = headers["x-correlation-id"] ?? headers["x-request-id"]
  const text = body.trim()
  if (text.startsWith("{")) {
    try {
      const json = JSON.parse(text) as Record<string, unknown>
      const title = TITLE_KEYS.map((k) => str(json[k])).find((s) => s !== undefined)
      const detail = detailText(json.detail) ??
        str(json.error_description) ??
        str(json.description) ??
        str(json.cause) ??
        (json.title || json.error ? str(json.message) : undefined) ??
        detailText(json.errorFields) ??
        detailText(json.errors)
      const code = str(json.errorCode) ?? str(json.code)
      const correlationId = str(json.correlationId) ?? str(json.errorId) ?? headerCorrelation
      return { title, detail: detail === title ? undefined : detail, code, correlationId }
    } catch {
      // not JSON after all: fall through to plain text
    }
  }
  return {
    title: text.length > 0 ? text.slice(0, 500) : undefined,
    detail: undefined,
    code: undefined,
    correlationId: headerCorrelation
  }
}
