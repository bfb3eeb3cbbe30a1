import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { PARTITION_ID } from "../domain/Publish.ts"
import { BlobFiles } from "./BlobFiles.ts"
import { BlobsRepo } from "./db/BlobsRepo.ts"
import { type CatalogRow, CatalogsRepo, type LayerRow } from "./db/CatalogsRepo.ts"
import { transaction } from "./db/Database.ts"
import { type PublicationRow, PublicationsRepo, type StagedPartition } from "./db/PublicationsRepo.ts"
import { VersionsRepo } from "./db/VersionsRepo.ts"
import { badRequest, conflict, notFound } from "./Reply.ts"
import { applyAutomaticDeletion, Collector } from "./Versions.ts"
import { contentEncodingOf } from "./Views.ts"

export { PARTITION_ID }

/**
 * Data handles: `[0-9a-zA-Z.-]`, at most 600 characters (blob API v1.0.8), but not `.` or `..`: as a
 * path segment those are dot segments that every URL parser resolves away, so no client could fetch them.
 */
export const DATA_HANDLE = /^(?!\.\.?$)[0-9A-Za-z.-]{1,600}$/

const PUBLICATION_LIFETIME_MS = 48 * 3600_000
/** Rows per multi-row INSERT: well under SQLite's bound-variable limit. */
export const STAGE_BATCH = 2000

export const publicationView = (row: PublicationRow, catalog: CatalogRow) => ({
  id: row.id,
  catalogId: catalog.id,
  catalogVersion: row.catalog_version,
  layerIds: JSON.parse(row.layer_ids) as Array<string>,
  details: {
    state: row.state,
    message: row.message,
    started: row.started,
    modified: row.modified,
    expires: row.expires
  }
})

/** Starts a publication; an older one of the same kind that was never submitted is cancelled, as on the platform. */
export const initPublication = (
  catalog: CatalogRow,
  layers: ReadonlyArray<LayerRow>,
  appId: string,
  dependencies: unknown
) =>
  Effect.gen(function*() {
    const publications = yield* PublicationsRepo
    const kinds = new Set(layers.map((l) => l.layer_type))
    if (kinds.size !== 1) return yield* badRequest("layerIds", "all layers of one publication must be of the same type")
    const kind = layers[0]!.layer_type
    if (kind !== "versioned" && kind !== "volatile") {
      return yield* badRequest(
        "layerIds",
        `layers of type ${kind} are not published through publications; publish versioned or volatile layers`
      )
    }
    const now = Date.now()
    for (const active of yield* publications.active(catalog.hrn, kind)) {
      if (active.state === "submitted") {
        return yield* conflict("publication", `publication ${active.id} is still being processed`)
      }
      yield* publications.setState(active.id, "cancelled", "Publication was cancelled by a newer publication", now)
      yield* publications.deleteStaged(active.id)
    }
    const row: PublicationRow = {
      id: `v2-${crypto.randomUUID()}`,
      catalog_hrn: catalog.hrn,
      app_id: appId,
      layer_ids: JSON.stringify(layers.map((l) => l.id)),
      kind,
      state: "initialized",
      message: "Publication has been initialized",
      catalog_version: catalog.latest_version,
      dependencies: JSON.stringify(dependencies ?? []),
      started: now,
      modified: now,
      expires: now + PUBLICATION_LIFETIME_MS
    }
    yield* publications.insert(row)
    return row
  })

export interface IncomingPartition {
  readonly partition: string
  readonly dataHandle?: string | undefined
  readonly checksum?: string | undefined
  readonly dataSize?: number | undefined
  readonly compressedDataSize?: number | undefined
  readonly crc?: string | undefined
  /** Base64 of a small blob to store inline; a data handle is derived when none is given. */
  readonly data?: string | undefined
}

export const stagePartitions = (
  publication: PublicationRow,
  layer: LayerRow,
  incoming: ReadonlyArray<IncomingPartition>
) =>
  Effect.gen(function*() {
    const publications = yield* PublicationsRepo
    const blobs = yield* BlobsRepo
    const files = yield* BlobFiles
    if (publication.state !== "initialized") {
      return yield* conflict(
        "publication",
        `publication ${publication.id} is ${publication.state}; partitions can only be added while it is initialized`
      )
    }
    if (!(JSON.parse(publication.layer_ids) as Array<string>).includes(layer.id)) {
      return yield* badRequest("layer", `layer '${layer.id}' is not part of publication ${publication.id}`)
    }
    const staged: Array<StagedPartition> = []
    for (const p of incoming) {
      if (typeof p.partition !== "string" || !PARTITION_ID.test(p.partition)) {
        return yield* badRequest(
          "partition",
          `invalid partition id ${JSON.stringify(p.partition)}: use 1-500 characters of [A-Za-z0-9_-.:]`
        )
      }
      let dataHandle = p.dataHandle
      if (p.data !== undefined) {
        const bytes = Buffer.from(p.data, "base64")
        dataHandle ??= createHash("sha1").update(bytes).update(p.partition).digest("hex")
        const stored = yield* files.put(bytes)
        yield* blobs.putBlob(layer.pk, dataHandle, stored.sha256, stored.size, contentEncodingOf(layer))
      }
      if (dataHandle === undefined) {
        return yield* badRequest("dataHandle", `partition '${p.partition}' has neither dataHandle nor data`)
      }
      if (dataHandle !== "" && !DATA_HANDLE.test(dataHandle)) {
        return yield* badRequest(
          "dataHandle",
          `invalid data handle ${JSON.stringify(dataHandle)}: use 1-600 characters of [0-9a-zA-Z.-]`
        )
      }
      staged.push({
        layerPk: layer.pk,
        partition: p.partition,
        dataHandle,
        checksum: p.checksum ?? null,
        dataSize: p.dataSize ?? null,
        compressedDataSize: p.compressedDataSize ?? null,
        crc: p.crc ?? null
      })
    }
    for (let i = 0; i < staged.length; i += STAGE_BATCH) {
      yield* publications.stagePartitions(publication.id, staged.slice(i, i + STAGE_BATCH))
    }
  })

/**
 * Submits a publication: a versioned one becomes the next catalog version, a volatile one overwrites.
 * Returns the catalog version and, for a volatile one, the partitions it wrote (per data key).
 */
export const submitPublication = (publication: PublicationRow) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const versions = yield* VersionsRepo
    const publications = yield* PublicationsRepo
    if (publication.state !== "initialized") {
      return yield* conflict(
        "publication",
        `publication ${publication.id} is ${publication.state}; only an initialized publication can be submitted`
      )
    }
    const now = Date.now()
    const committed = yield* transaction(
      Effect.gen(function*() {
        const catalog = (yield* catalogs.catalog(publication.catalog_hrn))!
        if (publication.kind === "volatile") {
          const written = yield* publications.commitVolatile(publication.id, now)
          yield* publications.setState(publication.id, "succeeded", "Publication succeeded", now)
          return { version: catalog.latest_version, raised: false, written }
        }
        const version = catalog.latest_version + 1
        yield* publications.commitVersioned(publication.id, version, now)
        yield* versions.insertVersion(catalog.hrn, version, now, publication.dependencies)
        yield* catalogs.setVersions(catalog.hrn, version, catalog.latest_version < 0 ? version : catalog.min_version)
        yield* publications.setState(publication.id, "succeeded", "Publication succeeded", now, version)
        // In the commit's transaction: no POST versions/minimum can interleave and be lowered again.
        return { version, raised: yield* applyAutomaticDeletion(catalog.hrn), written: [] }
      })
    )
    if (committed.raised) yield* (yield* Collector).start(publication.catalog_hrn)
    return { version: committed.version, written: committed.written }
  })

export const publicationOf = (catalog: CatalogRow, id: string) =>
  Effect.gen(function*() {
    const row = yield* (yield* PublicationsRepo).byId(id)
    if (row === undefined || row.catalog_hrn !== catalog.hrn) {
      return yield* notFound("publicationId", `publication ${id} not found`)
    }
    return row
  })
