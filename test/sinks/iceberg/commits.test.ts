/**
 * Commits two writers cannot break: two writers committing to one table at once (a local directory,
 * the test's S3 server with conditional PUTs, gs:// through it, az:// on Azurite), and a commit stopped after each of its writes
 * followed by a run again. The table is read back by icebird after each: every tag reads its
 * version's rows, every file a snapshot references exists.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { exitCodeOf } from "../../../src/cli/Exit.ts"
import { type Destination, destination } from "../../../src/sinks/Destination.ts"
import { readCurrent } from "../../../src/sinks/iceberg/Commit.ts"
import { tableAt, type TableLocation } from "../../../src/sinks/iceberg/Location.ts"
import { commitVersion, loadTable, schemaFor, taggedVersions } from "../../../src/sinks/iceberg/Table.ts"
import { startAzurite, type TestAzure } from "../../support/azurite.ts"
import { ACCESS_KEY, restoreEnvironmentAfterAll, SECRET_KEY, startStore, type TestStore } from "../../support/s3.ts"
import {
  expectedRows,
  exportVersion,
  IDENTITY,
  initialLayer,
  type Layer,
  metadataOf,
  nextVersion,
  raw,
  run,
  tablesTest,
  writeDataFiles
} from "./support.ts"

restoreEnvironmentAfterAll()
let store: TestStore
/** The S3-protocol server behind gs:// (GCS's XML API, the endpoint overridden). */
let gcsStore: TestStore
let azure: TestAzure
beforeAll(async () => {
  ;[store, gcsStore, azure] = await Promise.all([startStore(), startStore("gcs-tables"), startAzurite("tables")])
  // icebird reads the table's blobs without credentials.
  await azure.client.setAccessPolicy("container")
  // The library's clients read the standard environment: AWS's for s3://, GCS's HMAC key for gs://, Azure's for az://.
  Object.assign(process.env, store.env, azure.env, {
    GCS_ENDPOINT_URL: gcsStore.endpoint,
    GCS_HMAC_KEY_ID: ACCESS_KEY,
    GCS_HMAC_SECRET: SECRET_KEY
  })
})
afterAll(async () => {
  await Promise.all([store?.close(), gcsStore?.close(), azure?.close()])
})

/** Where the test reads a file a table references: its emulator's HTTP URL. */
const routeOf = (uri: string): string | undefined => {
  const s3 = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri)
  if (s3 !== null) return `https://${s3[1]}.s3.amazonaws.com/${s3[2]}`
  const gs = /^gs:\/\/([^/]+)\/(.*)$/.exec(uri)
  if (gs !== null) return `${gcsStore.endpoint}/${gs[1]}/${gs[2]}`
  const abfss = /^abfss:\/\/([^@]+)@[^/]+\/(.*)$/.exec(uri)
  if (abfss !== null) return `${azure.endpoint}/${abfss[1]}/${abfss[2]}`
  return undefined
}
const { read, tempDir } = tablesTest(
  "iceberg-commits-",
  () => store,
  (uri) => uri.startsWith("s3://") ? undefined : routeOf(uri)
)

const expectTags = async (table: TableLocation, states: ReadonlyMap<number, Layer>) => {
  for (const [version, layer] of states) {
    expect(await read(table.uri, `v${version}`), `tag v${version}`).toEqual(expectedRows(layer.values()))
  }
}

/** Every file each snapshot of the table references exists (enumerated by icebird, fetched through it). */
const expectNothingMissing = async (table: TableLocation) => {
  const { icebergManifests } = await import("icebird")
  const metadata = await metadataOf(table)
  for (const snapshot of metadata.snapshots ?? []) {
    const manifests = await icebergManifests({ ...metadata, "current-snapshot-id": snapshot["snapshot-id"] } as never)
    const files = manifests.flatMap((m) => m.entries.filter((e) => e.status !== 2).map((e) => e.data_file.file_path))
    for (const uri of files) {
      const at = routeOf(uri) ?? uri
      expect((await fetch(at)).ok, uri).toBe(true)
    }
  }
}

/**
 * A destination whose next two exclusive creates, once armed, wait for each other: two writers that
 * read the table and proposed their change, racing for one metadata file. `creates` counts them.
 */
const racing = (dest: Destination) => {
  let armed = false
  let waiting: (() => void) | undefined
  const barrier = () =>
    new Promise<void>((resolve) => {
      if (!armed) return resolve()
      if (waiting === undefined) {
        waiting = resolve
        // Only as a guard against a hang: the other writer gets there long before.
        setTimeout(resolve, 30_000)
        return
      }
      armed = false
      waiting()
      waiting = undefined
      resolve()
    })
  const raced = {
    creates: 0,
    arm: () => {
      armed = true
    },
    dest: {
      ...dest,
      create: (key: string, content: string | Uint8Array) =>
        Effect.flatMap(Effect.promise(barrier), () => {
          raced.creates++
          return dest.create(key, content)
        })
    } satisfies Destination
  }
  return raced
}

/** Versions 0 (full) and 1 (changes) of a layer in a new table at `dest`. */
const twoVersions = async (dest: Destination) => {
  const table = tableAt(dest, "demo/places")
  const states = new Map<number, Layer>([[0, initialLayer(150)]])
  await run(exportVersion(table, { version: 0, rows: [...states.get(0)!.values()] }))
  const v1 = nextVersion(states.get(0)!, 1, 6, 4)
  states.set(1, v1.layer)
  await run(exportVersion(table, {
    version: 1,
    mode: "changes",
    baseVersion: 0,
    rows: v1.changed.map((id) => v1.layer.get(id)!),
    deleted: new Set(v1.deleted)
  }))
  return { table, states }
}

const twoWriters = async (dest: Destination) => {
  const { states, table } = await twoVersions(dest)
  const racer = racing(dest)
  const raced = tableAt(racer.dest, table.key)
  racer.arm()
  const { version: before } = await run(readCurrent(table))
  const v2 = nextVersion(states.get(1)!, 2, 6, 4)
  const v5 = nextVersion(v2.layer, 5, 4, 9).layer
  // One writer commits the changes of version 2, the other a full export of version 5, at once.
  const [a, b] = await Promise.all([
    run(exportVersion(raced, {
      version: 2,
      mode: "changes",
      baseVersion: 1,
      rows: v2.changed.map((id) => v2.layer.get(id)!),
      deleted: new Set(v2.deleted),
      commit: { backoff: "10 millis" }
    })),
    run(exportVersion(raced, { version: 5, rows: [...v5.values()], commit: { backoff: "10 millis" } }))
  ])
  expect([a._tag, b._tag]).toEqual(["Committed", "Committed"])
  states.set(2, v2.layer)
  states.set(5, v5)
  // Both committed, one on top of the other: the loser of the race for the next metadata file tried
  // again; two new metadata files, the later one logging the earlier.
  expect(racer.creates).toBe(3)
  const after = await run(readCurrent(table))
  expect(after.version).toBe(before + 2)
  expect(after.metadata!["metadata-log"]!.at(-1)!["metadata-file"]).toBe(
    `${table.uri}/metadata/v${before + 1}.metadata.json`
  )
  await expectTags(table, states)
  await expectNothingMissing(table)

  // Two writers exporting the same version: one commits it, the other finds it tagged.
  const v6 = nextVersion(v5, 6, 5, 2).layer
  racer.arm()
  const same = await Promise.all(
    [0, 1].map(() =>
      run(exportVersion(raced, { version: 6, rows: [...v6.values()], commit: { backoff: "10 millis" } }))
    )
  )
  expect(same.map((r) => r._tag).sort()).toEqual(["AlreadyTagged", "Committed"])
  expect(same.find((r) => r._tag === "AlreadyTagged")).toMatchObject({ holdsFiles: false })
  states.set(6, v6)
  await expectTags(table, states)
}

describe("Iceberg commits", () => {
  it("two writers committing to one local table at once: both land, one on top of the other", async () => {
    await twoWriters(await run(destination(tempDir())))
  })

  it("two writers committing to one table on S3 at once (conditional PUT): both land", async () => {
    await twoWriters(await run(destination(`s3://${store.bucket}/race-${Date.now()}`)))
  })

  it("two writers committing to one table on az:// at once (Put Blob with If-None-Match: *): both land", async () => {
    await twoWriters(await run(destination(`az://${azure.container}/race-${Date.now()}`)))
  })

  it("two writers committing to one table on gs:// at once (x-goog-if-generation-match: 0): both land", async () => {
    await twoWriters(await run(destination(`gs://${gcsStore.bucket}/race-${Date.now()}`)))
  })

  it("an exclusive create on az:// and gs:// takes a new key once, and leaves an existing one as it was", async () => {
    for (
      const spec of [`az://${azure.container}/create-${Date.now()}`, `gs://${gcsStore.bucket}/create-${Date.now()}`]
    ) {
      const dest = await run(destination(spec))
      const created = await Promise.all(["first", "second", "third"].map((text) => run(dest.create("v1.json", text))))
      expect(created.filter((c) => c).length, spec).toBe(1)
      const kept = await run(dest.read("v1.json"))
      expect(["first", "second", "third"], spec).toContain(Option.getOrThrow(kept))
      expect(await run(dest.create("v1.json", "later")), spec).toBe(false)
      expect(await run(dest.read("v1.json")), spec).toEqual(kept)
    }
  })

  it("a writer that keeps losing gives up with an error naming the table", async () => {
    const dest = await run(destination(tempDir()))
    const table = tableAt(dest, "demo/places")
    await run(exportVersion(table, { version: 0, rows: [...initialLayer(20).values()] }))
    const current = await run(loadTable(table, IDENTITY))
    const schema = await run(schemaFor(table, current, raw))
    const files = await run(writeDataFiles(table, schema, [...initialLayer(10).values()], "lost"))
    // Every exclusive create finds the metadata file there (as if others always committed first).
    const losing = tableAt({ ...dest, create: () => Effect.succeed(false) }, table.key)
    const error = await Effect.runPromise(Effect.flip(commitVersion(losing, {
      identity: IDENTITY,
      version: 1,
      mode: "full",
      schema,
      files,
      createdBy: "test",
      commit: { attempts: 3, backoff: "1 millis" }
    })))
    expect(error).toMatchObject({ _tag: "IcebergError", reason: "Conflict", table: table.uri })
    expect(exitCodeOf(error)).toBe(5)
    expect(error.message).toContain(table.uri)
    expect(error.message).toContain("run the same command again")
    expect((await run(readCurrent(table))).version).toBe(1)
  })

  it("a create the store took but whose answer was lost (its retry told 'exists') is the writer's own commit", async () => {
    const dest = await run(destination(tempDir()))
    const layer = initialLayer(25)
    const forgetful = tableAt(
      { ...dest, create: (key, content) => Effect.as(dest.create(key, content), false) },
      "demo/places"
    )
    const result = await run(exportVersion(forgetful, { version: 0, rows: [...layer.values()] }))
    expect(result._tag).toBe("Committed")
    const table = tableAt(dest, "demo/places")
    expect((await run(readCurrent(table))).version).toBe(1)
    expect(await read(table.uri, "v0")).toEqual(expectedRows(layer.values()))
    await expectNothingMissing(table)
  })

  it("a table missing a file it references is reported as damaged (exit 6), naming the file", async () => {
    const out = tempDir()
    const table = tableAt(await run(destination(out)), "demo/places")
    const layer = initialLayer(30)
    await run(exportVersion(table, { version: 0, rows: [...layer.values()] }))
    const list = (await metadataOf(table)).snapshots![0]!["manifest-list"]
    fs.rmSync(list.slice("file://".length))
    const error = await Effect.runPromise(Effect.flip(exportVersion(table, {
      version: 1,
      mode: "changes",
      baseVersion: 0,
      rows: [...layer.values()].slice(0, 3)
    })))
    expect(error).toMatchObject({ _tag: "IcebergError", reason: "Corrupt" })
    expect((error as { message: string }).message).toContain(`references ${list}, which does not exist`)
    expect(exitCodeOf(error)).toBe(6)
  })

  it("a commit stopped after each of its writes leaves the table readable at its last commit; running again completes it", async () => {
    let completed = false
    for (let allowed = 0; !completed; allowed++) {
      expect(allowed).toBeLessThan(20)
      const out = tempDir()
      const dest = await run(destination(out))
      const { states, table } = await twoVersions(dest)
      const v2 = nextVersion(states.get(1)!, 2, 6, 4)
      const rows = v2.changed.map((id) => v2.layer.get(id)!)
      const deleted = new Set(v2.deleted)
      const current = await run(loadTable(table, IDENTITY))
      const schema = await run(schemaFor(table, current, raw))
      const files = await run(writeDataFiles(table, schema, rows, "v2"))
      // The process stops after `allowed` writes (of files, the metadata file, the hint, removals).
      let writes = 0
      const stop = <A, E>(effect: Effect.Effect<A, E>) =>
        writes++ < allowed ? effect : Effect.dieMessage(`stopped after ${allowed} writes`)
      const stopping: Destination = {
        ...dest,
        write: (key, content) => stop(dest.write(key, content)),
        create: (key, content) => stop(dest.create(key, content)),
        remove: (keys) => stop(dest.remove(keys))
      }
      const options = {
        identity: IDENTITY,
        version: 2,
        mode: "changes" as const,
        baseVersion: 1,
        deleted,
        schema,
        files,
        createdBy: "test"
      }
      const first = await Effect.runPromise(Effect.exit(commitVersion(tableAt(stopping, table.key), options)))
      completed = first._tag === "Success"
      // Readable at its last commit, nothing it references missing. (A reader that follows the
      // version hint, like icebird, sees the commit before when the process stopped ahead of the hint.)
      const metadataDir = path.join(out, "demo/places/metadata")
      const hinted = JSON.parse(
        fs.readFileSync(
          path.join(
            metadataDir,
            `v${fs.readFileSync(path.join(metadataDir, "version-hint.text"), "utf8")}.metadata.json`
          ),
          "utf8"
        )
      )
      const visible = taggedVersions(hinted).map((t) => t.version)
      await expectTags(table, new Map([...states, ...(visible.includes(2) ? [[2, v2.layer] as const] : [])]))
      await expectNothingMissing(table)
      const tagged = taggedVersions(await metadataOf(table)).map((t) => t.version)
      // Running the commit again completes the work.
      const again = await run(commitVersion(table, options))
      if (tagged.includes(2)) expect(again).toEqual({ _tag: "AlreadyTagged", tag: "v2", holdsFiles: true })
      else expect(again._tag).toBe("Committed")
      await expectTags(table, new Map([...states, [2, v2.layer]]))
      await expectNothingMissing(table)
      expect(fs.readFileSync(path.join(out, "demo/places/metadata/version-hint.text"), "utf8")).toBe(
        String((await run(readCurrent(table))).version)
      )
    }
  })
})
