import type { Dispatcher } from "undici"
import type { ConcurrencyLimit } from "./Concurrency.ts"
import { apiErrorFrom, type HttpFailure, transportFailure } from "./ErrorMapping.ts"
import type { ApiError } from "./Errors.ts"
import { REDIRECT_STATUSES, redirectOf, redirectRefused } from "./Redirects.ts"
import { gaveUp, isRetriableStatus, nextRetry, type RetryCount, type Retrying, type RetryLimits } from "./Retry.ts"

/**
 * The hot path of an export: many small blob GETs with as many in flight as `limit` allows (fixed, or
 * found as it goes: Concurrency.ts), driving undici's dispatcher directly. There is no fiber, stream,
 * Schedule or response object per blob: a blob is one small object, which is also undici's handler of
 * its requests, collecting the body chunks (or handing them to a `receiver` as they come) and handing
 * the bytes to `onBlob` synchronously. A request waiting out a retry holds no place in flight; it goes
 * first when it is due. Everything the general client does per request happens here
 * too, with the same rules: bearer token (taken afresh for a retry, renewed once per attempt after a 401),
 * redirects without credentials across origins (Redirects.ts), the retry policy of Retry.ts
 * (`nextRetry`, the one the client's Schedule is built from: 408/429/5xx, resets, cut bodies,
 * Retry-After, a budget per request, the outage limit), error answers as ApiError (ErrorMapping.ts).
 * Effect wraps it per chunk of listed partitions (BlobApi.fetcher).
 */

/**
 * Takes a large blob's body as it arrives, instead of the fetcher collecting its chunks and joining
 * them (one copy fewer, and the body can be hashed as it comes).
 */
export interface BodyReceiver {
  /** An answer's body begins (a retried request's starts over). */
  start(): void
  write(chunk: Uint8Array): void
  /** The whole body. */
  end(): Uint8Array
}

export interface BlobFetcherOptions<T> {
  readonly dispatcher: Dispatcher
  /** How many requests may be in flight; told of every request's end. */
  readonly limit: ConcurrencyLimit
  readonly limits: RetryLimits
  /** Outage failures (5xx, no answer) of one blob in a row after which it gives up with RegionUnavailable (Retry.ts `outageLimit`). */
  readonly outageLimit?: number | undefined
  readonly maxRedirects: number
  readonly userAgent: string
  /**
   * The blob's bytes as stored, with the tag it was pushed with (and the receiver that took them, if
   * one did), in completion order. An exception stops the fetcher with it.
   */
  readonly onBlob: (item: T, bytes: Uint8Array, tag: number, receiver: BodyReceiver | undefined) => void
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
  /** Whether `item`'s request may start now (else nothing new starts until `resume`); asked once per item that starts. */
  readonly admit?: (item: T) => boolean
  /** Where the body of `item`'s successful answer goes; undefined: collected by the fetcher. */
  readonly receiver?: (item: T) => BodyReceiver | undefined
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
  /** Whether the current answer's body goes to `receiver`. */
  receiving = false

  constructor(
    readonly fetcher: BlobFetcher<T>,
    readonly item: T,
    readonly tag: number,
    readonly blobPath: string,
    readonly receiver: BodyReceiver | undefined
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
    else if (this.receiver !== undefined) {
      this.receiving = true
      this.receiver.start()
    }
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.receiving) this.receiver!.write(chunk)
    else if (this.first === undefined) this.first = chunk
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
    if (this.receiving) return this.receiver!.end()
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
  /** Every blob started and not done: in flight, or waiting for a retry. */
  private readonly active = new Set<Download<T>>()
  /** Blobs whose retry (or new token) is due: they go before new ones. */
  private ready: Array<Download<T>> = []
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

  /** Blobs queued, in flight or waiting for a retry. */
  get pending(): number {
    return this.queue.length - this.head + this.active.size
  }

  /** Blobs started and not done: in flight, or waiting for a retry. */
  get started(): number {
    return this.active.size
  }

  /** Queues `items`; `tag` comes back with each of them in `onBlob`. */
  push(items: ReadonlyArray<T>, tag: number): void {
    for (const item of items) {
      this.queue.push(item)
      this.tags.push(tag)
    }
    this.pump()
  }

  /** Starts requests up to the limit (after `admit` said no, or the limit grew). */
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
    this.ready = []
    this.queue = []
    this.tags = []
    this.head = 0
  }

  private pump(): void {
    const { admit, limit, receiver } = this.options
    while (!this.stopped && limit.inFlight < limit.current) {
      const due = this.ready.pop()
      if (due !== undefined) {
        this.send(due, this.origin, due.blobPath, true)
        continue
      }
      if (this.head >= this.queue.length) return
      const item = this.queue[this.head]!
      if (admit !== undefined && !admit(item)) return
      const download = new Download(
        this,
        item,
        this.tags[this.head]!,
        this.pathPrefix + encodeURIComponent(item.dataHandle),
        receiver?.(item)
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
    download.receiving = false
    download.rawHeaders =
      download.first =
      download.rest =
      download.abort =
        undefined
    download.sentAt = performance.now()
    this.options.limit.sent()
    try {
      this.options.dispatcher.dispatch({
        origin,
        path,
        method: "GET",
        headers: authorized ? this.headers : this.anonymous
      }, download)
    } catch (error) {
      this.options.limit.ended()
      this.fail(transportFailure("GET", download.href, error, false), download.item)
    }
  }

  /** @internal A complete answer. */
  answered(download: Download<T>): void {
    if (this.stopped) return
    const now = performance.now()
    this.options.onAnswered?.(now - download.sentAt)
    const status = download.status
    if (status >= 200 && status < 300) {
      this.options.limit.answered(download.sentAt, now)
      this.active.delete(download)
      try {
        this.options.onBlob(
          download.item,
          status === 204 ? EMPTY : download.body,
          download.tag,
          download.receiving ? download.receiver : undefined
        )
      } catch (error) {
        return this.fail(error, download.item)
      }
      return this.pump()
    }
    if (status === 429 || status === 503) this.options.limit.throttle(download.sentAt, now)
    else this.options.limit.ended()
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
    this.options.onAnswered?.(performance.now() - download.sentAt)
    this.options.limit.ended()
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

  /** Sends the blob's request again from the start, with the token `token` gives, as soon as there is room. */
  private restart(download: Download<T>, token: Promise<string>): void {
    token.then(
      (value) => {
        if (this.stopped || !this.active.has(download)) return
        this.setToken(value)
        // From the start, as each Http.send: its redirects are counted afresh.
        download.redirects = 0
        this.ready.push(download)
        this.pump()
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
