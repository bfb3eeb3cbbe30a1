/**
 * Exports into S3 (and Google Cloud Storage's S3-compatible XML API, gs://): a real S3-protocol
 * server (s3rver, file-backed) on loopback, the real CLI with the standard AWS environment (for
 * gs://, GCS's: the endpoint overridden to the test server, HMAC keys). Everything written is read
 * back from the bucket and checked by DuckDB against what the service holds.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as path from "node:path"
import { Encoder } from "../../src/encoder/Encoder.ts"
import * as RollingWriter from "../../src/encoder/RollingWriter.ts"
import { RowBatchBuilder } from "../../src/sinks/RowBatch.ts"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import { ACCESS_KEY, restoreEnvironmentAfterAll, SECRET_KEY, startStore, type TestStore } from "../support/s3.ts"
import { type Context, expectRefused, exportsToStore, startExportService, type StoreUnderTest } from "./objectStores.ts"

restoreEnvironmentAfterAll()
let store: TestStore
/** The S3-protocol server behind gs:// (a bucket of its own). */
let gcsStore: TestStore
let service: Awaited<ReturnType<typeof startExportService>>

beforeAll(async () => {
  ;[service, store, gcsStore] = await Promise.all([startExportService(), startStore(), startStore("gcs-exports")])
})
afterAll(async () => {
  await store?.close()
  await gcsStore?.close()
  await service?.close()
})

const underTest = (
  scheme: "s3" | "gs",
  store: () => TestStore,
  env: () => Record<string, string>
): StoreUnderTest => ({
  out: (prefix) => `${scheme}://${store().bucket}/${prefix}`,
  get env() {
    return env()
  },
  keys: (prefix) => store().keys(prefix),
  download: (prefix) => store().download(prefix),
  pending: async (prefix = "") => store().openUploads().map((u) => u.key).filter((key) => key.startsWith(prefix)),
  keepsStaged: false
})

const s3: StoreUnderTest = underTest("s3", () => store, () => store.env)
const s3Context = (): Context => ({ ...service, store: s3 })

/** GCS as DuckDB reaches it, the endpoint overridden; no AWS variable set, so the GCS ones must do. */
const gcsEnv = () => ({
  AWS_ACCESS_KEY_ID: "",
  AWS_SECRET_ACCESS_KEY: "",
  AWS_REGION: "",
  AWS_ENDPOINT_URL_S3: "",
  AWS_CONFIG_FILE: gcsStore.env.AWS_CONFIG_FILE!,
  AWS_SHARED_CREDENTIALS_FILE: gcsStore.env.AWS_SHARED_CREDENTIALS_FILE!,
  GCS_ENDPOINT_URL: gcsStore.endpoint,
  GCS_HMAC_KEY_ID: ACCESS_KEY,
  GCS_HMAC_SECRET: SECRET_KEY
})
const gcs: StoreUnderTest = underTest("gs", () => gcsStore, gcsEnv)
const gcsContext = (): Context => ({ ...service, store: gcs })

describe("export to s3://bucket/prefix", () => {
  exportsToStore(s3Context, { bigFile: true, shards: false })
})

describe("export to gs://bucket/prefix (GCS's XML API)", () => {
  exportsToStore(gcsContext, { bigFile: true, shards: true })
})

describe("bad output locations", () => {
  const cases: ReadonlyArray<
    {
      name: string
      out: string
      env?: Record<string, string>
      gcs?: boolean
      deny?: boolean
      code: number
      says: RegExp
    }
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
      out: "hdfs://namenode/x",
      code: 2,
      says:
        /hdfs:\/\/.*give a local directory or s3:\/\/bucket\/prefix, gs:\/\/bucket\/prefix, az:\/\/container\/prefix/
    },
    { name: "no valid s3 URL", out: "s3://UPPER_case/x", code: 2, says: /is not a valid s3:\/\/bucket\/prefix URL/ },
    {
      name: "gs://, an unknown bucket",
      out: "gs://no-such-bucket/x",
      gcs: true,
      code: 2,
      says:
        /gs:\/\/no-such-bucket.*does not exist \(NoSuchBucket\)\. Check the bucket name in --out \(and GCS_ENDPOINT_URL/
    },
    {
      name: "gs://, a wrong HMAC key",
      out: "gs://gcs-exports/denied",
      gcs: true,
      env: { GCS_HMAC_KEY_ID: "GOOG1EUNKNOWN", GCS_HMAC_SECRET: "not-the-secret" },
      code: 3,
      says: /refused the credentials or the permission \(InvalidAccessKeyId.*Check GCS_HMAC_KEY_ID\/GCS_HMAC_SECRET/
    },
    {
      name: "gs://, half an HMAC key",
      out: "gs://gcs-exports/denied",
      gcs: true,
      env: { GCS_HMAC_KEY_ID: "GOOG1EKEY", GCS_HMAC_SECRET: "" },
      code: 2,
      says: /GCS_HMAC_KEY_ID is set without GCS_HMAC_SECRET/
    }
  ]
  it.each(cases)(
    "$name: one sentence, exit $code, nothing in the bucket",
    async ({ out, env, gcs, deny, code, says }) => {
      store.deny = (method) => deny === true && (method === "PUT" || method === "POST")
      try {
        await expectRefused(gcs === true ? gcsContext() : s3Context(), out, { code, says, ...(env ? { env } : {}) }, [
          "not-the-secret"
        ])
      } finally {
        store.deny = () => false
      }
    }
  )
})

describe("the file writers on a store", () => {
  it.live.each(
    [["s3", "inline", Encoder.inline], ["s3", "thread", Encoder.thread], ["gs", "thread", Encoder.thread]] as const
  )(
    "stream a file of several parts to %s:// with the %s encoder",
    ([scheme, name, encoder]) =>
      Effect.gen(function*() {
        const target = scheme === "gs" ? gcsStore : store
        Object.assign(process.env, scheme === "gs" ? gcsEnv() : store.env)
        const rows = 1200
        const blob = new Uint8Array(8 * 1024).fill(7)
        const files = yield* Effect.scoped(Effect.gen(function*() {
          const writer = yield* RollingWriter.make({
            dir: `${scheme}://${target.bucket}/writers/${name}`,
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
        const local = yield* Effect.promise(() => target.download(`writers/${name}`))
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
        expect(target.openUploads()).toEqual([])
      })
  )
})
