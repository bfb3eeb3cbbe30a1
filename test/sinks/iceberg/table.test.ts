/**
 * Iceberg tables written by the library (src/sinks/iceberg) into a local directory, every tag read
 * back by an independent reader (icebird: its own Avro decoder, hyparquet, position deletes) and
 * compared with the layer's rows at that version: a full export, five changes runs with deletions,
 * historic versions, expiry, compaction. DuckDB checks the field ids of the data and delete files.
 */
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { destination } from "../../../src/sinks/Destination.ts"
import { readCurrent } from "../../../src/sinks/iceberg/Commit.ts"
import { compact, compactionDue } from "../../../src/sinks/iceberg/Compaction.ts"
import { expireSnapshots } from "../../../src/sinks/iceberg/Expire.ts"
import { locateRows } from "../../../src/sinks/iceberg/LiveRows.ts"
import { tableAt, type TableLocation } from "../../../src/sinks/iceberg/Location.ts"
import { mainVersion, nearestOlder, snapshotOfVersion, taggedVersions } from "../../../src/sinks/iceberg/Table.ts"
import { currentSnapshot, type TableMetadata } from "../../../src/sinks/iceberg/TableMetadata.ts"
import { literal, query, withDuckDB } from "../../support/duckdb.ts"
import { filesBelow } from "../../support/files.ts"
import {
  expectedRows,
  exportVersion,
  initialLayer,
  type Layer,
  metadataOf,
  nextVersion,
  run,
  tablesTest
} from "./support.ts"

const { read, tempDir } = tablesTest("iceberg-test-")

/** Every tag of the table read by icebird equals the layer at that version; main is the newest. */
const expectTags = async (table: TableLocation, states: ReadonlyMap<number, Layer>) => {
  const metadata = await metadataOf(table)
  const tags = taggedVersions(metadata).map((t) => t.version)
  expect(tags).toEqual([...states.keys()].sort((a, b) => a - b))
  for (const [version, layer] of states) {
    expect(await read(table.uri, `v${version}`), `tag v${version}`).toEqual(expectedRows(layer.values()))
  }
  expect(mainVersion(metadata)).toBe(Math.max(...states.keys()))
}

/** The table directory's files as a set of file:// URIs. */
const filesOf = (table: TableLocation) => new Set(filesBelow(table.dest.at(table.key)).map((f) => `${table.uri}/${f}`))

/** The files a snapshot references, enumerated by icebird (independent Avro decoding). */
const referencedBy = async (metadata: TableMetadata, snapshotId: number) => {
  const { icebergManifests } = await import("icebird")
  const snapshot = metadata.snapshots!.find((s) => s["snapshot-id"] === snapshotId)!
  const manifests = await icebergManifests({ ...metadata, "current-snapshot-id": snapshotId } as never)
  return [
    snapshot["manifest-list"],
    ...manifests.flatMap((m) => [m.url, ...m.entries.filter((e) => e.status !== 2).map((e) => e.data_file.file_path)])
  ]
}

/** Exports versions 0 (full) to 5 (changes) of a 400-partition layer; returns the table and the layer at each version. */
const fiveChanges = async () => {
  const dest = await run(destination(tempDir()))
  const table = tableAt(dest, "demo/places")
  const states = new Map<number, Layer>([[0, initialLayer(400)]])
  await run(exportVersion(table, { version: 0, rows: [...states.get(0)!.values()] }))
  for (let version = 1; version <= 5; version++) {
    const { changed, deleted, layer } = nextVersion(states.get(version - 1)!, version, 9, 7)
    states.set(version, layer)
    const result = await run(exportVersion(table, {
      version,
      mode: "changes",
      baseVersion: version - 1,
      rows: changed.map((id) => layer.get(id)!),
      deleted: new Set(deleted)
    }))
    expect(result._tag).toBe("Committed")
  }
  return { table, states }
}

describe("Iceberg tables: versions as tagged snapshots", () => {
  it("a full export, then five changes runs with deletions: every tag reads its version's rows", async () => {
    const { states, table } = await fiveChanges()
    await expectTags(table, states)
    const metadata = await metadataOf(table)
    const main = currentSnapshot(metadata)!
    expect(main.summary).toMatchObject({
      operation: "overwrite",
      "catalog-export.catalog-version": "5",
      "catalog-export.mode": "changes",
      "catalog-export.base-version": "4"
    })
    // A changes run adds only what changed: the previous data files are carried over, not rewritten.
    const v4 = snapshotOfVersion(metadata, 4)!
    const v5 = snapshotOfVersion(metadata, 5)!
    expect(v5["parent-snapshot-id"]).toBe(v4["snapshot-id"])
    const [before, after] = [
      await referencedBy(metadata, v4["snapshot-id"]),
      await referencedBy(metadata, v5["snapshot-id"])
    ]
    const kept = before.filter((f) => after.includes(f))
    expect(kept.length).toBe(before.length - 1) // all but v4's manifest list
    const added = Number(v5.summary["added-records"])
    expect(added).toBeGreaterThan(0)
    expect(Number(v5.summary["added-position-deletes"])).toBeGreaterThan(0)
    expect(Number(v5.summary["total-records"]) - Number(v5.summary["total-position-deletes"])).toBe(states.get(5)!.size)
    // Field ids on every column of the data and delete files.
    const dataDir = path.join(table.dest.at(table.key), "data")
    const schemas = await withDuckDB((c) =>
      query(
        c,
        `SELECT file_name, name, field_id FROM parquet_schema(${
          literal(path.join(dataDir, "**", "*.parquet"))
        }) WHERE name <> 'root' AND name <> 'schema'`
      )
    )
    expect(schemas.length).toBeGreaterThan(0)
    expect(schemas.filter((s) => s.field_id === null)).toEqual([])
    const deleteColumns = schemas.filter((s) => String(s.file_name).includes("deletes-"))
    expect(new Set(deleteColumns.map((s) => `${s.name}:${s.field_id}`))).toEqual(
      new Set(["file_path:2147483546", "pos:2147483545"])
    )
  })

  it("finds the live row of a partition in the table itself, and not a deleted or superseded one", async () => {
    const { states, table } = await fiveChanges()
    const metadata = await metadataOf(table)
    const layer = states.get(5)!
    const rows = await run(locateRows(table, snapshotOfVersion(metadata, 5)!, 1, () => true))
    expect(new Set(rows.keys())).toEqual(new Set(layer.keys()))
    expect([...rows.values()].every((r) => r.length === 1)).toBe(true)
    // The located rows, read by DuckDB from the files at those positions, are the partitions' current rows.
    const located = [...rows.entries()].slice(0, 50)
    const read = await withDuckDB((c) =>
      query(
        c,
        `SELECT partition, partition_version, filename, file_row_number FROM read_parquet([${
          [...new Set(located.map(([, [r]]) => r!.file))].map((f) => literal(f.slice("file://".length))).join(", ")
        }], filename = true, file_row_number = true)`
      )
    )
    for (const [id, [at]] of located) {
      const row = read.find((r) => `file://${r.filename}` === at!.file && Number(r.file_row_number) === at!.pos)
      expect(row?.partition).toBe(id)
      expect(row?.partition_version).toBe(layer.get(id)!.partitionVersion)
    }
  })

  it("a version already tagged is not exported again", async () => {
    const dest = await run(destination(tempDir()))
    const table = tableAt(dest, "demo/places")
    const layer = initialLayer(50)
    await run(exportVersion(table, { version: 3, rows: [...layer.values()] }))
    const metadataFiles = () => [...filesOf(table)].filter((f) => f.includes("/metadata/"))
    const before = metadataFiles()
    const again = await run(exportVersion(table, { version: 3, rows: [...layer.values()] }))
    // Its data files are not the tagged snapshot's: the caller may remove them.
    expect(again).toEqual({ _tag: "AlreadyTagged", tag: "v3", holdsFiles: false })
    expect((await run(readCurrent(table))).version).toBe(1)
    // The manifest the second run staged for the version is gone again.
    expect(metadataFiles()).toEqual(before)
  })

  it("historic versions get snapshots off main: parent the nearest older version, main stays", async () => {
    const dest = await run(destination(tempDir()))
    const table = tableAt(dest, "demo/places")
    const states = new Map<number, Layer>([[0, initialLayer(200)]])
    for (let v = 1; v <= 6; v++) states.set(v, nextVersion(states.get(v - 1)!, v, 5, 3).layer)
    const exported = new Map<number, Layer>()
    const exportFull = async (v: number) => {
      await run(exportVersion(table, { version: v, rows: [...states.get(v)!.values()] }))
      exported.set(v, states.get(v)!)
    }
    await exportFull(2)
    await exportFull(6)
    // Backfill: 4 as changes from 2 (the nearest older), 0 as a full export (nothing older).
    const metadata = await metadataOf(table)
    expect(nearestOlder(metadata, 4)?.version).toBe(2)
    const changes = nextVersion(states.get(3)!, 4, 5, 3)
    const deleted = new Set([...states.get(2)!.keys()].filter((id) => !states.get(4)!.has(id)))
    const rows4 = [...states.get(4)!.values()].filter((r) =>
      states.get(2)!.get(r.partition)?.partitionVersion !== r.partitionVersion
    )
    expect(changes.layer.size).toBe(states.get(4)!.size)
    await run(exportVersion(table, { version: 4, mode: "changes", baseVersion: 2, rows: rows4, deleted }))
    exported.set(4, states.get(4)!)
    await exportFull(0)
    await expectTags(table, exported)
    const after = await metadataOf(table)
    expect(mainVersion(after)).toBe(6)
    expect(snapshotOfVersion(after, 4)!["parent-snapshot-id"]).toBe(snapshotOfVersion(after, 2)!["snapshot-id"])
    expect(snapshotOfVersion(after, 0)!["parent-snapshot-id"]).toBeUndefined()
    expect(snapshotOfVersion(after, 6)!["parent-snapshot-id"]).toBe(snapshotOfVersion(after, 2)!["snapshot-id"])
  })

  it("expiry removes the tags below the minimum and the files only they used; every live tag reads as before", async () => {
    const { states, table } = await fiveChanges()
    const before = await metadataOf(table)
    const filesBefore = filesOf(table)
    const dry = await run(expireSnapshots(table, { minVersion: 3, dryRun: true }))
    expect([...dry.tags].sort()).toEqual(["v0", "v1", "v2"])
    expect(dry.files.length).toBeGreaterThan(0)
    expect(filesOf(table)).toEqual(filesBefore)
    expect(await metadataOf(table)).toEqual(before)

    const expired = await run(expireSnapshots(table, { minVersion: 3 }))
    expect([...expired.tags].sort()).toEqual(["v0", "v1", "v2"])
    expect(new Set(expired.files)).toEqual(new Set(dry.files))
    for (const v of [0, 1, 2]) states.delete(v)
    await expectTags(table, states)
    // Exactly the files live snapshots reference remain (besides metadata files and the hint).
    const after = await metadataOf(table)
    const referenced = new Set<string>()
    for (const s of after.snapshots!) for (const f of await referencedBy(after, s["snapshot-id"])) referenced.add(f)
    const remaining = [...filesOf(table)].filter((f) =>
      !/\/metadata\/(v\d+\.metadata\.json|version-hint\.text)$/.test(f)
    )
    expect(new Set(remaining)).toEqual(referenced)
    for (const f of expired.files) expect(filesBefore.has(f)).toBe(true)
    // Nothing more to do the second time.
    const again = await run(expireSnapshots(table, { minVersion: 3 }))
    expect(again).toMatchObject({ tags: [], snapshots: [], files: [], committed: undefined })
  })

  it("compaction rewrites mostly deleted files and folds the delete files; every tag reads the same rows", async () => {
    const { states, table } = await fiveChanges()
    const before = await metadataOf(table)
    const main = currentSnapshot(before)!
    expect(Number(main.summary["total-delete-files"])).toBe(5)
    expect(compactionDue(before)).toBe(true)
    expect(compactionDue(before, { deleteFiles: 6, deletedShare: 0.9 })).toBe(false)
    const compacted = await run(compact(table, { minDeletedRatio: 0.05, createdBy: "test" }))
    expect(compacted.rewritten.length).toBeGreaterThan(0)
    expect(compacted.deleteFilesBefore).toBe(5)
    expect(compacted.deleteFilesAfter).toBeLessThanOrEqual(1)
    const after = await metadataOf(table)
    const now = currentSnapshot(after)!
    expect(now.summary.operation).toBe("replace")
    expect(now["parent-snapshot-id"]).toBe(main["snapshot-id"])
    expect(snapshotOfVersion(after, 5)!["snapshot-id"]).toBe(now["snapshot-id"])
    expect(Number(now.summary["total-delete-files"])).toBe(compacted.deleteFilesAfter)
    expect(compactionDue(after)).toBe(false)
    expect(Number(now.summary["total-records"]) - Number(now.summary["total-position-deletes"])).toBe(
      states.get(5)!.size
    )
    await expectTags(table, states)
    // Expiring below 5 leaves the compacted snapshot alone: the rewritten files' old versions go.
    await run(expireSnapshots(table, { minVersion: 5 }))
    states.forEach((_, v) => v < 5 && states.delete(v))
    await expectTags(table, states)
    // Nothing left worth compacting.
    expect((await run(compact(table, { minDeletedRatio: 0.05, createdBy: "test" }))).committed).toBeUndefined()
  })

  it("a volatile layer commits one snapshot per run, tagged by time, main on the newest", async () => {
    const dest = await run(destination(tempDir()))
    const table = tableAt(dest, "demo/live")
    const first = initialLayer(40)
    const second = nextVersion(first, 1, 3, 5).layer
    const a = await run(exportVersion(table, { version: undefined, rows: [...first.values()] }))
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const b = await run(exportVersion(table, { version: undefined, rows: [...second.values()] }))
    if (a._tag !== "Committed" || b._tag !== "Committed") throw new Error("expected two commits")
    expect(a.tag).toMatch(/^snapshot-\d{8}T\d{6}Z$/)
    expect(await read(table.uri, a.tag)).toEqual(expectedRows(first.values()))
    expect(await read(table.uri, b.tag)).toEqual(expectedRows(second.values()))
    expect(await read(table.uri, "main")).toEqual(expectedRows(second.values()))
  })
})
