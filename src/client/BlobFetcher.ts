import type { Dispatcher } from "undici"
import { apiErrorFrom, type HttpFailure, transportFailure } from "./ErrorMapping.ts"
import type { ApiError } from "./Errors.ts"
import { REDIRECT_STATUSES, redirectOf, redirectRefused } from "./Redirects.ts"
import { gaveUp, isRetriableStatus, nextRetry, type RetryCount, type Retrying, type RetryLimits } from "./Retry.ts"

/**
 * The hot path of an export: many small blob GETs with `concurrency` in flight, driving undici's
 * dispatcher directly. There is no fiber, stream, Schedule or response object per blob: a blob is one
 * small object, which is also undici's handler of its requests, collecting the body chunks and handing
 * the bytes to `onBlob` synchronously. Everything the general client does per request happens here
 * too, with the same rules: bearer token (taken afresh for a retry, renewed once per attempt after a 401),
 * redirects without credentials across origins (Redirects.ts), the retry policy of Retry.ts
 * (`nextRetry`, the one the client's Schedule is built from: 408/429/5xx, resets, cut bodies,
 * Retry-After, a budget per request, the outage limit), error answers as ApiError (ErrorMapping.ts).
 * Effect wraps it per chunk of listed partitions (BlobApi.fetcher).
 */

export interface BlobFetcherOptions<T> {
  readonly dispatcher: Dispatcher
  /** Requests in flight at once. */
  readonly concurrency: number
  readonly limits: RetryLimits
  /** Outage failures (5xx, no answer) of one blob in a row after which it gives up with RegionUnavailable (Retry.ts `outageLimit`). */
  readonly outageLimit?: number | undefined
  readonly maxRedirects: number
  readonly userAgent: string
  /** The blob's bytes as stored, with the tag it was pushed with, in completion order. An exception stops the fetcher with it. */
  readonly onBlob: (item: T, bytes: Uint8Array, tag: number) => void
  /** The first failure (and the item it concerns, when it concerns one); nothing is requested afterwards. */
  readonly onFailure: (error: unknown, item: T | undefined) => void
  /** The current token (the client renews it ahead of expiry): taken again for every retry. */
  readonly token: () => Promise<string>
  /** A token other than `stale`, after the service answered 401 to it. */
  readonly refreshToken: (stale: string) => Promise<string>
  /** Before each wait for a retry (rare: never per blob on a healthy service). */
  readonly onRetry?: (retry: Retrying) => void
  /** When given, milliseconds from sending a request to its whole answer (or its failure), for every request: a plain call, no allocation. */
  readonly onAnswered?: (ms: number) => void
  /** While this says so, no new request starts (the writer is behind); call `resume` when it changes. */
  readonly isPaused?: () => boolean
}

const EMPTY = new Uint8Array(0)

/**
 * One blob being fetched, and undici's handler of its current request (undici 7's native hooks: no
 * wrapper, no headers parsed on success). A blob has one request at a time; a retry, a redirect or a
 * new token starts the next one after the previous ended.
 */
class Download<T extends { readonly dataHandle: string }> implements Dispatcher.DispatchHandler, RetryCount {
  origin = ""
  path = ""
  /** Whether this request carries the token: only to the blob API's origin, never back to it after a detour elsewhere. */
  authorized = true
  status = 0
  rawHeaders: Array<Buffer> | undefined = undefined
  first: Buffer | undefined = undefined
  rest: Array<Buffer> | undefined = undefined
  abort: ((reason?: Error) => void) | undefined = undefined
  retries = 0
  outages = 0
  startedAt = 0
  redirects = 0
  refreshedToken = false
  timer: ReturnType<typeof setTimeout> | undefined = undefined
  sentAt = 0

  constructor(
    readonly fetcher: BlobFetcher<T>,
    readonly item: T,
    readonly tag: number,
    readonly blobPath: string
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
    this.fetcher.answered(this)
  }

  onError(error: Error): void {
    this.fetcher.broken(this, error)
  }

  get body(): Uint8Array {
    if (this.rest === undefined) return this.first ?? EMPTY
    return Buffer.concat([this.first!, ...this.rest])
  }

  headers(): Record<string, string> {
    const raw = this.rawHeaders ?? []
    const out: Record<string, string> = {}
    for (let i = 0; i + 1 < raw.length; i += 2) {
      out[raw[i]!.toString("latin1").toLowerCase()] = raw[i + 1]!.toString("latin1")
    }
    return out
  }
}

export class BlobFetcher<T extends { readonly dataHandle: string }> {
  private queue: Array<T> = []
  private tags: Array<number> = []
  private head = 0
  private readonly active = new Set<Download<T>>()
  private origin = ""
  private pathPrefix = ""
  private headers: Record<string, string>
  private readonly anonymous: Record<string, string>
  private stopped = false

  constructor(private readonly options: BlobFetcherOptions<T>) {
    this.headers = this.anonymous = { "user-agent": options.userAgent }
  }

  private target: readonly [string, string] = ["", ""]

  /** The blob API's base URL and the layer, e.g. from lookup: `<base>/layers/<layer>/data/<handle>`. */
  setTarget(baseUrl: string, layer: string): void {
    if (this.target[0] === baseUrl && this.target[1] === layer) return
    this.target = [baseUrl, layer]
    const base = new URL(baseUrl)
    this.origin = base.origin
    this.pathPrefix = `${base.pathname.replace(/\/+$/, "")}/layers/${encodeURIComponent(layer)}/data/`
  }

  setToken(token: string): void {
    if (this.headers.authorization !== `Bearer ${token}`) {
      this.headers = { ...this.anonymous, authorization: `Bearer ${token}` }
    }
  }

  /** Blobs queued or in flight. */
  get pending(): number {
    return this.queue.length - this.head + this.active.size
  }

  /** Queues `items`; `tag` comes back with each of them in `onBlob`. */
  push(items: ReadonlyArray<T>, tag: number): void {
    for (const item of items) {
      this.queue.push(item)
      this.tags.push(tag)
    }
    this.pump()
  }

  /** Starts requests up to the window (after `isPaused` said no, or a request finished). */
  resume(): void {
    this.pump()
  }

  /** Aborts what is in flight and requests nothing more. */
  close(): void {
    this.stopped = true
    for (const download of this.active) {
      if (download.timer !== undefined) clearTimeout(download.timer)
      download.abort?.()
    }
    this.active.clear()
    this.queue = []
    this.tags = []
    this.head = 0
  }

  private pump(): void {
    const { concurrency, isPaused } = this.options
    while (
      !this.stopped && this.active.size < concurrency && this.head < this.queue.length && !(isPaused?.() ?? false)
    ) {
      const item = this.queue[this.head]!
      const download = new Download(
        this,
        item,
        this.tags[this.head]!,
        this.pathPrefix + encodeURIComponent(item.dataHandle)
      )
      if (++this.head >= 4096 && this.head * 2 >= this.queue.length) {
        this.queue = this.queue.slice(this.head)
        this.tags = this.tags.slice(this.head)
        this.head = 0
      }
      this.active.add(download)
      this.send(download, this.origin, download.blobPath, true)
    }
  }

  private send(download: Download<T>, origin: string, path: string, authorized: boolean): void {
    download.origin = origin
    download.path = path
    download.authorized = authorized
    download.status = 0
    download.rawHeaders =
      download.first =
      download.rest =
      download.abort =
        undefined
    if (this.options.onAnswered !== undefined) download.sentAt = performance.now()
    try {
      this.options.dispatcher.dispatch({
        origin,
        path,
        method: "GET",
        headers: authorized ? this.headers : this.anonymous
      }, download)
    } catch (error) {
      this.fail(transportFailure("GET", download.href, error, false), download.item)
    }
  }

  /** @internal A complete answer. */
  answered(download: Download<T>): void {
    if (this.stopped) return
    if (this.options.onAnswered !== undefined) this.options.onAnswered(performance.now() - download.sentAt)
    const status = download.status
    if (status >= 200 && status < 300) {
      this.active.delete(download)
      try {
        this.options.onBlob(download.item, status === 204 ? EMPTY : download.body, download.tag)
      } catch (error) {
        return this.fail(error, download.item)
      }
      return this.pump()
    }
    const headers = download.headers()
    if (REDIRECT_STATUSES.has(status) && headers.location !== undefined) {
      return this.redirect(download, headers.location)
    }
    const error = apiErrorFrom(
      "GET",
      download.href,
      status,
      headers,
      Buffer.from(download.body).toString("utf8"),
      Date.now()
    )
    // A 401 from elsewhere (a storage URL a redirect led to, sent no token) is final, as in ApiClient.
    if (status === 401 && !download.refreshedToken && download.origin === this.origin) {
      return this.reauthorize(download, error)
    }
    if (isRetriableStatus(status)) return this.retry(download, error)
    this.fail(error, download.item)
  }

  /** @internal No complete answer: refused, reset, timed out, or the body was cut. */
  broken(download: Download<T>, cause: Error): void {
    if (this.stopped) return
    // A redirect or an error answer whose body broke off did answer: its status decides, as in Http.ts
    // (which reads no body of a redirect and describes an error whose body failed as one without).
    if (download.status >= 300) {
      download.first = download.rest = undefined
      return this.answered(download)
    }
    if (this.options.onAnswered !== undefined) this.options.onAnswered(performance.now() - download.sentAt)
    const error = transportFailure("GET", download.href, cause)
    if (error.retriable) this.retry(download, error)
    else this.fail(error, download.item)
  }

  private redirect(download: Download<T>, location: string): void {
    const redirect = redirectOf("GET", download.status, download.href, location)
    if (redirect === undefined || download.redirects >= this.options.maxRedirects) {
      const refused = redirectRefused(
        "GET",
        download.href,
        download.status,
        redirect === undefined ? "invalid" : "too many",
        this.options.maxRedirects
      )
      return this.fail(refused, download.item)
    }
    download.redirects++
    this.send(
      download,
      redirect.url.origin,
      redirect.url.pathname + redirect.url.search,
      download.authorized && !redirect.dropAuthorization
    )
  }

  /** Sends the blob's request again from the start, with the token `token` gives. */
  private restart(download: Download<T>, token: Promise<string>): void {
    token.then(
      (value) => {
        if (this.stopped || !this.active.has(download)) return
        this.setToken(value)
        // From the start, as each Http.send: its redirects are counted afresh.
        download.redirects = 0
        this.send(download, this.origin, download.blobPath, true)
      },
      (failure) => this.fail(failure, download.item)
    )
  }

  private reauthorize(download: Download<T>, error: ApiError): void {
    download.refreshedToken = true
    const stale = this.headers.authorization?.slice("Bearer ".length) ?? ""
    this.restart(download, this.options.refreshToken(stale).catch((failure) => Promise.reject(failure ?? error)))
  }

  private retry(download: Download<T>, error: HttpFailure): void {
    const step = nextRetry(this.options.limits, this.options.outageLimit, download, error, Date.now(), Math.random())
    if (step._tag !== "Retry") return this.fail(gaveUp(error, step), download.item)
    // Each attempt may renew its token once, as ApiClient's attempts do.
    download.refreshedToken = false
    this.options.onRetry?.(step)
    // A retry may come after the token it started with has expired: it takes the current one.
    download.timer = setTimeout(() => {
      download.timer = undefined
      this.restart(download, this.options.token())
    }, step.delayMs)
  }

  private fail(error: unknown, item?: T): void {
    if (this.stopped) return
    this.close()
    this.options.onFailure(error, item)
  }
}
