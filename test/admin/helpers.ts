/**
 * Helpers of the administration tests: requests with JSON bodies, catalog bodies, status polling,
 * and direct SQLite access for what the service has no API for (grants, ages of records).
 */
import * as path from "node:path"
import { expect } from "vitest"
import * as Sqlite from "../../src/server/db/Sqlite.ts"
import { expectJson, expectStatus, sleep } from "../server/helpers.ts"
import type { TestService } from "../support/service.ts"

export const OTHER = "other-app"

/** The layer deletion steps as the interface lists them, in order (independent of the service's own list). */
export const STEPS = [
  "delete_layer:validation",
  "delete_layer:metadata",
  "delete_layer:catalog_publishing",
  "delete_layer:layers",
  "delete_layer:database",
  "delete_layer:backups",
  "delete_layer:cache"
]

export const hrnOf = (id: string) => `hrn:local:data:::${id}`

type Init = { appId?: string; headers?: Record<string, string> }

export const send = (svc: TestService, method: string, p: string, body?: unknown, init: Init = {}) =>
  svc.get(p, {
    method,
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(init.headers ?? {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...(init.appId === undefined ? {} : { appId: init.appId }),
    redirect: "manual"
  })

export const post = (svc: TestService, p: string, body: unknown, init: Init = {}) => send(svc, "POST", p, body, init)
export const put = (svc: TestService, p: string, body: unknown, init: Init = {}) => send(svc, "PUT", p, body, init)
export const del = (svc: TestService, p: string, init: Init = {}) => send(svc, "DELETE", p, undefined, init)

export const layer = (id: string, layerType: string, extra: Record<string, unknown> = {}) => ({
  id,
  name: `Layer ${id}`,
  summary: `The ${id} layer`,
  description: `The ${id} layer, for tests.`,
  layerType,
  ...(layerType === "interactivemap" || layerType === "objectstore" ? {} : { contentType: "application/json" }),
  partitioning: { scheme: "generic" },
  ...extra
})

export const catalogBody = (
  id: string,
  layers: ReadonlyArray<Record<string, unknown>> = [],
  extra: Record<string, unknown> = {}
) => ({
  id,
  name: `Catalog ${id}`,
  summary: `Summary of ${id}`,
  description: `Description of ${id}`,
  notifications: { enabled: false },
  layers,
  ...extra
})

export interface StatusLinkBody {
  readonly href: string
  readonly configToken: string
  readonly title: string
  readonly type: string
}

/** Polls a status link until it leaves 202; returns every pending body seen and the final response. */
export const pollStatus = async (
  svc: TestService,
  href: string,
  init: Init & { query?: string; intervalMs?: number } = {}
) => {
  const pending: Array<any> = []
  for (let i = 0; i < 400; i++) {
    const res = await svc.get(`${href}${init.query ?? ""}`, {
      redirect: "manual",
      ...(init.appId === undefined ? {} : { appId: init.appId })
    })
    if (res.status !== 202) return { pending, final: res }
    pending.push(await res.json())
    await sleep(init.intervalMs ?? 20)
  }
  throw new Error(`status ${href} stayed pending`)
}

/** POST /catalogs and wait until the operation succeeded; returns the catalog HRN. */
export const createCatalog = async (svc: TestService, body: Record<string, unknown>, appId?: string) => {
  const link = await expectJson<StatusLinkBody>(
    await post(svc, "/config/v1/catalogs", body, appId === undefined ? {} : { appId }),
    202
  )
  const { final } = await pollStatus(svc, link.href, {
    query: "?flags=noRedirects",
    ...(appId === undefined ? {} : { appId })
  })
  const done = await expectJson<{ status: string; item: { hrn: string } }>(final, 201)
  expect(done.status).toBe("success")
  return done.item.hrn
}

export const publishInline = async (
  svc: TestService,
  catalog: string,
  layerId: string,
  partitions: Record<string, string>,
  appId?: string
) => {
  const as = appId === undefined ? {} : { appId }
  const publish = (p: string) => `/publish/v2/catalogs/${catalog}${p}`
  const init = await expectJson<{ id: string }>(
    await post(svc, publish("/publications"), { layerIds: [layerId] }, as),
    200
  )
  await expectStatus(
    await post(svc, publish(`/layers/${layerId}/publications/${init.id}/partitions`), {
      partitions: Object.entries(partitions).map(([partition, text]) => ({
        partition,
        data: Buffer.from(text).toString("base64")
      }))
    }, as),
    204
  )
  await expectStatus(await put(svc, publish(`/publications/${init.id}`), undefined, as), 204)
}

/** The service's SQLite file as these tests use it: rows of any shape. */
interface Db {
  prepare(sql: string): {
    run(...args: ReadonlyArray<unknown>): unknown
    get(...args: ReadonlyArray<unknown>): any
    all(...args: ReadonlyArray<unknown>): Array<any>
  }
}

/** Runs statements against the service's SQLite file (the service keeps running; WAL allows it). */
export const withDb = <A>(dataDir: string, f: (db: Db) => A): A => {
  const db = Sqlite.open(path.join(dataDir, "catalog.db"))
  try {
    return f(db as Db)
  } finally {
    db.close()
  }
}

export const grant = (dataDir: string, catalog: string, appId: string, read: boolean, write: boolean) =>
  withDb(dataDir, (db) =>
    db.prepare(`INSERT INTO grants (catalog_hrn, app_id, can_read, can_write) VALUES (?, ?, ?, ?)
      ON CONFLICT (catalog_hrn, app_id) DO UPDATE SET can_read = excluded.can_read, can_write = excluded.can_write`)
      .run(catalog, appId, read ? 1 : 0, write ? 1 : 0))

/** The texts of a `Warning` header. */
export const warningsOf = (res: Response) =>
  [...(res.headers.get("warning") ?? "").matchAll(/299 - "([^"]*)"/g)].map((m) => m[1]!)
