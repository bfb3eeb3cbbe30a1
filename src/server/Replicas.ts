import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import { SELECTABLE_REGIONS } from "../domain/Region.ts"
import { BlobFiles } from "./BlobFiles.ts"
import { BlobsRepo } from "./db/BlobsRepo.ts"
import { transaction } from "./db/Database.ts"
import { type NewStreamMessage, StreamsRepo } from "./db/StreamsRepo.ts"
import { VersionsRepo } from "./db/VersionsRepo.ts"
import { otherRegion, type Placement } from "./Regions.ts"

/**
 * The regions of the local service and the replication between the two replicas of a multi-region
 * catalog (regional storage rules 5, 8-10). A region is up or down (`serve --regions-down`,
 * `catalog-export regions down|up`); every catalog-bound request to a region that is down answers 503.
 *
 * Versioned layers are stored once (see `replicaKey`): a versioned write is refused while either
 * region is down, so both regions always hold the same data. Volatile and stream writes land in the
 * replica of the region they were sent to and are copied to the other one `delayMs` later:
 * - a volatile copy carries the written keys' state at the time it is made, and is dropped (the
 *   write is lost in the backup) when either region goes down before it is made; a volatile write
 *   made while the other region is down is never copied back;
 * - a stream copy carries the messages; while either region is down it waits, and it is delivered
 *   once both are up again, after what the backup received meanwhile.
 * Pending copies are held in memory: a restart of the service drops them, as a region failure would.
 */

export type RegionStateName = "up" | "down"

export interface RegionsStatus {
  readonly regions: ReadonlyArray<{ readonly id: string; readonly state: RegionStateName }>
  /** Copies written in one region and not yet made (or dropped) in the other. */
  readonly pendingCopies: number
}

/** A write to the replica `key` of a layer, sent to `region` of a catalog placed as `placement`. */
interface Write {
  readonly placement: Placement
  readonly region: string
  readonly key: number
}

export interface VolatileWrite extends Write {
  readonly partitions?: ReadonlyArray<string>
  readonly handles?: ReadonlyArray<string>
}

export interface StreamWrite extends Write {
  readonly messages: ReadonlyArray<NewStreamMessage>
}

export interface ReplicasShape {
  /** The regions that are down; read on every catalog-bound request (the lean path included). */
  readonly down: ReadonlySet<string>
  readonly setState: (region: string, state: RegionStateName) => Effect.Effect<RegionsStatus>
  readonly status: Effect.Effect<RegionsStatus>
  readonly volatileWritten: (write: VolatileWrite) => Effect.Effect<void>
  readonly streamWritten: (write: StreamWrite) => Effect.Effect<void>
}

export interface ReplicasOptions {
  readonly regionsDown: ReadonlyArray<string>
  /** How long after a volatile or stream write its copy reaches the other region. */
  readonly delayMs: number
}

export class Replicas extends Context.Tag("catalog-export/server/Replicas")<Replicas, ReplicasShape>() {
  static readonly layer = (
    options: ReplicasOptions
  ): Layer.Layer<Replicas, never, VersionsRepo | BlobsRepo | StreamsRepo | BlobFiles | SqlClient.SqlClient> =>
    Layer.scoped(Replicas, make(options))
}

interface StreamCopy {
  readonly from: string
  readonly to: string
  readonly key: number
  readonly messages: ReadonlyArray<NewStreamMessage>
}

const make = (options: ReplicasOptions) =>
  Effect.gen(function*() {
    const versions = yield* VersionsRepo
    const blobs = yield* BlobsRepo
    const streams = yield* StreamsRepo
    const sql = yield* SqlClient.SqlClient
    const inTransaction = <A>(self: Effect.Effect<A>) =>
      transaction(self).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    const files = yield* BlobFiles
    const fibers = yield* FiberSet.make()
    const down = new Set(options.regionsDown)
    // Bumped each time a region goes down: a volatile copy made across a failure is dropped.
    const failures = new Map<string, number>(SELECTABLE_REGIONS.map((r) => [r, 0]))
    const waiting: Array<StreamCopy> = []
    // Copies due at once are delivered one flush at a time, so each layer's messages keep their order.
    const delivering = yield* Effect.makeSemaphore(1)
    let pending = 0

    const status = Effect.sync((): RegionsStatus => ({
      regions: SELECTABLE_REGIONS.map((id) => ({ id, state: down.has(id) ? "down" : "up" })),
      pendingCopies: pending
    }))

    const later = (copy: Effect.Effect<void>) =>
      Effect.asVoid(FiberSet.run(fibers, Effect.zipRight(Effect.sleep(options.delayMs), copy)))

    const copyVolatile = (from: number, to: number, write: VolatileWrite) =>
      inTransaction(Effect.gen(function*() {
        // Partitions arrive with the blobs they refer to.
        const handles = new Set(write.handles)
        if (write.partitions !== undefined && write.partitions.length > 0) {
          for (const handle of yield* versions.copyPartitions(from, to, write.partitions)) handles.add(handle)
        }
        if (handles.size === 0) return
        const replaced = yield* blobs.copyBlobs(from, to, [...handles])
        for (const sha256 of yield* blobs.unusedContents(replaced)) yield* files.remove(sha256)
      }))

    const volatileWritten = (write: VolatileWrite) =>
      Effect.suspend(() => {
        const target = otherRegion(write.placement, write.region)
        // Written during a failover: it is not copied back after the recovery.
        if (target === undefined || down.has(write.region) || down.has(target)) return Effect.void
        const before = [failures.get(write.region), failures.get(target)]
        pending++
        return later(
          Effect.suspend(() => {
            const survived = failures.get(write.region) === before[0] && failures.get(target) === before[1]
            return survived ? copyVolatile(write.key, -write.key, write) : Effect.void
          }).pipe(Effect.ensuring(Effect.sync(() => pending--)))
        )
      })

    /** Delivers, in order, the stream copies whose regions are both up; the others keep waiting. */
    const flush = delivering.withPermits(1)(Effect.gen(function*() {
      for (let i = 0; i < waiting.length;) {
        const copy = waiting[i]!
        if (down.has(copy.from) || down.has(copy.to)) {
          i++
          continue
        }
        waiting.splice(i, 1)
        yield* inTransaction(streams.appendMessages(copy.key, copy.messages))
        pending--
      }
    }))

    const streamWritten = (write: StreamWrite) =>
      Effect.suspend(() => {
        const target = otherRegion(write.placement, write.region)
        if (target === undefined || write.messages.length === 0) return Effect.void
        pending++
        return later(Effect.suspend(() => {
          waiting.push({ from: write.region, to: target, key: -write.key, messages: write.messages })
          return flush
        }))
      })

    const setState = (region: string, state: RegionStateName) =>
      Effect.gen(function*() {
        const wasDown = down.has(region)
        if (state === "down" && !wasDown) {
          down.add(region)
          failures.set(region, (failures.get(region) ?? 0) + 1)
          yield* Effect.logInfo(`region ${region} is down`)
        } else if (state === "up" && wasDown) {
          down.delete(region)
          yield* Effect.logInfo(`region ${region} is up`)
          yield* flush
        }
        return yield* status
      })

    return Replicas.of({ down, setState, status, volatileWritten, streamWritten })
  })
