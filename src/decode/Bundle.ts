import { strFromU8, strToU8, unzipSync, zipSync } from "fflate"
import type protobuf from "protobufjs"
import { compileProto, messageType, rootFromDescriptorSet, rootFromProto, SchemaError } from "./ProtoSchema.ts"

/**
 * Schema bundles: the `ds` variant of a schema, a ZIP with the .proto files at their import paths, the
 * compiled `google.protobuf.FileDescriptorSet` at `META-INF/layer.fds`, and
 * `META-INF/layer.manifest.json`, whose `main.message` names the layer's top-level message.
 */

export const DESCRIPTOR_SET_PATH = "META-INF/layer.fds"
export const MANIFEST_PATH = "META-INF/layer.manifest.json"

export interface BundleManifest {
  readonly main: { readonly message: string; readonly source?: string }
  readonly components?: ReadonlyArray<unknown>
}

export interface SchemaBundle {
  readonly manifest: BundleManifest
  /** `.proto` sources by path */
  readonly protoFiles: Readonly<Record<string, string>>
  readonly descriptorSet: Uint8Array | undefined
}

/** Reads a bundle; throws SchemaError saying what is missing. `name` says which input in the message. */
export const readBundle = (bytes: Uint8Array, name = "the schema bundle"): SchemaBundle => {
  let entries: Record<string, Uint8Array>
  try {
    entries = unzipSync(bytes)
  } catch (e) {
    throw new SchemaError(`${name} is not a ZIP file (${e instanceof Error ? e.message : String(e)})`)
  }
  const manifestBytes = entries[MANIFEST_PATH]
  if (manifestBytes === undefined) throw new SchemaError(`${name} has no ${MANIFEST_PATH}`)
  let manifest: BundleManifest
  try {
    manifest = JSON.parse(strFromU8(manifestBytes)) as BundleManifest
  } catch (e) {
    throw new SchemaError(`${name}: ${MANIFEST_PATH} is not JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  if (typeof manifest?.main?.message !== "string" || manifest.main.message === "") {
    throw new SchemaError(`${name}: ${MANIFEST_PATH} has no main.message naming the top-level message`)
  }
  const protoFiles: Record<string, string> = {}
  for (const [path, content] of Object.entries(entries)) {
    if (path.endsWith(".proto")) protoFiles[path] = strFromU8(content)
  }
  const descriptorSet = entries[DESCRIPTOR_SET_PATH]
  if (descriptorSet === undefined && Object.keys(protoFiles).length === 0) {
    throw new SchemaError(`${name} has neither ${DESCRIPTOR_SET_PATH} nor .proto files`)
  }
  return { manifest, protoFiles, descriptorSet }
}

/**
 * The bundle's main message type: from the descriptor set when there is one (no protoc, no parsing),
 * else from the .proto files.
 */
export const mainMessageOf = (bundle: SchemaBundle): protobuf.Type => {
  const root = bundle.descriptorSet !== undefined
    ? rootFromDescriptorSet(bundle.descriptorSet)
    : rootFromProto(bundle.protoFiles)
  return messageType(root, bundle.manifest.main.message)
}

export interface BuildBundleOptions {
  /** `.proto` sources keyed by import path, e.g. `com/example/tile.proto` */
  readonly protoFiles: Readonly<Record<string, string>>
  /** full name of the top-level message, e.g. `com.example.Tile` */
  readonly mainMessage: string
  /** leave out META-INF/layer.fds (to exercise the .proto fallback) */
  readonly withoutDescriptorSet?: boolean
}

/** Builds a bundle from .proto text, compiling the descriptor set without protoc. */
export const buildBundle = (options: BuildBundleOptions): Uint8Array => {
  const descriptorSet = compileProto(options.protoFiles)
  const main = messageType(rootFromDescriptorSet(descriptorSet), options.mainMessage)
  const source = Object.keys(options.protoFiles).find((path) =>
    options.protoFiles[path]!.includes(`message ${main.name}`)
  )
  const manifest = {
    main: { message: main.fullName.slice(1), ...(source === undefined ? {} : { source }) },
    components: Object.keys(options.protoFiles).filter((p) => p !== source).map((p) => ({ source: p }))
  }
  const entries: Record<string, Uint8Array> = {}
  for (const [path, text] of Object.entries(options.protoFiles)) entries[path] = strToU8(text)
  entries[MANIFEST_PATH] = strToU8(JSON.stringify(manifest, null, 2))
  if (options.withoutDescriptorSet !== true) entries[DESCRIPTOR_SET_PATH] = descriptorSet
  // A fixed timestamp: the same sources give the same bytes.
  return zipSync(entries, { level: 6, mtime: new Date("2020-01-01T00:00:00Z") })
}
