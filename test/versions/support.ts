import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { expect } from "vitest"
import { literal, query, withDuckDB } from "../support/duckdb.ts"
import type { TestService } from "../support/service.ts"

export const DEMO = "hrn:local:data:::demo"
export const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const BIN = path.join(ROOT, "src", "cli", "bin.mjs")

export const sha1 = (bytes: Uint8Array | string) => createHash("sha1").update(bytes).digest("hex")

export interface ListedPartition {
  readonly partition: string
  readonly version: number
  readonly dataHandle: string
  readonly checksum?: string
  readonly dataSize?: number
}

const json = async <A>(res: Response): Promise<A> => {
  const text = await res.text()
  if (res.status >= 300) throw new Error(`${res.url}: ${res.status} ${text}`)
  return JSON.parse(text) as A
}

export const latestVersion = async (svc: TestService) =>
  (await json<{ version: number }>(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`))).version

export const minimumVersion = async (svc: TestService) =>
  (await json<{ version: number }>(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/minimum`))).version

export const setMinimum = (svc: TestService, version: number) =>
  svc.get(`/metadata/v1/catalogs/${DEMO}/versions/minimum`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ version })
  })

/** The service's own listing of a layer at a version (all of it, with checksum and size). */
export const listing = async (svc: TestService, layer: string, version?: number): Promise<Array<ListedPartition>> => {
  const v = version === undefined ? "" : `version=${version}&`
  const res = await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?${v}additionalFields=checksum,dataSize`)
  return (await json<{ partitions: Array<ListedPartition> }>(res)).partitions
}

/** The service's changes listing: the latest state in (start, end] of every partition changed there. */
export const changes = async (svc: TestService, layer: string, start: number, end: number): Promise<Array<ListedPartition>> => {
  const res = await svc.get(`/metadata/v1/catalogs/${DEMO}/layers/${layer}/changes?startVersion=${start}&endVersion=${end}&additionalFields=checksum`)
  return (await json<{ partitions: Array<ListedPartition> }>(res)).partitions
}

export const blobStatus = async (svc: TestService, layer: string, handle: string) =>
  (await svc.get(`/blobstore/v1/catalogs/${DEMO}/layers/${layer}/data/${handle}`)).status

export interface NewPartition {
  readonly partition: string
  /** Content to upload under `dataHandle` (or a fresh handle); omitted with `dataHandle` to reference an existing blob. */
  readonly data?: string
  /** An existing handle to reference (reuse), or "" to delete the partition. */
  readonly dataHandle?: string
}

/**
 * Publishes one catalog version of `places` over HTTP as a publisher would: PUT each blob, then
 * init / upload / submit a publication (publish v2). Returns the new version.
 */
export const publish = async (
  svc: TestService,
  partitions: ReadonlyArray<NewPartition>,
  layer = "places",
  contentType = "application/json",
  catalog = DEMO
): Promise<number> => {
  const staged: Array<Record<string, unknown>> = []
  for (const p of partitions) {
    if (p.data === undefined) {
      staged.push({ partition: p.partition, dataHandle: p.dataHandle! })
      continue
    }
    const handle = p.dataHandle ?? `t-${crypto.randomUUID()}`
    const bytes = new TextEncoder().encode(p.data)
    const put = await svc.get(`/blobstore/v1/catalogs/${catalog}/layers/${layer}/data/${handle}`, {
      method: "PUT",
      headers: { "content-type": contentType },
      body: bytes
    })
    if (put.status !== 200) throw new Error(`blob PUT ${handle}: ${put.status} ${await put.text()}`)
    staged.push({ partition: p.partition, dataHandle: handle, checksum: sha1(bytes), dataSize: bytes.byteLength })
  }
  const publication = await json<{ id: string }>(
    await svc.get(`/publish/v2/catalogs/${catalog}/publications`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ layerIds: [layer] })
    })
  )
  const upload = await svc.get(`/publish/v2/catalogs/${catalog}/layers/${layer}/publications/${publication.id}/partitions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ partitions: staged })
  })
  if (upload.status !== 204) throw new Error(`upload: ${upload.status} ${await upload.text()}`)
  const submit = await svc.get(`/publish/v2/catalogs/${catalog}/publications/${publication.id}`, { method: "PUT" })
  if (submit.status !== 204) throw new Error(`submit: ${submit.status} ${await submit.text()}`)
  const done = await json<{ catalogVersion: number; details: { state: string } }>(await svc.get(`/publish/v2/catalogs/${catalog}/publications/${publication.id}`))
  expect(done.details.state).toBe("succeeded")
  return done.catalogVersion
}

/** Polls until `check` holds (or fails the test after `timeoutMs`). */
export const eventually = async (check: () => Promise<boolean>, what: string, timeoutMs = 10_000) => {
  const started = Date.now()
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting until ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export interface CliResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs the real CLI (`node src/cli/bin.mjs ...`, or another `bin` such as an installed one) and
 * collects its output; `uid` runs it as that user.
 */
export const cli = (
  args: ReadonlyArray<string>,
  options: { cwd?: string; env?: Record<string, string>; bin?: string; uid?: number | undefined } = {}
): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.bin ?? BIN, ...args], {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, CATALOG_LOOKUP_URL: "", ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
      ...(options.uid === undefined ? {} : { uid: options.uid, gid: options.uid })
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** The flags that point the CLI at a test service. */
export const serviceFlags = async (svc: TestService) => ["--lookup-url", svc.lookupUrl, "--credentials", await svc.credentialsFile(), "--log-format", "json"]

export interface ExportedRow {
  readonly partition: string
  readonly partition_version: number
  readonly data_handle: string
  readonly checksum: string | null
  readonly data_sha1: string | null
}

/** What one export directory holds, read by DuckDB (not by our code). */
export const readExport = (dir: string): Promise<Array<ExportedRow>> =>
  withDuckDB((c) =>
    query(
      c,
      `SELECT partition, partition_version, data_handle, checksum, sha1(data) AS data_sha1
       FROM read_parquet(${literal(path.join(dir, "*.parquet"))}, hive_partitioning = false) ORDER BY partition`
    )
  ).then((rows) => rows.map((r) => ({ ...r, partition_version: Number(r.partition_version) }) as ExportedRow))

/** The rows an export of `layer` at `version` must hold, from the service's listing (`places`: checksum = sha1 of the data). */
export const expectedRows = (partitions: ReadonlyArray<ListedPartition>): Array<ExportedRow> =>
  [...partitions]
    .sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0))
    .map((p) => ({
      partition: p.partition,
      partition_version: p.version,
      data_handle: p.dataHandle,
      checksum: p.checksum ?? null,
      data_sha1: p.dataHandle === "" ? null : p.checksum ?? null
    }))

export const manifestOf = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, "_manifest.json"), "utf8")) as Record<string, any>
