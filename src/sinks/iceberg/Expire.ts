import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { SinkError } from "../SinkError.ts"
import { commit, type CommitOptions, type Committed, readCurrent } from "./Commit.ts"
import type { IcebergError } from "./Errors.ts"
import { keyOfUri, type TableLocation } from "./Location.ts"
import { decodeManifest } from "./Manifest.ts"
import { decodeManifestList } from "./ManifestList.ts"
import { isLive, readManifest, readManifestList } from "./SnapshotFiles.ts"
import { parseMetadata, type Snapshot, type TableMetadata } from "./TableMetadata.ts"

/**
 * Expiring snapshots ("Snapshot Retention Policy"): the tags of versions below a minimum (or those a
 * predicate names) are removed, then every snapshot no remaining reference (`main`, a tag) points to,
 * then the files only such snapshots used: manifest lists, manifests, data and delete files. Nothing
 * a live snapshot reads is deleted. The files of snapshots expired by an earlier run that was stopped
 * before it deleted them are found again through the previous metadata files (`metadata-log`), so the
 * next run completes the work. A dry run lists what would go and changes nothing.
 */

export interface ExpireOptions {
  /** Tags `v<N>` with N below this go. */
  readonly minVersion?: number | undefined
  /** Further tags to remove (a volatile layer's old `snapshot-<time>` tags). */
  readonly dropTag?: ((name: string, snapshot: Snapshot | undefined) => boolean) | undefined
  readonly dryRun?: boolean | undefined
  readonly commit?: CommitOptions | undefined
}

export interface Expired {
  readonly tags: ReadonlyArray<string>
  readonly snapshots: ReadonlyArray<number>
  /** The URIs of the files deleted (a dry run: that would be). */
  readonly files: ReadonlyArray<string>
  /** The commit that removed the tags and snapshots (none: nothing to remove, or a dry run). */
  readonly committed: Committed | undefined
}

interface Plan {
  readonly tags: ReadonlyArray<string>
  readonly expired: ReadonlyArray<Snapshot>
  readonly metadata: TableMetadata
}

const planFor = (metadata: TableMetadata, options: ExpireOptions): Plan => {
  const snapshots = metadata.snapshots ?? []
  const byId = new Map(snapshots.map((s) => [s["snapshot-id"], s]))
  const refs = { ...metadata.refs }
  const tags: Array<string> = []
  for (const [name, ref] of Object.entries(refs)) {
    if (ref.type !== "tag") continue
    const version = /^v(\d+)$/.exec(name)
    const below = version !== null && options.minVersion !== undefined && Number(version[1]) < options.minVersion
    if (below || options.dropTag?.(name, byId.get(ref["snapshot-id"])) === true) {
      tags.push(name)
      delete refs[name]
    }
  }
  const retained = new Set(Object.values(refs).map((r) => r["snapshot-id"]))
  const current = metadata["current-snapshot-id"]
  if (current !== undefined && current !== null) retained.add(current)
  const expired = snapshots.filter((s) => !retained.has(s["snapshot-id"]))
  const gone = new Set(expired.map((s) => s["snapshot-id"]))
  const log = metadata["snapshot-log"] ?? []
  const lastGone = log.findLastIndex((e) => gone.has(e["snapshot-id"]))
  const withoutExpired = (key: string) => {
    const list = (metadata as Record<string, unknown>)[key]
    return Array.isArray(list)
      ? { [key]: list.filter((s: { "snapshot-id"?: number }) => !gone.has(s?.["snapshot-id"] ?? -1)) }
      : {}
  }
  return {
    tags,
    expired,
    metadata: {
      ...metadata,
      snapshots: snapshots.filter((s) => retained.has(s["snapshot-id"])),
      refs,
      "snapshot-log": log.slice(lastGone + 1),
      ...withoutExpired("statistics"),
      ...withoutExpired("partition-statistics")
    }
  }
}

/** Every file the snapshots' readers use: their manifest lists, manifests, live data and delete files. */
export const reachable = (table: TableLocation, snapshots: ReadonlyArray<Snapshot>) =>
  Effect.gen(function*() {
    const files = new Set<string>()
    const manifests = new Set<string>()
    for (const snapshot of snapshots) {
      files.add(snapshot["manifest-list"])
      for (const manifest of yield* readManifestList(table, snapshot)) {
        if (manifests.has(manifest.manifest_path)) continue
        manifests.add(manifest.manifest_path)
        files.add(manifest.manifest_path)
        const { entries } = yield* readManifest(table, manifest)
        for (const e of entries) if (isLive(e)) files.add(e.data_file.file_path)
      }
    }
    return files
  })

/** A file the table recorded, if it is still there. */
const readIfThere = (table: TableLocation, uri: string) => {
  const key = keyOfUri(table, uri)
  return key === undefined ? Effect.succeed(Option.none<Uint8Array>()) : table.dest.readBytes(key)
}

/**
 * The files of `gone` (snapshots no longer in the table) that live snapshots do not use, and that
 * are still there.
 */
const unused = (
  table: TableLocation,
  gone: ReadonlyArray<Snapshot>,
  live: ReadonlySet<string>
): Effect.Effect<Array<string>, SinkError | IcebergError> =>
  Effect.gen(function*() {
    const found = new Set<string>()
    const seen = new Set<string>()
    const add = (uri: string) => {
      if (!live.has(uri) && keyOfUri(table, uri) !== undefined) found.add(uri)
    }
    for (const snapshot of gone) {
      const listUri = snapshot["manifest-list"]
      if (seen.has(listUri)) continue
      seen.add(listUri)
      const list = yield* readIfThere(table, listUri)
      if (Option.isNone(list)) continue
      add(listUri)
      const manifests = yield* Effect.orElseSucceed(Effect.tryPromise(() => decodeManifestList(list.value)), () => [])
      for (const manifest of manifests) {
        if (seen.has(manifest.manifest_path)) continue
        seen.add(manifest.manifest_path)
        const bytes = yield* readIfThere(table, manifest.manifest_path)
        if (Option.isNone(bytes)) continue
        add(manifest.manifest_path)
        const entries = yield* Effect.orElseSucceed(Effect.tryPromise(() => decodeManifest(bytes.value)), () => [])
        for (const e of entries) if (isLive(e)) add(e.data_file.file_path)
      }
    }
    return [...found]
  })

/** The snapshots of the table's previous metadata files (`metadata-log`) that `metadata` no longer has. */
const earlierSnapshots = (table: TableLocation, metadata: TableMetadata) =>
  Effect.gen(function*() {
    const now = new Set((metadata.snapshots ?? []).map((s) => s["snapshot-id"]))
    const found = new Map<number, Snapshot>()
    for (const entry of metadata["metadata-log"] ?? []) {
      const key = keyOfUri(table, entry["metadata-file"])
      if (key === undefined) continue
      const text = yield* table.dest.read(key)
      if (Option.isNone(text)) continue
      const earlier = yield* Effect.option(parseMetadata(table.uri, entry["metadata-file"], text.value))
      if (Option.isNone(earlier)) continue
      for (const s of earlier.value.snapshots ?? []) if (!now.has(s["snapshot-id"])) found.set(s["snapshot-id"], s)
    }
    return [...found.values()]
  })

/** Expires the table's snapshots below `minVersion` (and the tags `dropTag` names), and deletes their files. */
export const expireSnapshots = Effect.fn("Iceberg.expireSnapshots")(
  function*(table: TableLocation, options: ExpireOptions) {
    let plan: Plan | undefined
    let before: TableMetadata | undefined
    const propose = (metadata: TableMetadata | undefined) => {
      before = metadata
      plan = metadata === undefined ? undefined : planFor(metadata, options)
      return plan === undefined || (plan.tags.length === 0 && plan.expired.length === 0)
        ? undefined
        : { metadata: plan.metadata, attemptFiles: [] }
    }
    let committed: Committed | undefined
    if (options.dryRun === true) {
      propose((yield* readCurrent(table)).metadata)
    } else {
      committed = yield* commit(table, (current) => Effect.succeed(propose(current.metadata)), options.commit)
    }
    const after = committed?.metadata ?? plan?.metadata ?? before
    if (after === undefined) return { tags: [], snapshots: [], files: [], committed } satisfies Expired
    const gone = [...(plan?.expired ?? []), ...(yield* earlierSnapshots(table, after))]
    const live = yield* reachable(table, after.snapshots ?? [])
    const files = yield* unused(table, gone, live)
    if (options.dryRun !== true && files.length > 0) {
      yield* table.dest.remove(files.map((uri) => keyOfUri(table, uri)!))
    }
    return {
      tags: plan?.tags ?? [],
      snapshots: (plan?.expired ?? []).map((s) => s["snapshot-id"]),
      files,
      committed
    } satisfies Expired
  }
)
