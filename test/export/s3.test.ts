/**
 * Exports into an object store: a real S3-protocol server (s3rver, file-backed) on loopback, the
 * real CLI with the standard AWS environment. Everything written is read back from the bucket and
 * checked by DuckDB against what the service holds.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { RowBatchBuilder } from "../../src/sinks/RowBatch.ts"
import { expectMatchesService, serviceState } from "../reliability/support.ts"
import { cli, failureLines } from "../support/cli.ts"
import { literal, query, readParquet, withDuckDB } from "../support/duckdb.ts"
import { readJson } from "../support/files.ts"
import { startStore, type TestStore } from "../support/s3.ts"
import { DEMO, startService, type TestService } from "../support/service.ts"

const PARTITIONS = 600

let svc: TestService
let store: TestStore
let credentials: string
let expected: Awaited<ReturnType<typeof serviceState>>

beforeAll(async () => {
  ;[svc, store] = await Promise.all([
    startService({ seed: { partitions: PARTITIONS, versions: 2, blobBytes: 256 } }),
    startStore()
  ])
  credentials = await svc.credentialsFile()
  expected = await serviceState(svc, "places", 0)
})
afterAll(async () => {
  await store?.close()
  await svc?.close()
})

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  cli([...args, "--lookup-url", svc.lookupUrl, "--credentials", credentials, "--quiet"], {
    env: { ...store.env, ...env }
  })

const exportArgs = (
  out: string,
  extra: ReadonlyArray<string> = []
) => ["export", "--catalog", DEMO, "--layer", "places", "--version", "0", "--out", out, "--parts", "3", ...extra]

/** The export's rows, read by DuckDB from a download of the bucket. */
const rowsIn = async (prefix: string) =>
  readParquet(path.join(await store.download(prefix), "demo", "places", "version=0"))

/** What a committed export leaves in the bucket: its data files, its manifest, the cursor, the run reports; nothing half-done. */
const expectCommitted = async (prefix: string) => {
  const keys = await store.keys(`${prefix}/`)
  const local = await store.download(prefix)
  const manifest = readJson(path.join(local, "demo", "places", "version=0", "_manifest.json"))
  expect(readJson(path.join(local, "_run.json"))).toMatchObject({
    job: "export",
    exitCode: 0,
    partitions: manifest.partitions
  })
  // One report per run (_runs/<UTC start>-<job>.json), the newest also as _run.json.
  const reports = keys.filter((k) => k.startsWith(`${prefix}/_runs/`)).sort()
  expect(reports.length).toBeGreaterThan(0)
  for (const k of reports) expect(k).toMatch(/\/_runs\/\d{8}T\d{6}\.\d{3}Z-export\.json$/)
  expect(readJson(path.join(local, reports.at(-1)!.slice(prefix.length + 1)))).toEqual(
    readJson(path.join(local, "_run.json"))
  )
  expect(keys.filter((k) => !reports.includes(k))).toEqual([
    `${prefix}/_run.json`,
    `${prefix}/demo/places/_state.json`,
    ...[
      ...manifest.files.map((f: { path: string }) => `${prefix}/demo/places/version=0/${f.path}`),
      `${prefix}/demo/places/version=0/_manifest.json`
    ].sort()
  ].sort())
  expect(store.openUploads()).toEqual([])
  return manifest
}

describe("export to s3://bucket/prefix", () => {
  it("writes the files, the manifest and the cursor into the bucket; a re-run does nothing", async () => {
    const out = `s3://${store.bucket}/nightly`
    const first = await run(exportArgs(out))
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toMatch(/-> s3:\/\/exports\/nightly\/demo\/places\/version=0$/m)
    expectMatchesService(await rowsIn("nightly"), expected)
    const manifest = await expectCommitted("nightly")
    expect(manifest).toMatchObject({
      catalogHrn: DEMO,
      layerId: "places",
      version: 0,
      partitions: PARTITIONS,
      mode: "full"
    })

    const again = await run(exportArgs(out))
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toMatch(/^Already exported .*nothing to do/m)
    expect(await expectCommitted("nightly")).toEqual(manifest)
  })

  it("streams a large file up as a multipart upload; a run killed mid-upload leaves nothing visible, and the next one aborts it and completes", async () => {
    // One part, no compression: a file of ~1.2 MB per 600 rows is not enough for an 8 MiB part, so the blobs are big here.
    const big = await startService({ seed: { partitions: 2000, versions: 1, blobBytes: 16 * 1024 } })
    try {
      const bigCredentials = await big.credentialsFile()
      const out = `s3://${store.bucket}/big`
      const args = [
        "export",
        "--catalog",
        DEMO,
        "--layer",
        "places",
        "--version",
        "0",
        "--out",
        out,
        "--parts",
        "1",
        "--compression",
        "none",
        "--lookup-url",
        big.lookupUrl,
        "--credentials",
        bigCredentials,
        "--quiet"
      ]
      // Killed once the first 8 MiB part of its 32 MB file is on its way.
      let child: ChildProcess | undefined
      const watch = setInterval(() => {
        if (store.openUploads().length > 0) child?.kill("SIGKILL")
      }, 10)
      const killed = await cli(args, { env: store.env, onSpawn: (c) => (child = c) }).finally(() =>
        clearInterval(watch)
      )
      expect(killed.signal).toBe("SIGKILL")
      expect(store.openUploads().length).toBeGreaterThan(0)
      expect((await store.keys("big/")).filter((k) => /\.(parquet|arrow)$/.test(k) || k.endsWith("_manifest.json")))
        .toEqual([])

      const rerun = await cli(args, { env: store.env })
      expect(rerun.code, rerun.stderr).toBe(0)
      expect(store.openUploads()).toEqual([])
      const dir = path.join(await store.download("big"), "demo", "places", "version=0")
      const manifest = readJson(path.join(dir, "_manifest.json"))
      expect(manifest.files).toHaveLength(1)
      expect(manifest.files[0].bytes).toBeGreaterThan(8 * 1024 * 1024)
      expectMatchesService(await readParquet(dir), await serviceState(big, "places", 0))
    } finally {
      await big.close()
    }
  })

  it("resumes after a kill from the checkpoints in the bucket", async () => {
    const out = `s3://${store.bucket}/resumed`
    const killed = await run(exportArgs(out), { CATALOG_EXPORT_CRASH_AT: "checkpoint:2" })
    expect(killed.signal).toBe("SIGKILL")
    expect((await store.keys("resumed/")).filter((k) => /\/_parts\/part-\d\.json$/.test(k))).toHaveLength(2)
    const rerun = await run(exportArgs(out, ["--json"]))
    expect(rerun.code, rerun.stderr).toBe(0)
    expectMatchesService(await rowsIn("resumed"), expected)
    await expectCommitted("resumed")
  })

  it("is what retention's export guard reads: manifests in the bucket prove versions exported", async () => {
    const guarded = (location: string) =>
      run([
        "retention",
        "--catalog",
        DEMO,
        "--minimum",
        "1",
        "--require-exported",
        location,
        "--layer",
        "places",
        "--dry-run"
      ])
    const proven = await guarded(`s3://${store.bucket}/nightly`)
    expect(proven.code, proven.stderr).toBe(0)
    expect(proven.stdout).toMatch(/Raising the minimum version to 1 deletes versions 0\.\.0/)
    const empty = await guarded(`s3://${store.bucket}/elsewhere`)
    expect(empty.code).toBe(2)
    expect(failureLines(empty)[0]).toMatch(
      /version 0 of layer 'places' has no committed export in s3:\/\/exports\/elsewhere/
    )
  })
})

describe("bad output locations", () => {
  const cases: ReadonlyArray<
    { name: string; out: string; env?: Record<string, string>; deny?: boolean; code: number; says: RegExp }
  > = [
    {
      name: "an unknown bucket",
      out: "s3://no-such-bucket/x",
      code: 2,
      says: /s3:\/\/no-such-bucket.*does not exist \(NoSuchBucket\)/
    },
    // s3rver checks the access key id, not SigV4 signatures: an unknown key stands for wrong credentials.
    {
      name: "wrong credentials",
      out: `s3://exports/denied`,
      env: { AWS_ACCESS_KEY_ID: "AKIAUNKNOWN", AWS_SECRET_ACCESS_KEY: "not-the-secret" },
      code: 3,
      says: /refused the credentials or the permission \(InvalidAccessKeyId/
    },
    {
      name: "no permission to write",
      out: `s3://exports/denied`,
      deny: true,
      code: 3,
      says: /s3:\/\/exports\/denied\/demo\/places\/version=0\/_plan\.json: the store refused .*AccessDenied/
    },
    {
      name: "a scheme this version cannot write",
      out: "gs://bucket/x",
      code: 2,
      says: /gs:\/\/.*give a local directory or an s3:\/\/bucket\/prefix URL/
    },
    { name: "no valid s3 URL", out: "s3://UPPER_case/x", code: 2, says: /is not a valid s3:\/\/bucket\/prefix URL/ }
  ]
  it.each(cases)("$name: one sentence, exit $code, nothing in the bucket", async ({ out, env, deny, code, says }) => {
    const before = await store.keys()
    store.deny = (method) => deny === true && (method === "PUT" || method === "POST")
    try {
      const result = await run(exportArgs(out), env)
      expect(result.code, result.stderr).toBe(code)
      const lines = failureLines(result)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(says)
      expect(result.stderr).not.toContain("not-the-secret")
    } finally {
      store.deny = () => false
    }
    expect(await store.keys()).toEqual(before)
    expect(store.openUploads()).toEqual([])
  })
})

describe("the file writers on a store", () => {
  it.live.each([["inline", Encoder.inline], ["thread", Encoder.thread]] as const)(
    "stream a file of several parts with the %s encoder",
    ([name, encoder]) =>
      Effect.gen(function*() {
        Object.assign(process.env, store.env)
        const rows = 1200
        const blob = new Uint8Array(8 * 1024).fill(7)
        const files = yield* Effect.scoped(Effect.gen(function*() {
          const writer = yield* RollingWriter.make({
            dir: `s3://${store.bucket}/writers/${name}`,
            format: "parquet",
            compression: "none",
            metadata: {},
            rowGroupBytes: 1024 * 1024
          })
          for (let start = 0; start < rows; start += 100) {
            const batch = new RowBatchBuilder(1024 * 1024)
            for (let i = start; i < start + 100; i++) batch.add(`p${i}`, 1, `h${i}`, blob.byteLength, null, blob)
            yield* writer.write(batch.take())
          }
          return yield* writer.finish
        })).pipe(Effect.provide(Layer.fresh(encoder)))
        expect(files).toHaveLength(1)
        expect(files[0]!.bytes).toBeGreaterThan(8 * 1024 * 1024)
        const local = yield* Effect.promise(() => store.download(`writers/${name}`))
        const read = yield* Effect.promise(() =>
          withDuckDB((c) =>
            query(
              c,
              `SELECT count(*) AS n, count(DISTINCT partition) AS ids, min(octet_length(data)) AS size FROM read_parquet(${
                literal(path.join(local, files[0]!.path))
              })`
            )
          )
        )
        expect(read).toEqual([{ n: BigInt(rows), ids: BigInt(rows), size: BigInt(blob.byteLength) }])
        expect(store.openUploads()).toEqual([])
      })
  )
})
