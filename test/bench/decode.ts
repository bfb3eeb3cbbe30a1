/**
 * Decoding rate of the demo protobuf layer (`roads`) on one core: blobs made by the demo seed's
 * encoder, decoded batch by batch into columns, then written to Parquet (zstd level 1) and Arrow.
 * Rates are per second of this process's CPU time (user + system), so that other work on the machine
 * does not count against them. Reports partitions/s, rows/s and MB/s of blob bytes for each stage, and first the two decoders
 * considered, bare (no conversion to columns): protobuf.js (generated code, chosen) and
 * @bufbuild/protobuf (reflection). `npm run bench:decode [N]`.
 */
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf"
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt"
import * as Effect from "effect/Effect"
import { unzipSync } from "fflate"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { DESCRIPTOR_SET_PATH, mainMessageOf, readBundle } from "../../src/decode/Bundle.ts"
import { DecodedArrowWriter } from "../../src/decode/DecodedArrow.ts"
import { DecodedParquetWriter } from "../../src/decode/DecodedParquet.ts"
import { makeDecoder } from "../../src/decode/LayerContent.ts"
import * as HereTile from "../../src/domain/HereTile.ts"
import { roadTileBundle, roadTileEncoder } from "../../src/server/DemoRoads.ts"
import { prng } from "../../src/server/Faults.ts"
import { zstdCodec } from "../../src/sinks/ParquetCodecs.ts"
import { batchOf } from "../../src/sinks/RowBatch.ts"

const N = Number(process.argv[2] ?? 20_000)
const BATCH = 1000
const bundle = roadTileBundle()
const encode = roadTileEncoder(bundle)
const random = prng(7)
const center = HereTile.toAddress(HereTile.fromCoordinates(52.52, 13.405, 12))
const inputs = Array.from({ length: N }, (_, i) => {
  const tile = HereTile.fromAddress({
    level: 12,
    column: center.column + (i % 200),
    row: center.row + Math.floor(i / 200) % 100
  })
  const data = encode(random, tile, i)
  return {
    partition: String(tile),
    partitionVersion: 1,
    dataHandle: `h-${i}`,
    dataSize: data.byteLength,
    checksum: null,
    data
  }
})
// Batches as the export hands them over, built before the clock starts.
const batches = Array.from(
  { length: Math.ceil(N / BATCH) },
  (_, b) => batchOf(inputs.slice(b * BATCH, (b + 1) * BATCH))
)
const blobBytes = inputs.reduce((n, p) => n + p.data!.byteLength, 0)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-decode-"))

const measure = async (name: string, explode: string | undefined, format: "parquet" | "arrow" | undefined) => {
  const decoder = await Effect.runPromise(makeDecoder(
    { layerId: "roads", contentType: "application/x-protobuf", heretile: false, schemaBundle: bundle },
    { mode: "auto", onError: "fail", ...(explode === undefined ? {} : { explode }) }
  ))
  // The export's decoding writers: one row group per batch, decoded as it is written.
  let rows = 0
  const count = (batch: { readonly rows: number }) => void (rows += batch.rows)
  const options = {
    path: path.join(dir, `out.${format}`),
    heretile: false,
    metadata: {},
    rowGroupBytes: 2 ** 30,
    createdBy: "bench"
  }
  const writer = format === undefined
    ? undefined
    : format === "parquet"
    ? new DecodedParquetWriter(options, zstdCodec(1), decoder, count)
    : new DecodedArrowWriter(options, decoder, count)
  const start = process.cpuUsage()
  for (const batch of batches) {
    if (writer === undefined) count(decoder.decode(batch))
    else {
      writer.add(batch, 0, batch.length, batch.bytes)
      writer.flush()
    }
  }
  writer?.finish()
  const seconds = cpuSince(start)
  console.log(
    `${name.padEnd(34)} ${String(Math.round(N / seconds)).padStart(8)} partitions/s ${
      String(Math.round(rows / seconds)).padStart(9)
    } rows/s ${(blobBytes / seconds / 1e6).toFixed(1).padStart(7)} MB/s`
  )
}

/** CPU seconds (user + system) of this process since `from`. */
const cpuSince = (from: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(from)
  return (used.user + used.system) / 1e6
}

const bare = (name: string, decode: (bytes: Uint8Array) => unknown) => {
  const start = process.cpuUsage()
  for (const p of inputs) decode(p.data!)
  const seconds = cpuSince(start)
  console.log(
    `${name.padEnd(34)} ${String(Math.round(N / seconds)).padStart(8)} partitions/s ${
      (blobBytes / seconds / 1e6).toFixed(1).padStart(7)
    } MB/s`
  )
}
const protobufjs = mainMessageOf(readBundle(bundle))
const bufbuild = createFileRegistry(fromBinary(FileDescriptorSetSchema, unzipSync(bundle)[DESCRIPTOR_SET_PATH]!))
  .getMessage("catalog_export.demo.v1.RoadTile")!

console.log(
  `${N} demo road tiles, ${
    (blobBytes / N).toFixed(0)
  } bytes each on average, batches of ${BATCH}; node ${process.version}; rates per CPU second`
)
for (let round = 0; round < 2; round++) {
  if (round === 1) console.log("-- second round (warm) --")
  bare("bare protobuf.js decode", (b) => protobufjs.decode(b))
  bare("bare @bufbuild/protobuf decode", (b) => fromBinary(bufbuild, b))
  await measure("decode only", undefined, undefined)
  await measure("decode --explode road_link", "road_link", undefined)
  await measure("decode + Parquet (zstd 1)", undefined, "parquet")
  await measure("decode + Arrow IPC", undefined, "arrow")
  await measure("decode --explode + Parquet", "road_link", "parquet")
}
fs.rmSync(dir, { recursive: true, force: true })
