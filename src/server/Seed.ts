import * as Effect from "effect/Effect"
import { createHash, randomBytes } from "node:crypto"
import { gzipSync } from "node:zlib"
import * as HereTile from "../domain/HereTile.ts"
import { BlobFiles } from "./BlobFiles.ts"
import { type AppRow, AppsRepo } from "./db/AppsRepo.ts"
import { BlobsRepo } from "./db/BlobsRepo.ts"
import { CatalogsRepo, type LayerRow } from "./db/CatalogsRepo.ts"
import { transaction } from "./db/Database.ts"
import { PublicationsRepo, type StagedPartition } from "./db/PublicationsRepo.ts"
import { SEED_DEFAULTS } from "./Defaults.ts"
import { publishRoadsSchema, ROADS_SCHEMA_HRN, roadTileBundle, roadTileEncoder } from "./DemoRoads.ts"
import { prng } from "./Faults.ts"
import { initPublication, STAGE_BATCH, submitPublication } from "./Publishing.ts"
import { contentEncodingOf } from "./Views.ts"

/**
 * The demo seed: deterministic data (a seeded PRNG) that looks like a real catalog. Application keys
 * are random per data directory; everything else is the same on every machine.
 */
export interface SeedOptions {
  readonly demo: boolean
  /** Partitions of the versioned generic layer `places` at version 0. */
  readonly partitions: number
  /** Catalog versions to create (at least 1). */
  readonly versions: number
  /** Bytes of each `places` blob. */
  readonly blobBytes: number
  readonly seed: number
}

export const defaultSeed: SeedOptions = { demo: true, ...SEED_DEFAULTS, seed: 42 }
export const noSeed: SeedOptions = { ...defaultSeed, demo: false }

export const DEMO_CATALOG = "hrn:local:data:::demo"
export const RESTRICTED_CATALOG = "hrn:local:data:::restricted"
export const DEMO_APP = "demo-app"
export const OTHER_APP = "other-app"

/** Berlin, as in the HERE tile examples; the heretile layer covers a square of level-12 tiles around it. */
const CENTER = { lat: 52.52, lon: 13.405 }
const TILE_LEVEL = 12
const TILE_GRID = 16

const ensureApp = (id: string) =>
  Effect.gen(function*() {
    const apps = yield* AppsRepo
    const existing = yield* apps.byId(id)
    if (existing !== undefined) return existing
    const app: AppRow = {
      id,
      key_id: randomBytes(16).toString("base64url"),
      key_secret: randomBytes(48).toString("base64url"),
      user_id: `HERE-${crypto.randomUUID()}`,
      realm: "local"
    }
    yield* apps.upsert(app)
    return app
  })

const layerConfig = (config: Record<string, unknown>) => ({
  summary: "",
  description: "",
  tags: [],
  billingTags: [],
  ...config
})

const catalogConfig = (name: string, summary: string, owner: AppRow) => ({
  name,
  summary,
  description: `${summary} Seeded by catalog-export serve.`,
  tags: ["demo"],
  notifications: { enabled: false },
  owner: { creator: { id: owner.id }, organisation: { id: "olp-local" } }
})

const createCatalog = (
  hrn: string,
  id: string,
  owner: AppRow,
  config: Record<string, unknown>,
  layers: ReadonlyArray<{ id: string; layerType: string; config: Record<string, unknown> }>
) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const created = new Date().toISOString()
    yield* catalogs.insertCatalog({ hrn, id, owner_app: owner.id, config: JSON.stringify(config), created })
    const rows: Array<LayerRow> = []
    for (const layer of layers) {
      const row = {
        catalog_hrn: hrn,
        id: layer.id,
        layer_type: layer.layerType,
        config: JSON.stringify(layerConfig(layer.config)),
        created
      }
      rows.push({ ...row, pk: yield* catalogs.insertLayer(row) })
    }
    return rows
  })

const handleFrom = (random: () => number) => {
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join("")
  return `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`
}

const ENCODER = new TextEncoder()

const sha1 = (bytes: Uint8Array) => createHash("sha1").update(bytes).digest("hex")

/** Deterministic printable filler so blobs have the requested size (one PRNG draw per 4 characters). */
const ALPHABET = new TextEncoder().encode("abcdefghijklmnopqrstuvwxyz0123456789 ")
const fill = (random: () => number, out: Uint8Array) => {
  for (let i = 0; i < out.length; i += 4) {
    let r = Math.floor(random() * 0x100000000)
    for (let j = i; j < Math.min(i + 4, out.length); j++, r >>>= 8) out[j] = ALPHABET[(r & 0xff) % ALPHABET.length]!
  }
}

/** A JSON place padded to `bytes` with filler, written once into the buffer it is returned in (blobs may be large). */
const placeBlob = (random: () => number, id: number, version: number, bytes: number) => {
  const head = JSON.stringify({
    id: `place-${id}`,
    version,
    name: `Place ${id}`,
    lat: Number((CENTER.lat + (random() - 0.5)).toFixed(6)),
    lon: Number((CENTER.lon + (random() - 0.5)).toFixed(6)),
    pad: ""
  })
  const at = head.indexOf(`"pad":""`) + `"pad":"`.length
  const before = ENCODER.encode(head.slice(0, at))
  const after = ENCODER.encode(head.slice(at))
  const pad = Math.max(0, bytes - head.length)
  const out = new Uint8Array(before.length + pad + after.length)
  out.set(before)
  fill(random, out.subarray(before.length, before.length + pad))
  out.set(after, before.length + pad)
  return out
}

const tileBlob = (random: () => number, tileId: number, version: number) => {
  const box = HereTile.boundingBox(tileId)
  const features = Array.from({ length: 1 + Math.floor(random() * 4) }, (_, i) => ({
    type: "Feature",
    id: `${tileId}-${i}`,
    geometry: {
      type: "Point",
      coordinates: [
        Number((box.west + random() * (box.east - box.west)).toFixed(7)),
        Number((box.south + random() * (box.north - box.south)).toFixed(7))
      ]
    },
    properties: { kind: ["cafe", "park", "station", "museum"][i % 4], version }
  }))
  return new TextEncoder().encode(JSON.stringify({ type: "FeatureCollection", tile: tileId, features }))
}

interface Content {
  readonly bytes: Uint8Array
  readonly stored: Uint8Array
}

/** Stores blobs and stages their partitions in one publication, batch by batch. */
const publishBatch = (
  publicationId: string,
  layer: LayerRow,
  items: ReadonlyArray<{ partition: string; handle: string; content?: Content }>
) =>
  Effect.gen(function*() {
    const publications = yield* PublicationsRepo
    const blobs = yield* BlobsRepo
    const files = yield* BlobFiles
    const gzip = contentEncodingOf(layer) === "gzip"
    const present = items.filter((item) => item.content !== undefined)
    const stored = yield* files.putMany(present.map((item) => item.content!.stored))
    const written = present.map((item, i) => ({
      handle: item.handle,
      sha256: stored[i]!.sha256,
      size: stored[i]!.size
    }))
    const staged: Array<StagedPartition> = items.map((item) => {
      if (item.content === undefined) {
        return {
          layerPk: layer.pk,
          partition: item.partition,
          dataHandle: "",
          checksum: null,
          dataSize: null,
          compressedDataSize: null,
          crc: null
        }
      }
      const { bytes, stored } = item.content
      return {
        layerPk: layer.pk,
        partition: item.partition,
        dataHandle: item.handle,
        checksum: sha1(bytes),
        dataSize: bytes.byteLength,
        compressedDataSize: gzip ? stored.byteLength : null,
        crc: null
      }
    })
    yield* blobs.putBlobs(layer.pk, written, gzip ? "gzip" : null)
    yield* publications.stagePartitions(publicationId, staged)
  }).pipe(Effect.orDie)

/** Bytes of blobs made before they are written (the seed's memory, whatever --seed-blob-bytes is). */
const FLUSH_BYTES = 32 * 1024 * 1024

interface LayerPlan {
  readonly layer: LayerRow
  /** Partition ids at version 0, and the next id to add. */
  readonly initial: number
  readonly idOf: (n: number) => string
  readonly contentOf: (random: () => number, n: number, version: number) => Content
  /** Ids that may be added later (tiles stay inside their grid). */
  readonly capacity: number
  /** A PRNG of its own, so that adding this layer leaves the other layers' data as it was. */
  readonly random?: () => number
}

const evolve = (
  plans: ReadonlyArray<LayerPlan>,
  versions: number,
  shared: () => number,
  owner: AppRow,
  catalog: { hrn: string; id: string }
) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const live = plans.map((p) => {
      const bits = new Uint8Array(p.capacity)
      bits.fill(1, 0, p.initial)
      return { plan: p, bits, next: p.initial }
    })
    for (let version = 0; version < versions; version++) {
      const current = (yield* catalogs.catalog(catalog.hrn))!
      const publication = yield* initPublication(current, plans.map((p) => p.layer), owner.id, []).pipe(Effect.orDie)
      // One transaction per version: SQLite commits once instead of once per batch.
      yield* transaction(Effect.gen(function*() {
        for (const state of live) {
          const { plan, bits } = state
          const random = plan.random ?? shared
          const changes: Array<{ partition: string; handle: string; content?: Content }> = []
          let pending = 0
          const flush = Effect.suspend(() => {
            const batch = changes.splice(0, changes.length)
            pending = 0
            return batch.length === 0 ? Effect.void : publishBatch(publication.id, plan.layer, batch)
          })
          // A batch is written once it has STAGE_BATCH partitions or FLUSH_BYTES of blobs: large blobs
          // go to disk as they are made instead of all at once.
          const full = () => changes.length >= STAGE_BATCH || pending >= FLUSH_BYTES
          const add = (n: number) => {
            // The handle draws from the PRNG before the content does, as it always has (same seed, same data).
            const handle = handleFrom(random)
            const content = plan.contentOf(random, n, version)
            pending += content.stored.byteLength
            changes.push({ partition: plan.idOf(n), handle, content })
          }
          if (version === 0) {
            for (let n = 0; n < plan.initial; n++) {
              add(n)
              if (full()) yield* flush
            }
          } else {
            const touched = Math.max(1, Math.floor(state.next * 0.06))
            for (let i = 0; i < touched; i++) {
              const n = Math.floor(random() * state.next)
              const roll = random()
              if (bits[n] === 1 && roll < 0.15) {
                bits[n] = 0
                changes.push({ partition: plan.idOf(n), handle: "" })
              } else if (bits[n] === 1) {
                add(n)
              } else if (state.next < plan.capacity && roll < 0.5) {
                bits[state.next] = 1
                add(state.next++)
              }
              if (full()) yield* flush
            }
          }
          yield* flush
        }
      })).pipe(Effect.orDie)
      yield* submitPublication(publication)
    }
  })

const seedDemo = (options: SeedOptions, demo: AppRow, other: AppRow) =>
  Effect.gen(function*() {
    const random = prng(options.seed)
    const roadsBundle = roadTileBundle()
    yield* publishRoadsSchema(roadsBundle, demo.id)
    const [tiles, roads, places, traffic] = yield* createCatalog(
      DEMO_CATALOG,
      "demo",
      demo,
      catalogConfig("Demo catalog", "Berlin points of interest, places and live traffic.", demo),
      [
        {
          id: "tiles",
          layerType: "versioned",
          config: {
            name: "Berlin tiles",
            summary: "Points of interest per HERE tile, level 12",
            contentType: "application/geo+json",
            contentEncoding: "gzip",
            digest: "SHA-1",
            partitioning: { scheme: "heretile", tileLevels: [TILE_LEVEL] },
            volume: { volumeType: "durable" }
          }
        },
        {
          id: "roads",
          layerType: "versioned",
          config: {
            name: "Berlin roads",
            summary: "Road links per HERE tile, level 12, protobuf",
            contentType: "application/x-protobuf",
            schema: { hrn: ROADS_SCHEMA_HRN },
            digest: "SHA-1",
            partitioning: { scheme: "heretile", tileLevels: [TILE_LEVEL] },
            volume: { volumeType: "durable" }
          }
        },
        {
          id: "places",
          layerType: "versioned",
          config: {
            name: "Places",
            summary: "Places as JSON documents",
            contentType: "application/json",
            digest: "SHA-1",
            partitioning: { scheme: "generic" },
            volume: { volumeType: "durable" }
          }
        },
        {
          id: "traffic",
          layerType: "volatile",
          config: {
            name: "Live traffic",
            summary: "Current traffic flow per road segment",
            contentType: "application/json",
            digest: "SHA-1",
            partitioning: { scheme: "generic" },
            volume: { volumeType: "durable", maxMemoryPolicy: "failOnWrite" },
            ttl: 3_600_000
          }
        },
        {
          id: "events",
          layerType: "stream",
          config: {
            name: "Events",
            summary: "Change notifications",
            contentType: "application/json",
            partitioning: { scheme: "generic" },
            volume: { volumeType: "durable" }
          }
        }
      ]
    )
    const center = HereTile.toAddress(HereTile.fromCoordinates(CENTER.lat, CENTER.lon, TILE_LEVEL))
    const tileOf = (n: number) =>
      HereTile.fromAddress({
        level: TILE_LEVEL,
        column: center.column - TILE_GRID / 2 + (n % TILE_GRID),
        row: center.row - TILE_GRID / 2 + Math.floor(n / TILE_GRID)
      })
    const tilesPlan: LayerPlan = {
      layer: tiles!,
      initial: (TILE_GRID * TILE_GRID * 3) / 4,
      capacity: TILE_GRID * TILE_GRID,
      idOf: (n) => String(tileOf(n)),
      contentOf: (random, n, version) => {
        const bytes = tileBlob(random, tileOf(n), version)
        return { bytes, stored: gzipSync(bytes) }
      }
    }
    const placesPlan: LayerPlan = {
      layer: places!,
      initial: options.partitions,
      capacity: Math.ceil(options.partitions * 1.5) + 16,
      idOf: (n) => `place-${String(n).padStart(7, "0")}`,
      contentOf: (random, n, version) => {
        const bytes = placeBlob(random, n, version, options.blobBytes)
        return { bytes, stored: bytes }
      }
    }
    const encodeRoadTile = roadTileEncoder(roadsBundle)
    const roadsPlan: LayerPlan = {
      layer: roads!,
      initial: TILE_GRID * TILE_GRID / 2,
      capacity: TILE_GRID * TILE_GRID,
      idOf: (n) => String(tileOf(n)),
      contentOf: (random, n, version) => {
        const bytes = encodeRoadTile(random, tileOf(n), version)
        return { bytes, stored: bytes }
      },
      random: prng(options.seed + 1)
    }
    yield* evolve([tilesPlan, placesPlan, roadsPlan], Math.max(1, options.versions), random, demo, {
      hrn: DEMO_CATALOG,
      id: "demo"
    })

    // The volatile layer: published twice, the second time overwriting part of the first.
    const segments = 100
    for (let round = 0; round < 2; round++) {
      const current = (yield* (yield* CatalogsRepo).catalog(DEMO_CATALOG))!
      const publication = yield* initPublication(current, [traffic!], demo.id, []).pipe(Effect.orDie)
      const items = Array.from({ length: round === 0 ? segments : segments / 4 }, (_, n) => {
        const bytes = new TextEncoder().encode(
          JSON.stringify({ segment: `segment-${n}`, speedKmh: Math.round(10 + random() * 90), round })
        )
        return {
          partition: `segment-${String(n).padStart(4, "0")}`,
          handle: `traffic-${n}-${round}`,
          content: { bytes, stored: bytes }
        }
      })
      yield* publishBatch(publication.id, traffic!, items)
      yield* submitPublication(publication)
    }

    // A catalog the demo application may not read: it must be invisible to it.
    const [secret] = yield* createCatalog(
      RESTRICTED_CATALOG,
      "restricted",
      other,
      catalogConfig("Restricted catalog", "Owned by another application.", other),
      [{
        id: "private",
        layerType: "versioned",
        config: { name: "Private", contentType: "application/json", partitioning: { scheme: "generic" } }
      }]
    )
    const restricted = (yield* (yield* CatalogsRepo).catalog(RESTRICTED_CATALOG))!
    const publication = yield* initPublication(restricted, [secret!], other.id, []).pipe(Effect.orDie)
    const bytes = new TextEncoder().encode(`{"secret":true}`)
    yield* publishBatch(publication.id, secret!, [{
      partition: "p1",
      handle: "restricted-1",
      content: { bytes, stored: bytes }
    }])
    yield* submitPublication(publication)
  })

/** Creates the applications (always) and, when asked and not yet there, the demo catalogs. */
export const seed = (options: SeedOptions) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogsRepo
    const demo = yield* ensureApp(DEMO_APP)
    const other = yield* ensureApp(OTHER_APP)
    if (!options.demo || (yield* catalogs.catalog(DEMO_CATALOG)) !== undefined) return
    yield* seedDemo(options, demo, other)
  }).pipe(Effect.orDie)
