import * as fs from "node:fs"
import * as path from "node:path"
import { expect } from "vitest"
import type { IcebirdReader } from "../sinks/iceberg/support.ts"
import { readParquet } from "../support/duckdb.ts"
import { readJson, sha1 } from "../support/files.ts"
import { DEMO, type TestService } from "../support/service.ts"

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
  (await json<{ version: number }>(await svc.get(`/metadata/v1/catalogs/${DEMO}/versions/latest?startVersion=-1`)))
    .version

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
  const res = await svc.get(
    `/metadata/v1/catalogs/${DEMO}/layers/${layer}/partitions?${v}additionalFields=checksum,dataSize`
  )
  return (await json<{ partitions: Array<ListedPartition> }>(res)).partitions
}

/** The service's changes listing: the latest state in (start, end] of every partition changed there. */
export const changes = async (
  svc: TestService,
  layer: string,
  start: number,
  end: number
): Promise<Array<ListedPartition>> => {
  const res = await svc.get(
    `/metadata/v1/catalogs/${DEMO}/layers/${layer}/changes?startVersion=${start}&endVersion=${end}&additionalFields=checksum`
  )
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
  const upload = await svc.get(
    `/publish/v2/catalogs/${catalog}/layers/${layer}/publications/${publication.id}/partitions`,
    {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ partitions: staged })
    }
  )
  if (upload.status !== 204) throw new Error(`upload: ${upload.status} ${await upload.text()}`)
  const submit = await svc.get(`/publish/v2/catalogs/${catalog}/publications/${publication.id}`, { method: "PUT" })
  if (submit.status !== 204) throw new Error(`submit: ${submit.status} ${await submit.text()}`)
  const done = await json<{ catalogVersion: number; details: { state: string } }>(
    await svc.get(`/publish/v2/catalogs/${catalog}/publications/${publication.id}`)
  )
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

export interface ExportedRow {
  readonly partition: string
  readonly partition_version: number
  readonly data_handle: string
  readonly checksum: string | null
  readonly data_sha1: string | null
}

/** What one export directory holds, read by DuckDB (not by our code), in the shape of `expectedRows`. */
export const readExport = async (dir: string): Promise<Array<ExportedRow>> =>
  (await readParquet(dir)).map((r) => ({
    partition: r.partition,
    partition_version: Number(r.partition_version),
    data_handle: r.data_handle,
    checksum: r.checksum,
    data_sha1: r.data_sha1
  }))

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

export const manifestOf = (dir: string) => readJson<Record<string, any>>(path.join(dir, "_manifest.json"))

/** A tag of a table as icebird reads it, in the shape of `expectedRows` (data's sha1: the demo's blobs are JSON text). */
export const readTableTag = async (reader: IcebirdReader, tableUri: string, tag: string): Promise<Array<ExportedRow>> =>
  (await reader.read(tableUri, tag)).map((r) => ({
    partition: r.partition as string,
    partition_version: Number(r.partition_version),
    data_handle: r.data_handle as string,
    checksum: r.checksum as string | null,
    data_sha1: r.data === null ? null : sha1(new TextEncoder().encode(r.data as string))
  }))

export interface TableMetadataJson {
  readonly location: string
  readonly refs: Record<string, { "snapshot-id": number; type: string }>
  readonly snapshots: Array<{ "snapshot-id": number; "parent-snapshot-id"?: number; summary: Record<string, string> }>
}

/** A local table's newest metadata file, found through `metadata/version-hint.text`. */
export const tableMetadataJson = (tableDir: string): TableMetadataJson => {
  const hint = fs.readFileSync(path.join(tableDir, "metadata", "version-hint.text"), "utf8").trim()
  return readJson<TableMetadataJson>(path.join(tableDir, "metadata", `v${hint}.metadata.json`))
}
