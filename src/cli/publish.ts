import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { BlobUploads, type DigestAlgorithm } from "../client/BlobUpload.ts"
import { ConfigApi } from "../client/ConfigApi.ts"
import { PublishApi } from "../client/PublishApi.ts"
import { UsageError } from "../domain/ExitCode.ts"
import * as Hrn from "../domain/Hrn.ts"
import { plural } from "../domain/Plural.ts"
import { PARTITION_ID, type Publication, type PublishPartition } from "../domain/Publish.ts"
import { globalOptions, integerOption, retryOptions, withClient } from "./common.ts"

/**
 * `publish`: files into a versioned or volatile layer as one publication (publish API v2): every blob
 * is uploaded under a new data handle (client/BlobUpload.ts: one PUT, or a multipart upload for large
 * files), then the partitions' metadata, then the publication is submitted, which makes one new catalog
 * version (a versioned layer) or overwrites (a volatile one). A failure before the submission cancels
 * the publication: nothing becomes visible.
 */

interface Source {
  readonly partition: string
  readonly file: string
}

const POLL = "200 millis"
const DIGESTS: Record<string, DigestAlgorithm> = { "SHA-1": "sha1", "SHA-256": "sha256", MD5: "md5" }

const fromFlags = (pairs: ReadonlyArray<string>) =>
  Effect.forEach(pairs, (pair) => {
    const at = pair.indexOf("=")
    if (at <= 0 || at === pair.length - 1) {
      return Effect.fail(new UsageError({ message: `--partition takes ID=FILE, got '${pair}'.` }))
    }
    return Effect.succeed({ partition: pair.slice(0, at), file: pair.slice(at + 1) })
  })

/** The regular files of a directory, by name; names are partition ids. */
const fromDir = (dir: string) =>
  Effect.try({
    try: () =>
      fs.readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isFile() && !e.name.startsWith("."))
        .map((e) => ({ partition: e.name, file: path.join(dir, e.name) }))
        .sort((a, b) => (a.partition < b.partition ? -1 : 1)),
    catch: (e) =>
      new UsageError({ message: `--from-dir ${dir}: cannot list it (${e instanceof Error ? e.message : String(e)}).` })
  })

const checkSources = (sources: ReadonlyArray<Source>) =>
  Effect.gen(function*() {
    if (sources.length === 0) {
      return yield* new UsageError({
        message: "Nothing to publish: give --partition ID=FILE (repeatable) or --from-dir DIR with files in it."
      })
    }
    const seen = new Set<string>()
    for (const s of sources) {
      if (!PARTITION_ID.test(s.partition)) {
        return yield* new UsageError({
          message:
            `'${s.partition}' is not a valid partition id: use 1-500 characters of A-Z, a-z, 0-9, '_', '-', '.', ':'.`
        })
      }
      if (seen.has(s.partition)) return yield* new UsageError({ message: `Partition '${s.partition}' is given twice.` })
      seen.add(s.partition)
      const stat = yield* Effect.try({
        try: () => fs.statSync(s.file),
        catch: () =>
          new UsageError({ message: `${s.file} (partition '${s.partition}') does not exist or cannot be read.` })
      })
      if (!stat.isFile()) {
        return yield* new UsageError({ message: `${s.file} (partition '${s.partition}') is not a file.` })
      }
    }
  })

export const publishCommand = Command.make(
  "publish",
  {
    ...globalOptions,
    ...retryOptions,
    json: Options.boolean("json").pipe(Options.withDescription("Print the finished publication as JSON.")),
    catalog: Options.text("catalog").pipe(Options.withDescription("Catalog HRN.")),
    layer: Options.text("layer").pipe(Options.withDescription("A versioned or volatile layer of the catalog.")),
    partition: Options.text("partition").pipe(
      Options.withPseudoName("ID=FILE"),
      Options.repeated,
      Options.withDescription("A partition and the file with its content; repeat for more.")
    ),
    fromDir: Options.directory("from-dir").pipe(
      Options.optional,
      Options.withDescription("Publish every regular file of DIR; file names are partition ids.")
    ),
    concurrency: integerOption("concurrency").pipe(
      Options.withDefault(8),
      Options.withDescription("Blob uploads in flight (default 8).")
    )
  },
  (o) =>
    withClient(
      o,
      o.catalog,
      Effect.gen(function*() {
        const hrn = yield* Hrn.canonicalCatalog(o.catalog)
        if (o.concurrency < 1 || o.concurrency > 256) {
          return yield* new UsageError({ message: `--concurrency must be 1-256, got ${o.concurrency}.` })
        }
        if (Option.isSome(o.fromDir) && o.partition.length > 0) {
          return yield* new UsageError({ message: "Give either --partition or --from-dir, not both." })
        }
        const sources = Option.isSome(o.fromDir) ? yield* fromDir(o.fromDir.value) : yield* fromFlags(o.partition)
        yield* checkSources(sources)

        const catalog = yield* (yield* ConfigApi).getCatalog(hrn)
        const layer = catalog.layers.find((l) => l.id === o.layer)
        if (layer === undefined) {
          return yield* new UsageError({
            message: `Catalog ${hrn} has no layer '${o.layer}' (layers: ${catalog.layers.map((l) => l.id).join(", ")}).`
          })
        }
        if (layer.layerType !== "versioned" && layer.layerType !== "volatile") {
          return yield* new UsageError({
            message: `Layer '${o.layer}' is a ${layer.layerType} layer; publish writes versioned and volatile layers.`
          })
        }
        const uploads = yield* BlobUploads
        const options = {
          contentType: layer.contentType ?? "application/octet-stream",
          gzip: layer.contentEncoding === "gzip",
          checksum: layer.digest === undefined ? undefined : DIGESTS[layer.digest]
        }
        const api = layer.layerType === "volatile" ? "volatile-blob" : "blob"
        const publisher = yield* PublishApi

        const publication = yield* publisher.initPublication(hrn, [o.layer])
        const upload = (source: Source) =>
          Effect.gen(function*() {
            const dataHandle = randomUUID()
            const uploaded = yield* uploads.uploadFile({ api, hrn, layer: o.layer, dataHandle }, source.file, options)
            return { partition: source.partition, dataHandle, ...uploaded } satisfies PublishPartition
          })
        const done: Publication = yield* Effect.gen(function*() {
          const partitions = yield* Effect.forEach(sources, upload, { concurrency: o.concurrency })
          yield* publisher.uploadPartitions(hrn, o.layer, publication.id, partitions)
          yield* publisher.submitPublication(hrn, publication.id)
          for (;;) {
            const current = yield* publisher.getPublication(hrn, publication.id)
            if (current.details.state !== "submitted" && current.details.state !== "initialized") return current
            yield* Effect.sleep(POLL)
          }
        }).pipe(Effect.onError(() => Effect.ignore(publisher.cancelPublication(hrn, publication.id))))
        if (done.details.state !== "succeeded") {
          return yield* new UsageError({
            message: `Publication ${done.id} ended ${done.details.state}: ${done.details.message}.`
          })
        }
        const bytes = sources.reduce((n, s) => n + fs.statSync(s.file).size, 0)
        yield* Console.log(
          o.json
            ? JSON.stringify(done)
            : layer.layerType === "versioned"
            ? `Published ${
              plural(sources.length, "partition")
            }, ${bytes} bytes, to ${hrn} layer ${o.layer} as catalog version ${done.catalogVersion}.`
            : `Published ${
              plural(sources.length, "partition")
            }, ${bytes} bytes, to the volatile layer ${o.layer} of ${hrn}.`
        )
      })
    )
).pipe(
  Command.withDescription(
    "Publish files into a versioned or volatile layer as one publication (one new catalog version)."
  )
)
