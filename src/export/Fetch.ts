import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import * as crypto from "node:crypto"
import { gunzipSync } from "node:zlib"
import { BlobApi, type BlobFailure, type BlobFetcherHandle, VolatileBlobApi } from "../client/BlobApi.ts"
import type { BodyReceiver } from "../client/BlobFetcher.ts"
import type { ConcurrencyLimit } from "../client/Concurrency.ts"
import { ApiError } from "../client/Errors.ts"
import type { Partition } from "../domain/Partition.ts"
import { CrashProbe } from "../telemetry/CrashProbe.ts"
import { type ByteBudget, reservedFor } from "./Budget.ts"
import { IntegrityError } from "./Errors.ts"
import type { Plan } from "./Plan.ts"

/**
 * The fetch stage of an export: the blobs of listed partitions, as many at a time as the concurrency
 * limit and the byte budget allow, each checked against its checksum (downloaded again up to
 * `integrityAttempts` times when it does not match) and handed on synchronously, in completion order:
 * a blob waiting out a Retry-After holds back nothing behind it. A blob of a megabyte or more whose
 * size the listing gives is received into one buffer of that size and hashed as it arrives. No
 * Effect runs per blob; `offer` is one Effect per chunk of listed partitions.
 */

export type FetchFailure = BlobFailure | IntegrityError

export interface FetchOptions {
  /** Requests in flight (fixed or adaptive), shared by every part of the run. */
  readonly limit: ConcurrencyLimit
  /** The bytes the run may hold; the writer releases what the encoder took and calls `resume`. */
  readonly budget: ByteBudget
  readonly integrityAttempts: number
  /** A verified blob of `part`: `stored` bytes as the service holds them, `data` unpacked (gzip layers). */
  readonly onBlob: (part: number, partition: Partition, stored: number, data: Uint8Array) => void
  /** The first failure; nothing more is fetched. */
  readonly onFailure: (error: FetchFailure) => void
}

export interface FetchStage {
  /** Queues partitions of `part` (none deleted) and waits while the queue is longer than a few windows. */
  readonly offer: (part: number, partitions: ReadonlyArray<Partition>) => Effect.Effect<void, FetchFailure>
  /** Starts what the limit and the budget allow now (after bytes were released). */
  readonly resume: () => void
}

/** Blobs of at least this size (as listed) are received into one buffer and hashed as they arrive. */
export const LARGE_BLOB_BYTES = 1024 * 1024

const HASHES: Record<string, string> = { "MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256" }
const HASH_BY_LENGTH: Record<number, string> = { 32: "md5", 40: "sha1", 64: "sha256" }

/** The digest algorithm of a checksum: the layer's `digest`, else guessed from the hex length. */
const hashOf = (digest: string | undefined, checksum: string): string | undefined =>
  (digest === undefined ? undefined : HASHES[digest.toUpperCase()]) ?? HASH_BY_LENGTH[checksum.length]

// One-shot hashing (Node >= 20.12) skips the Hash object of createHash.
const hex: (algorithm: string, data: Uint8Array) => string = typeof (crypto as { hash?: unknown }).hash === "function"
  ? (algorithm, data) =>
    (crypto as unknown as { hash: (a: string, d: Uint8Array, e: "hex") => string }).hash(algorithm, data, "hex")
  : (algorithm, data) => crypto.createHash(algorithm).update(data).digest("hex")

const isGzip = (bytes: Uint8Array) => bytes.byteLength >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b

/**
 * A large blob's body: one buffer of the listed size, allocated when the first answer starts (and
 * kept for a retry's), filled as chunks arrive and hashed as it fills (`algorithm`, when the blob has
 * a checksum and is not packed). A body longer than listed grows the buffer, once per doubling.
 */
class LargeBody implements BodyReceiver {
  private bytes: Uint8Array | undefined
  private length = 0
  private hash: crypto.Hash | undefined
  /** The hex digest of the last body received, when hashed. */
  digest: string | undefined

  constructor(private readonly size: number, private readonly algorithm: string | undefined) {}

  start(): void {
    this.bytes ??= new Uint8Array(this.size)
    this.length = 0
    this.digest = undefined
    this.hash = this.algorithm === undefined ? undefined : crypto.createHash(this.algorithm)
  }

  write(chunk: Uint8Array): void {
    const end = this.length + chunk.byteLength
    if (end > this.bytes!.byteLength) {
      const grown = new Uint8Array(Math.max(end, this.bytes!.byteLength * 2))
      grown.set(this.bytes!.subarray(0, this.length))
      this.bytes = grown
    }
    this.bytes!.set(chunk, this.length)
    this.length = end
    this.hash?.update(chunk)
  }

  end(): Uint8Array {
    this.digest = this.hash?.digest("hex")
    const bytes = this.bytes!
    // Handed on: a later answer (there is none once a body is complete) would need a buffer of its own.
    this.bytes = undefined
    return this.length === bytes.byteLength ? bytes : bytes.subarray(0, this.length)
  }
}

/** A blob the metadata names that the service does not have: for a versioned layer, the catalog's fault (rule 3). */
const missingBlob = (plan: Plan, partition: Partition, error: ApiError) =>
  new IntegrityError({
    message:
      `The blob of partition '${partition.partition}' (data handle ${partition.dataHandle}) in ${plan.catalogHrn} layer ${plan.layerId} ` +
      `version ${plan.version} does not exist (${error.status} from the blob API). The catalog's metadata points to deleted data: ` +
      `a data handle reused across versions loses its blob when an older version is deleted (data handle rule 3). Report it to the catalog's owner.`
  })

export const stage = (plan: Plan, options: FetchOptions) =>
  Effect.gen(function*() {
    const blobs = plan.layerType === "volatile" ? yield* VolatileBlobApi : yield* BlobApi
    const runtime = yield* Effect.runtime<never>()
    const probe = yield* CrashProbe
    const gzip = plan.contentEncoding === "gzip"
    const { budget, limit } = options
    const attempts = new Map<Partition, number>()
    // `offer` waits while more than `high` blobs are queued, until no more than `low` are: the
    // listing stays a few windows of the current limit ahead of the downloads.
    const low = () => limit.current * 2
    const high = () => Math.max(limit.current * 8, 1024)
    // Every part's listing may be waiting here at once.
    const waiting: Array<() => void> = []
    const wake = () => {
      for (const resume of waiting.splice(0)) resume()
    }
    let failure: FetchFailure | undefined

    const algorithmOf = (partition: Partition) =>
      partition.checksum === undefined ? undefined : hashOf(plan.digest, partition.checksum)

    const verified = (partition: Partition, stored: Uint8Array, digest: string | undefined): Uint8Array | undefined => {
      const data = gzip && isGzip(stored) ? new Uint8Array(gunzipSync(stored)) : stored
      const checksum = partition.checksum
      const algorithm = algorithmOf(partition)
      if (algorithm === undefined) return data
      // A digest taken as the body arrived is of the stored bytes: the data, unless it was unpacked.
      const actual = digest !== undefined && data === stored ? digest : hex(algorithm, data)
      if (actual === checksum!.toLowerCase()) return data
      const attempt = (attempts.get(partition) ?? 1) + 1
      if (attempt > options.integrityAttempts) {
        throw new IntegrityError({
          message:
            `The blob of partition '${partition.partition}' (data handle ${partition.dataHandle}) in ${plan.catalogHrn} layer ${plan.layerId} ` +
            `does not match its ${algorithm} checksum after ${
              attempt - 1
            } downloads. The data in the catalog is inconsistent; report it to the catalog's owner.`
        })
      }
      attempts.set(partition, attempt)
      Runtime.runFork(runtime)(
        Effect.logWarning("checksum mismatch, downloading again").pipe(
          Effect.annotateLogs({ partition: partition.partition, attempt })
        )
      )
      return undefined
    }

    const { fetcher, refresh }: BlobFetcherHandle<Partition> = yield* blobs.fetcher<Partition>(
      plan.catalogHrn,
      plan.layerId,
      {
        limit,
        admit: (partition): boolean => budget.reserve(reservedFor(partition), fetcher.started),
        receiver: (partition) =>
          partition.dataSize !== undefined && partition.dataSize >= LARGE_BLOB_BYTES
            ? new LargeBody(partition.dataSize, gzip ? undefined : algorithmOf(partition))
            : undefined,
        onBlob: (partition, stored, part, receiver): void => {
          const data = verified(partition, stored, (receiver as LargeBody | undefined)?.digest)
          if (data === undefined) {
            budget.release(reservedFor(partition))
            return fetcher.push([partition], part)
          }
          if (attempts.size > 0) attempts.delete(partition)
          budget.arrived(reservedFor(partition), data.byteLength)
          options.onBlob(part, partition, stored.byteLength, data)
          probe.reached("fetched")
          if (waiting.length > 0 && fetcher.pending <= low()) wake()
        },
        onFailure: (error, item) => {
          failure =
            error instanceof ApiError && error.status === 404 && plan.layerType === "versioned" && item !== undefined
              ? missingBlob(plan, item, error)
              : error as FetchFailure
          wake()
          options.onFailure(failure)
        }
      }
    )

    const offer = (part: number, partitions: ReadonlyArray<Partition>): Effect.Effect<void, FetchFailure> =>
      Effect.gen(function*() {
        if (failure !== undefined) return yield* Effect.fail(failure)
        yield* refresh
        fetcher.push(partitions, part)
        if (fetcher.pending <= high()) return
        yield* Effect.async<void>((resume) => {
          waiting.push(() => resume(Effect.void))
        })
        if (failure !== undefined) return yield* Effect.fail(failure)
      })

    return { offer, resume: () => fetcher.resume() } satisfies FetchStage
  })
