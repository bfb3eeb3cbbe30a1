import type { Dispatcher } from "undici"
import { ApiError, redactUrl, RetryBudgetExhausted, TransportError } from "./Errors.ts"
import { apiErrorFrom, describeFailure, REDIRECT_STATUSES, redirectOf, transportFailure } from "./Http.ts"
import { isRetriableStatus, type RetryLimits, retryDelay } from "./Retry.ts"

/**
 * The hot path of an export: many small blob GETs with `concurrency` in flight, driving undici's
 * dispatcher directly. There is no fiber, stream, Schedule or response object per blob: a request is
 * one small object whose handler collects the body chunks and hands the bytes to `onBlob`
 * synchronously. Everything the general client does per request happens here too, with the same
 * rules: bearer token (one fresh token after a 401), redirects without credentials across origins,
 * the retry policy of Retry.ts (408/429/5xx, resets, cut bodies, Retry-After, a budget per request),
 * error answers as ApiError. Effect wraps it per chunk of listed partitions (BlobApi.fetcher).
 */

export type BlobFetchFailure = ApiError | TransportError | RetryBudgetExhausted

export interface BlobFetcherOptions<T> {
  readonly dispatcher: Dispatcher
  /** Requests in flight at once. */
  readonly concurrency: number
  readonly limits: RetryLimits
  readonly maxRedirects: number
  readonly userAgent: string
  /** The blob's bytes as stored, in completion order. An exception stops the fetcher with it. */
  readonly onBlob: (item: T, bytes: Uint8Array) => void
  /** The first failure (and the item it concerns, when it concerns one); nothing is requested afterwards. */
  readonly onFailure: (error: unknown, item: T | undefined) => void
  /** The current token (the client renews it ahead of expiry): taken again for every retry. */
  readonly token: () => Promise<string>
  /** A token other than `stale`, after the service answered 401 to it. */
  readonly refreshToken: (stale: string) => Promise<string>
  readonly onRetry?: (retry: { readonly url: string; readonly failure: string; readonly attempt: number; readonly delayMs: number }) => void
  /** While this says so, no new request starts (the writer is behind); call `resume` when it changes. */
  readonly isPaused?: () => boolean
}

/** An undici handler for one attempt of one blob (undici 7's native hooks: no wrapper, no parsed headers on success). */
class Attempt<T extends { readonly dataHandle: string }> implements Dispatcher.DispatchHandler {
  status = 0
  rawHeaders: Array<Buffer> | undefined
  first: Buffer | undefined
  rest: Array<Buffer> | undefined
  abort: ((reason?: Error) => void) | undefined
  done = false

  constructor(
    readonly fetch: Fetch<T>,
    readonly origin: string,
    readonly path: string,
    readonly authorized: boolean
  ) {}

  get href(): string {
    return this.origin + this.path
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.abort = abort
  }

  onHeaders(status: number, rawHeaders: Array<Buffer>): boolean {
    this.status = status
    if (status < 200 || status >= 300) this.rawHeaders = rawHeaders
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.first === undefined) this.first = chunk
    else (this.rest ??= []).push(chunk)
    return true
  }

  onComplete(): void {
    this.done = true
    this.fetch.fetcher.answered(this)
  }

  onError(error: Error): void {
    this.done = true
    this.fetch.fetcher.broken(this, error)
  }

  get body(): Uint8Array {
    if (this.rest === undefined) return this.first ?? EMPTY
    return Buffer.concat([this.first!, ...this.rest])
  }

  header(name: string): string | undefined {
    const raw = this.rawHeaders ?? []
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (raw[i]!.toString("latin1").toLowerCase() === name) return raw[i + 1]!.toString("latin1")
    }
    return undefined
  }

  headers(): Record<string, string> {
    const raw = this.rawHeaders ?? []
    const out: Record<string, string> = {}
    for (let i = 0; i + 1 < raw.length; i += 2) out[raw[i]!.toString("latin1").toLowerCase()] = raw[i + 1]!.toString("latin1")
    return out
  }
}

const EMPTY = new Uint8Array(0)

/** One blob being fetched, across its attempts, redirects and retries. */
interface Fetch<T extends { readonly dataHandle: string }> {
  readonly fetcher: BlobFetcher<T>
  readonly item: T
  readonly path: string
  current: Attempt<T> | undefined
  retries: number
  firstFailureAt: number
  redirects: number
  refreshedToken: boolean
  timer: ReturnType<typeof setTimeout> | undefined
}

export class BlobFetcher<T extends { readonly dataHandle: string }> {
  private readonly queue: Array<T> = []
  private head = 0
  private readonly active = new Set<Fetch<T>>()
  private origin = ""
  private pathPrefix = ""
  private headers: Record<string, string>
  private stopped = false

  constructor(private readonly options: BlobFetcherOptions<T>) {
    this.headers = { "user-agent": options.userAgent }
  }

  /** The blob API's base URL and the layer, e.g. from lookup: `<base>/layers/<layer>/data/<handle>`. */
  setTarget(baseUrl: string, layer: string): void {
    const base = new URL(baseUrl)
    this.origin = base.origin
    this.pathPrefix = `${base.pathname.replace(/\/+$/, "")}/layers/${encodeURIComponent(layer)}/data/`
  }

  setToken(token: string): void {
    if (this.headers.authorization !== `Bearer ${token}`) this.headers = { "user-agent": this.options.userAgent, authorization: `Bearer ${token}` }
  }

  /** Blobs queued or in flight. */
  get pending(): number {
    return this.queue.length - this.head + this.active.size
  }

  get failed(): boolean {
    return this.stopped
  }

  push(items: Iterable<T>): void {
    for (const item of items) this.queue.push(item)
    this.pump()
  }

  /** Starts requests up to the window (after `isPaused` said no, or a request finished). */
  resume(): void {
    this.pump()
  }

  /** Aborts what is in flight and requests nothing more. */
  close(): void {
    this.stopped = true
    for (const fetch of this.active) {
      if (fetch.timer !== undefined) clearTimeout(fetch.timer)
      fetch.current?.abort?.()
    }
    this.active.clear()
    this.queue.length = 0
    this.head = 0
  }

  private pump(): void {
    const { concurrency, isPaused } = this.options
    while (!this.stopped && this.active.size < concurrency && this.head < this.queue.length && !(isPaused?.() ?? false)) {
      const item = this.queue[this.head]!
      this.queue[this.head++] = undefined as unknown as T
      if (this.head === this.queue.length) {
        this.queue.length = 0
        this.head = 0
      } else if (this.head >= 4096 && this.head * 2 >= this.queue.length) {
        this.queue.splice(0, this.head)
        this.head = 0
      }
      const fetch: Fetch<T> = {
        fetcher: this,
        item,
        path: this.pathPrefix + encodeURIComponent(item.dataHandle),
        current: undefined,
        retries: 0,
        firstFailureAt: 0,
        redirects: 0,
        refreshedToken: false,
        timer: undefined
      }
      this.active.add(fetch)
      this.send(fetch, this.origin, fetch.path, true)
    }
  }

  /** `authorized`: credentials go only to the blob API's own origin, and not back to it after a detour elsewhere. */
  private send(fetch: Fetch<T>, origin: string, path: string, authorized: boolean): void {
    const attempt = new Attempt(fetch, origin, path, authorized)
    fetch.current = attempt
    const headers = authorized ? this.headers : { "user-agent": this.options.userAgent }
    try {
      this.options.dispatcher.dispatch({ origin, path, method: "GET", headers }, attempt)
    } catch (error) {
      this.fail(transportFailure("GET", attempt.href, error, false))
    }
  }

  /** @internal A complete answer. */
  answered(attempt: Attempt<T>): void {
    const fetch = attempt.fetch
    if (fetch.current !== attempt || this.stopped) return
    const status = attempt.status
    if (status >= 200 && status < 300) {
      this.active.delete(fetch)
      try {
        this.options.onBlob(fetch.item, status === 204 ? EMPTY : attempt.body)
      } catch (error) {
        return this.fail(error, fetch.item)
      }
      return this.pump()
    }
    const location = attempt.header("location")
    if (REDIRECT_STATUSES.has(status) && location !== undefined) return this.redirect(fetch, attempt, location)
    const error = apiErrorFrom("GET", attempt.href, status, attempt.headers(), Buffer.from(attempt.body).toString("utf8"), Date.now())
    if (status === 401 && !fetch.refreshedToken && attempt.authorized) return this.reauthorize(fetch, error)
    if (isRetriableStatus(status)) return this.retry(fetch, error)
    this.fail(error, fetch.item)
  }

  /** @internal No complete answer: refused, reset, timed out, or the body was cut. */
  broken(attempt: Attempt<T>, cause: Error): void {
    const fetch = attempt.fetch
    if (fetch.current !== attempt || this.stopped) return
    const error = transportFailure("GET", attempt.href, cause)
    if (error.retriable) this.retry(fetch, error)
    else this.fail(error, fetch.item)
  }

  private redirect(fetch: Fetch<T>, attempt: Attempt<T>, location: string): void {
    const redirect = redirectOf("GET", attempt.status, attempt.href, location)
    if (redirect === undefined || fetch.redirects >= this.options.maxRedirects) {
      return this.fail(
        new ApiError({
          status: attempt.status,
          method: "GET",
          url: redactUrl(attempt.href),
          title: redirect === undefined ? "Invalid redirect" : "Too many redirects",
          detail: redirect === undefined ? "the Location header is not a URL" : `more than ${this.options.maxRedirects} redirects`
        }),
        fetch.item
      )
    }
    fetch.redirects++
    this.send(fetch, redirect.url.origin, redirect.url.pathname + redirect.url.search, attempt.authorized && !redirect.dropAuthorization)
  }

  private reauthorize(fetch: Fetch<T>, error: ApiError): void {
    fetch.refreshedToken = true
    const stale = this.headers.authorization?.slice("Bearer ".length) ?? ""
    this.options.refreshToken(stale).then(
      (token) => {
        if (this.stopped || !this.active.has(fetch)) return
        this.setToken(token)
        this.send(fetch, this.origin, fetch.path, true)
      },
      (failure) => this.fail(failure ?? error, fetch.item)
    )
  }

  private retry(fetch: Fetch<T>, error: ApiError | TransportError): void {
    const now = Date.now()
    if (fetch.retries === 0) fetch.firstFailureAt = now
    const elapsed = now - fetch.firstFailureAt
    const delay = retryDelay(this.options.limits, fetch.retries, elapsed, error._tag === "ApiError" ? error.retryAfterMs : undefined, Math.random())
    if (delay === undefined) {
      return this.fail(new RetryBudgetExhausted({ method: "GET", url: error.url, retries: fetch.retries, elapsedMs: elapsed, lastError: error }), fetch.item)
    }
    fetch.retries++
    fetch.redirects = 0
    this.options.onRetry?.({ url: error.url, failure: describeFailure(error), attempt: fetch.retries, delayMs: delay })
    fetch.current = undefined
    // A retry may come after the token it started with has expired: it takes the current one.
    fetch.timer = setTimeout(() => {
      fetch.timer = undefined
      this.options.token().then(
        (token) => {
          if (this.stopped || !this.active.has(fetch)) return
          this.setToken(token)
          this.send(fetch, this.origin, fetch.path, true)
        },
        (failure) => this.fail(failure, fetch.item)
      )
    }, delay)
  }

  private fail(error: unknown, item?: T): void {
    if (this.stopped) return
    this.close()
    this.options.onFailure(error, item)
  }
}
