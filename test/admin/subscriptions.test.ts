/**
 * Notification subscriptions, the interactive map feature API, and the stream API over HTTP: the
 * subscription rules and refusals, idempotency, permissions between applications, the three message
 * types with their fields, delivery stopping with the subscription, and reading a stream layer once,
 * in order. Plus the client's SubscriptionsApi and StreamApi.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { lastOffsets, StreamApi } from "../../src/client/StreamApi.ts"
import { SubscriptionConflict, SubscriptionNotFound, SubscriptionsApi } from "../../src/client/SubscriptionsApi.ts"
import { DEMO, expectDataError, expectJson, expectStatus } from "../server/helpers.ts"
import { provideClient } from "../support/client.ts"
import { startService, type TestService } from "../support/service.ts"
import { catalogBody, createCatalog, del, grant, layer, OTHER, pollStatus, post, put } from "./helpers.ts"

let svc: TestService
let dataDir: string
let MAPS: string
let OTHER_MAPS: string

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "catalog-export-subs-"))
  svc = await startService({ seed: { partitions: 20, versions: 2 }, dataDir })
  MAPS = await createCatalog(
    svc,
    catalogBody("maps", [
      layer("buildings", "interactivemap"),
      layer("roads", "interactivemap"),
      layer("per-feature", "stream"),
      layer("per-transaction", "stream"),
      layer("content", "stream"),
      layer("shared", "stream"),
      layer("plain", "versioned")
    ])
  )
  OTHER_MAPS = await createCatalog(
    svc,
    catalogBody("other-maps", [layer("inbox", "stream"), layer("parks", "interactivemap")]),
    OTHER
  )
})
afterAll(async () => {
  await svc?.close()
  fs.rmSync(dataDir, { recursive: true, force: true })
})

let keyCounter = 0
const newKey = () => `test-key-${++keyCounter}-${crypto.randomUUID()}`

const subscriptionBody = (
  name: string,
  destinationLayer: string,
  type: string,
  extra: Record<string, unknown> = {}
) => ({
  subscriptionName: name,
  description: `subscription ${name}`,
  sourceCatalog: MAPS,
  sourceLayer: "buildings",
  destinationCatalog: MAPS,
  destinationLayer,
  interactiveMapSubscription: { type },
  ...extra
})

/** POST /subscriptions; `key` null sends no x-idempotency-key. */
const subscribe = (body: unknown, key: string | null = newKey(), appId?: string) =>
  post(svc, "/config/v1/subscriptions", body, {
    ...(key === null ? {} : { headers: { "x-idempotency-key": key } }),
    ...(appId === undefined ? {} : { appId })
  })

const created = async (body: unknown, key?: string, appId?: string) =>
  expectJson<any>(await subscribe(body, key, appId), 202)

const removeSubscription = (hrn: string, key = newKey(), appId?: string) =>
  del(svc, `/config/v1/subscriptions/${hrn}`, {
    headers: { "x-idempotency-key": key },
    ...(appId === undefined ? {} : { appId })
  })

const listed = async (appId?: string) =>
  (await expectJson<{ limit: number; items: Array<any> }>(
    await svc.get("/config/v1/subscriptions", appId === undefined ? {} : { appId }),
    200
  )).items

const transact = async (change: Record<string, unknown>, layerId = "buildings", catalog = MAPS, appId?: string) =>
  post(
    svc,
    `/features/v1/catalogs/${catalog}/layers/${layerId}/transactions`,
    change,
    appId === undefined ? {} : { appId }
  )

const point = (id: string, props: Record<string, unknown>, lon = 13.4, lat = 52.5) => ({
  type: "Feature",
  id,
  geometry: { type: "Point", coordinates: [lon, lat] },
  properties: props
})

/** Every message of a stream layer from the start, through a fresh consumer group. */
const readAll = async (layerId: string, catalog = MAPS, appId?: string) => {
  const as = appId === undefined ? {} : { appId }
  const sub = await expectJson<{ nodeBaseURL: string; subscriptionId: string }>(
    await post(svc, `/stream/v2/catalogs/${catalog}/layers/${layerId}/subscribe?mode=serial`, {
      kafkaConsumerProperties: { "group.id": crypto.randomUUID() }
    }, as),
    201
  )
  const out: Array<{ offset: number; key: string; timestamp: number; message: any }> = []
  for (;;) {
    const page = await expectJson<{ messages: Array<any> }>(
      await svc.get(
        `${sub.nodeBaseURL}/layers/${layerId}/partitions?subscriptionId=${sub.subscriptionId}&mode=serial`,
        as
      ),
      200
    )
    if (page.messages.length === 0) break
    for (const m of page.messages) {
      out.push({
        offset: m.offset.offset,
        key: m.metaData.partition,
        timestamp: m.metaData.timestamp,
        message: JSON.parse(Buffer.from(m.metaData.data, "base64").toString("utf8"))
      })
    }
  }
  await expectStatus(
    await del(
      svc,
      `${sub.nodeBaseURL}/layers/${layerId}/subscribe?subscriptionId=${sub.subscriptionId}&mode=serial`,
      as
    ),
    200
  )
  return out
}

describe("creating subscriptions", () => {
  it("answers 202 with a status token and the subscription; its HRN names it for get, status and list", async () => {
    const body = subscriptionBody("first-subscription", "shared", "contentChange")
    const answer = await created(body)
    expect(answer.statusToken).toEqual(expect.any(String))
    expect(answer.subscriptionHrn).toMatch(/^hrn:local:data-subscription:::first-subscription-[0-9a-f]{16}$/)
    expect(answer).toMatchObject({
      subscriptionName: "first-subscription",
      description: "subscription first-subscription",
      sourceCatalog: MAPS,
      sourceLayer: "buildings",
      destinationCatalog: MAPS,
      destinationLayer: "shared",
      interactiveMapSubscription: { type: "contentChange" },
      owner: { creator: { id: "demo-app" } },
      status: { state: "active" }
    })
    const { statusToken, ...subscription } = answer
    expect(await expectJson(await svc.get(`/config/v1/subscriptions/${answer.subscriptionHrn}`), 200)).toEqual(
      subscription
    )
    expect(await expectJson(await svc.get(`/config/v1/subscriptions/status/${statusToken}`), 200)).toEqual({
      status: "active",
      subscriptionHrn: answer.subscriptionHrn
    })
    expect((await listed()).map((s) => s.subscriptionHrn)).toContain(answer.subscriptionHrn)
  })

  it("returns the same subscription for the same x-idempotency-key, never a duplicate", async () => {
    const key = newKey()
    const body = subscriptionBody("idempotent-one", "shared", "perTransaction")
    const first = await created(body, key)
    const second = await created(body, key)
    expect(second.subscriptionHrn).toBe(first.subscriptionHrn)
    expect(second.statusToken).toBe(first.statusToken)
    expect((await listed()).filter((s) => s.subscriptionName === "idempotent-one")).toHaveLength(1)
  })

  it("refuses a key reused for a different request, and the same subscription again under a new key, with 409", async () => {
    const key = newKey()
    const original = await created(subscriptionBody("conflicting", "shared", "perFeature"), key)
    await expectDataError(
      await subscribe(subscriptionBody("conflicting", "content", "perFeature"), key),
      409,
      "x-idempotency-key"
    )
    await expectDataError(
      await subscribe(subscriptionBody("conflicting-again", "shared", "perFeature")),
      409,
      "subscription"
    )
    expect(
      (await listed()).filter((s) =>
        s.sourceLayer === "buildings" && s.destinationLayer === "shared" &&
        s.interactiveMapSubscription.type === "perFeature"
      )
        .map((s) => s.subscriptionHrn)
    ).toEqual([original.subscriptionHrn])
  })

  it("refuses requests without a usable x-idempotency-key, without a required field, or with a bad type or name (400)", async () => {
    const good = subscriptionBody("refused", "shared", "perFeature")
    await expectDataError(await subscribe(good, null), 400, "x-idempotency-key")
    await expectDataError(await subscribe(good, "short"), 400, "x-idempotency-key")
    for (
      const field of ["subscriptionName", "sourceCatalog", "sourceLayer", "destinationCatalog", "destinationLayer"]
    ) {
      const body: Record<string, unknown> = { ...good }
      delete body[field]
      await expectDataError(await subscribe(body), 400, field)
      await expectDataError(await subscribe({ ...good, [field]: "" }), 400, field)
    }
    await expectDataError(
      await subscribe({ ...good, interactiveMapSubscription: undefined }),
      400,
      "interactiveMapSubscription.type"
    )
    await expectDataError(
      await subscribe({ ...good, interactiveMapSubscription: {} }),
      400,
      "interactiveMapSubscription.type"
    )
    for (const type of ["perLayer", "PERFEATURE", 1]) {
      await expectDataError(
        await subscribe({ ...good, interactiveMapSubscription: { type } }),
        400,
        "interactiveMapSubscription.type"
      )
    }
    for (const name of ["ab", "Upper", "under_score", "-dash", "x".repeat(47)]) {
      await expectDataError(await subscribe({ ...good, subscriptionName: name }), 400, "subscriptionName")
    }
    await expectDataError(await subscribe("a string"), 400, "body")
    expect((await listed()).filter((s) => s.subscriptionName === "refused")).toEqual([])
  })

  it("refuses a source that is not an interactive map layer and a destination that is not an existing stream layer (400)", async () => {
    await expectDataError(
      await subscribe(subscriptionBody("bad-source", "shared", "perFeature", { sourceLayer: "plain" })),
      400,
      "sourceLayer"
    )
    await expectDataError(
      await subscribe(subscriptionBody("bad-source", "shared", "perFeature", { sourceLayer: "per-feature" })),
      400,
      "sourceLayer"
    )
    await expectDataError(
      await subscribe(subscriptionBody("bad-source", "shared", "perFeature", { sourceLayer: "missing" })),
      400,
      "sourceLayer"
    )
    await expectDataError(
      await subscribe(
        subscriptionBody("bad-source", "shared", "perFeature", { sourceCatalog: "hrn:local:data:::no-such-catalog" })
      ),
      400,
      "sourceCatalog"
    )
    await expectDataError(await subscribe(subscriptionBody("bad-dest", "plain", "perFeature")), 400, "destinationLayer")
    await expectDataError(await subscribe(subscriptionBody("bad-dest", "roads", "perFeature")), 400, "destinationLayer")
    await expectDataError(
      await subscribe(subscriptionBody("bad-dest", "missing", "perFeature")),
      400,
      "destinationLayer"
    )
    await expectDataError(
      await subscribe(
        subscriptionBody("bad-dest", "events", "perFeature", { destinationCatalog: "hrn:local:data:::no-such-catalog" })
      ),
      400,
      "destinationCatalog"
    )
  })

  it("lets several subscriptions share a destination and the source and destination be in one catalog or in two", async () => {
    const a = await created(subscriptionBody("share-a", "content", "perFeature", { sourceLayer: "roads" }))
    const b = await created(subscriptionBody("share-b", "content", "contentChange", { sourceLayer: "roads" }))
    const c = await created(
      subscriptionBody("share-c", "events", "perTransaction", { sourceLayer: "roads", destinationCatalog: DEMO })
    )
    expect(new Set([a.subscriptionHrn, b.subscriptionHrn, c.subscriptionHrn]).size).toBe(3)
    expect(c.destinationCatalog).toBe(DEMO)
  })
})

describe("permissions", () => {
  it("needs the destination to be the caller's, or READ and WRITE on it", async () => {
    const toInbox = subscriptionBody("to-inbox", "inbox", "perFeature", { destinationCatalog: OTHER_MAPS })
    const missing = await expectDataError(
      await subscribe({ ...toInbox, destinationCatalog: "hrn:local:data:::missing-catalog" }),
      400,
      "destinationCatalog"
    )
    const invisible = await expectDataError(await subscribe(toInbox), 400, "destinationCatalog")
    // A catalog that exists but is not the caller's answers like a missing one.
    expect(invisible.detail![0]!.error.replace(OTHER_MAPS, "X")).toBe(
      missing.detail![0]!.error.replace("hrn:local:data:::missing-catalog", "X")
    )
    grant(dataDir, OTHER_MAPS, "demo-app", true, false)
    const readOnly = await subscribe(toInbox)
    expect(readOnly.status).toBe(403)
    expect(((await readOnly.json()) as { error_description: string }).error_description).toMatch(/READ and WRITE/)
    grant(dataDir, OTHER_MAPS, "demo-app", true, true)
    const granted = await created(toInbox)
    expect(granted.destinationCatalog).toBe(OTHER_MAPS)
    // The source must be readable too.
    const otherOnly = await createCatalog(svc, catalogBody("other-only", [layer("x", "interactivemap")]), OTHER)
    await expectDataError(
      await subscribe(
        subscriptionBody("from-other", "shared", "perFeature", { sourceCatalog: otherOnly, sourceLayer: "x" })
      ),
      400,
      "sourceCatalog"
    )
  })

  it("keeps another application from seeing, reading, deleting or using what it was not granted", async () => {
    const mine = await created(
      subscriptionBody("private-one", "per-feature", "contentChange", { sourceLayer: "roads" })
    )
    const otherList = await listed(OTHER)
    expect(otherList.map((s) => s.subscriptionHrn)).not.toContain(mine.subscriptionHrn)
    const theirs = await expectDataError(
      await svc.get(`/config/v1/subscriptions/${mine.subscriptionHrn}`, { appId: OTHER }),
      404,
      "subscriptionHrn"
    )
    const none = await expectDataError(
      await svc.get("/config/v1/subscriptions/hrn:local:data-subscription:::nothing-0000000000000000", {
        appId: OTHER
      }),
      404,
      "subscriptionHrn"
    )
    expect(theirs.detail![0]!.error.replace(mine.subscriptionHrn, "X")).toBe(
      none.detail![0]!.error.replace("hrn:local:data-subscription:::nothing-0000000000000000", "X")
    )
    await expectDataError(await removeSubscription(mine.subscriptionHrn, newKey(), OTHER), 404, "subscriptionHrn")
    await expectDataError(
      await svc.get(`/config/v1/subscriptions/status/${mine.statusToken}`, { appId: OTHER }),
      404,
      "statusToken"
    )
    // Nor subscribe from, or deliver into, the demo application's layers.
    await expectDataError(
      await subscribe(
        subscriptionBody("steal", "inbox", "perFeature", { destinationCatalog: OTHER_MAPS }),
        newKey(),
        OTHER
      ),
      400,
      "sourceCatalog"
    )
    await expectDataError(
      await subscribe(
        { ...subscriptionBody("push", "per-feature", "perFeature"), sourceCatalog: OTHER_MAPS, sourceLayer: "parks" },
        newKey(),
        OTHER
      ),
      400,
      "destinationCatalog"
    )
    // Nor read its stream layers or its features, nor change them.
    await expectStatus(
      await post(svc, `/stream/v2/catalogs/${MAPS}/layers/per-feature/subscribe?mode=serial`, {}, { appId: OTHER }),
      403
    )
    await expectStatus(await svc.get(`/features/v1/catalogs/${MAPS}/layers/buildings/features`, { appId: OTHER }), 403)
    await expectStatus(await transact({ insert: [point("intruder", {})] }, "buildings", MAPS, OTHER), 403)
    // Its own subscriptions stay visible to the demo application.
    expect(await expectJson<any>(await svc.get(`/config/v1/subscriptions/${mine.subscriptionHrn}`), 200)).toMatchObject(
      { subscriptionHrn: mine.subscriptionHrn }
    )
  })
})

describe("deleting subscriptions", () => {
  it("is idempotent: 202 with the same status token every time; the subscription is gone from get and list", async () => {
    const sub = await created(subscriptionBody("to-remove", "shared", "perTransaction", { sourceLayer: "roads" }))
    const key = newKey()
    const first = await expectJson<{ statusToken: string }>(await removeSubscription(sub.subscriptionHrn, key), 202)
    const again = await expectJson<{ statusToken: string }>(await removeSubscription(sub.subscriptionHrn, key), 202)
    const otherKey = await expectJson<{ statusToken: string }>(await removeSubscription(sub.subscriptionHrn), 202)
    expect(again.statusToken).toBe(first.statusToken)
    expect(otherKey.statusToken).toBe(first.statusToken)
    expect(await expectJson(await svc.get(`/config/v1/subscriptions/status/${first.statusToken}`), 200)).toEqual({
      status: "deleted",
      subscriptionHrn: sub.subscriptionHrn
    })
    await expectDataError(await svc.get(`/config/v1/subscriptions/${sub.subscriptionHrn}`), 404, "subscriptionHrn")
    expect((await listed()).map((s) => s.subscriptionHrn)).not.toContain(sub.subscriptionHrn)
    // A new subscription of the same kind may now be created.
    await created(subscriptionBody("to-remove-2", "shared", "perTransaction", { sourceLayer: "roads" }))
  })

  it("refuses a delete without a key, a key used for another subscription, and an unknown subscription", async () => {
    const a = await created(subscriptionBody("del-a", "content", "perTransaction", { sourceLayer: "roads" }))
    const b = await created(subscriptionBody("del-b", "per-transaction", "perTransaction", { sourceLayer: "roads" }))
    await expectDataError(await del(svc, `/config/v1/subscriptions/${a.subscriptionHrn}`), 400, "x-idempotency-key")
    const key = newKey()
    await expectStatus(await removeSubscription(a.subscriptionHrn, key), 202)
    await expectDataError(await removeSubscription(b.subscriptionHrn, key), 409, "x-idempotency-key")
    await expectDataError(
      await removeSubscription("hrn:local:data-subscription:::none-0000000000000000"),
      404,
      "subscriptionHrn"
    )
    await expectJson(await svc.get(`/config/v1/subscriptions/${b.subscriptionHrn}`), 200)
  })
})

describe("notifications", () => {
  it("writes FeatureChange per feature, Changeset per transaction and ChangeNotification per change, with their fields; deleting a subscription stops delivery", async () => {
    const source = await createCatalog(
      svc,
      catalogBody("notify", [
        layer("map", "interactivemap"),
        layer("f", "stream"),
        layer("t", "stream"),
        layer("c", "stream")
      ])
    )
    const sub = (name: string, dest: string, type: string) =>
      created({
        subscriptionName: name,
        sourceCatalog: source,
        sourceLayer: "map",
        destinationCatalog: source,
        destinationLayer: dest,
        interactiveMapSubscription: { type }
      })
    const perFeature = await sub("n-feature", "f", "perFeature")
    await sub("n-transaction", "t", "perTransaction")
    await sub("n-content", "c", "contentChange")

    const before = Date.now()
    const a = point("a", { name: "A", floors: 3 })
    const b = point("b", { name: "B" }, 13.5, 52.6)
    const tx1 = await expectJson<any>(await transact({ insert: [a, b] }, "map", source), 200)
    expect(tx1).toMatchObject({ version: 1, author: "demo-app", inserted: ["a", "b"], updated: [], deleted: [] })
    const a2 = point("a", { name: "A", floors: 4 })
    const tx2 = await expectJson<any>(await transact({ update: [a2], delete: ["b"] }, "map", source), 200)
    expect(tx2).toMatchObject({ version: 2, inserted: [], updated: ["a"], deleted: ["b"] })
    const after = Date.now()

    const features = await readAll("f", source)
    expect(features.map((m) => m.offset)).toEqual([0, 1, 2, 3])
    expect(features.map((m) => m.key)).toEqual(["a", "b", "a", "b"])
    expect(features.map((m) => m.message)).toEqual([
      { type: "FeatureChange", operation: "INSERT", catalogHrn: source, layerId: "map", feature: a },
      { type: "FeatureChange", operation: "INSERT", catalogHrn: source, layerId: "map", feature: b },
      { type: "FeatureChange", operation: "UPDATE", catalogHrn: source, layerId: "map", feature: a2 },
      { type: "FeatureChange", operation: "DELETE", catalogHrn: source, layerId: "map", feature: b }
    ])

    const changesets = (await readAll("t", source)).map((m) => m.message)
    expect(changesets).toEqual([
      {
        type: "Changeset",
        version: 1,
        author: "demo-app",
        catalogHrn: source,
        layerId: "map",
        createdAt: tx1.createdAt,
        inserted: { type: "FeatureCollection", features: [a, b] },
        updated: { type: "FeatureCollection", features: [] },
        deleted: { type: "FeatureCollection", features: [] }
      },
      {
        type: "Changeset",
        version: 2,
        author: "demo-app",
        catalogHrn: source,
        layerId: "map",
        createdAt: tx2.createdAt,
        inserted: { type: "FeatureCollection", features: [] },
        updated: { type: "FeatureCollection", features: [a2] },
        deleted: { type: "FeatureCollection", features: [b] }
      }
    ])
    // createdAt is an integer timestamp in milliseconds since the epoch.
    for (const c of changesets) {
      expect(Number.isInteger(c.createdAt)).toBe(true)
      expect(c.createdAt).toBeGreaterThanOrEqual(before)
      expect(c.createdAt).toBeLessThanOrEqual(after)
    }

    const contents = (await readAll("c", source)).map((m) => m.message)
    expect(contents).toEqual([
      { type: "ChangeNotification", catalogHrn: source, layerId: "map", createdAt: tx1.createdAt },
      { type: "ChangeNotification", catalogHrn: source, layerId: "map", createdAt: tx2.createdAt }
    ])

    // The feature API shows the state after both transactions.
    expect(await expectJson(await svc.get(`/features/v1/catalogs/${source}/layers/map/features`), 200)).toEqual({
      type: "FeatureCollection",
      features: [a2]
    })
    expect(await expectJson(await svc.get(`/features/v1/catalogs/${source}/layers/map/features/a`), 200)).toEqual(a2)
    await expectDataError(await svc.get(`/features/v1/catalogs/${source}/layers/map/features/b`), 404, "featureId")

    // Deleting the perFeature subscription stops its delivery; the others go on.
    await expectStatus(await removeSubscription(perFeature.subscriptionHrn), 202)
    await expectJson(await transact({ insert: [point("c", {})] }, "map", source), 200)
    expect(await readAll("f", source)).toHaveLength(4)
    expect(await readAll("t", source)).toHaveLength(3)
    expect(await readAll("c", source)).toHaveLength(3)
  })

  it("commits a transaction whole or not at all, and refuses bad ones", async () => {
    const source = await createCatalog(
      svc,
      catalogBody("tx-rules", [layer("map", "interactivemap"), layer("out", "stream"), layer("v", "versioned")])
    )
    await created({
      subscriptionName: "tx-rules",
      sourceCatalog: source,
      sourceLayer: "map",
      destinationCatalog: source,
      destinationLayer: "out",
      interactiveMapSubscription: { type: "perFeature" }
    })
    await expectJson(await transact({ insert: [point("x", {})] }, "map", source), 200)
    await expectDataError(await transact({ insert: [point("y", {}), point("x", {})] }, "map", source), 409, "insert")
    await expectDataError(
      await transact({ insert: [point("z", {})], update: [point("missing", {})] }, "map", source),
      404,
      "featureId"
    )
    await expectDataError(await transact({ delete: ["missing"] }, "map", source), 404, "featureId")
    await expectDataError(
      await transact({ insert: [point("d", {})], update: [point("d", {})] }, "map", source),
      400,
      "body"
    )
    await expectDataError(await transact({}, "map", source), 400, "body")
    await expectDataError(
      await transact({ insert: [{ type: "Point", coordinates: [0, 0] }] }, "map", source),
      400,
      "insert[0].type"
    )
    await expectDataError(
      await transact({ insert: [{ ...point("g", {}), geometry: "here" }] }, "map", source),
      400,
      "insert[0].geometry"
    )
    await expectDataError(
      await transact({ update: [{ type: "Feature", geometry: null, properties: {} }] }, "map", source),
      400,
      "update[0].id"
    )
    await expectDataError(await transact({ insert: "x" }, "map", source), 400, "insert")
    await expectDataError(await transact({ insert: [point("p", {})] }, "v", source), 400, "layer")
    // The refused transactions changed nothing and notified nobody.
    const collection = await expectJson<any>(await svc.get(`/features/v1/catalogs/${source}/layers/map/features`), 200)
    expect(collection.features.map((f: any) => f.id)).toEqual(["x"])
    expect((await readAll("out", source)).map((m) => m.message.feature.id)).toEqual(["x"])
    // An insert without an id gets one; numeric ids become strings.
    const tx = await expectJson<any>(
      await transact(
        { insert: [{ type: "Feature", geometry: null, properties: { n: 1 } }, { ...point("ignored", {}), id: 7 }] },
        "map",
        source
      ),
      200
    )
    expect(tx.inserted).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), "7"])
  })

  it("disables subscriptions whose destination layer is deleted", async () => {
    const source = await createCatalog(
      svc,
      catalogBody("dest-gone", [layer("map", "interactivemap"), layer("out", "stream")])
    )
    const sub = await created({
      subscriptionName: "dest-gone",
      sourceCatalog: source,
      sourceLayer: "map",
      destinationCatalog: source,
      destinationLayer: "out",
      interactiveMapSubscription: { type: "contentChange" }
    })
    await pollStatus(svc, (await expectJson<any>(await del(svc, `/config/v1/catalogs/${source}/layers/out`), 202)).href)
    expect(await expectJson<any>(await svc.get(`/config/v1/subscriptions/${sub.subscriptionHrn}`), 200)).toMatchObject({
      status: { state: "disabled" }
    })
    await expectJson(await transact({ insert: [point("q", {})] }, "map", source), 200)
    // Recreating the layer does not revive the subscription.
    await expectStatus(
      await put(
        svc,
        `/config/v1/catalogs/${source}`,
        catalogBody("dest-gone", [layer("map", "interactivemap"), layer("out", "stream")])
      ),
      202
    )
    await expectJson(await transact({ insert: [point("r", {})] }, "map", source), 200)
    expect(await readAll("out", source)).toEqual([])
  })
})

describe("stream API", () => {
  const base = () => `/stream/v2/catalogs/${MAPS}/layers/per-transaction`

  it("reads every message once and in order through subscribe, read and commit, and resumes after the committed offset", async () => {
    const sub = await created(subscriptionBody("stream-reader", "per-transaction", "perTransaction"))
    for (let i = 0; i < 5; i++) await expectJson(await transact({ insert: [point(`s-${i}`, { i })] }), 200)
    const group = { kafkaConsumerProperties: { "group.id": "readers", "max.poll.records": 2 } }
    const first = await expectJson<{ nodeBaseURL: string; subscriptionId: string }>(
      await post(svc, `${base()}/subscribe?mode=serial`, group),
      201
    )
    expect(first.nodeBaseURL).toBe(`${svc.url}/stream/v2/nodes/local-1/catalogs/${MAPS}`)
    const node = (p: string, id = first.subscriptionId) =>
      `${first.nodeBaseURL}/layers/per-transaction${p}?subscriptionId=${id}&mode=serial`
    const page1 = await expectJson<{ messages: Array<any> }>(await svc.get(node("/partitions")), 200)
    expect(page1.messages.map((m) => m.offset)).toEqual([{ partition: 0, offset: 0 }, { partition: 0, offset: 1 }])
    const m0 = page1.messages[0]
    expect(m0.metaData).toMatchObject({
      partition: "1",
      dataSize: expect.any(Number),
      checksum: expect.stringMatching(/^[0-9a-f]{40}$/),
      timestamp: expect.any(Number)
    })
    expect(Buffer.from(m0.metaData.data, "base64").byteLength).toBe(m0.metaData.dataSize)
    const page2 = await expectJson<{ messages: Array<any> }>(await svc.get(node("/partitions")), 200)
    expect(page2.messages.map((m) => m.offset.offset)).toEqual([2, 3])
    // Commit up to offset 2 (the service resumes after it), then leave.
    await expectStatus(await put(svc, node("/offsets"), { offsets: [{ partition: 0, offset: 2 }] }), 200)
    await expectStatus(await del(svc, node("/subscribe")), 200)
    await expectJson(await svc.get(node("/partitions")), 404)

    const second = await expectJson<{ subscriptionId: string }>(
      await post(svc, `${base()}/subscribe?mode=serial`, group),
      201
    )
    const seen: Array<number> = []
    for (;;) {
      const page = await expectJson<{ messages: Array<any> }>(
        await svc.get(node("/partitions", second.subscriptionId)),
        200
      )
      if (page.messages.length === 0) break
      seen.push(...page.messages.map((m) => m.offset.offset))
    }
    expect(seen).toEqual([3, 4])
    const versions = (await readAll("per-transaction")).map((m) => m.message.version)
    expect(versions).toEqual([1, 2, 3, 4, 5])

    // Seek moves the position; "latest" starts after the last message.
    await expectStatus(
      await put(svc, node("/seek", second.subscriptionId), { offsets: [{ partition: 0, offset: 1 }] }),
      200
    )
    expect(
      (await expectJson<any>(await svc.get(node("/partitions", second.subscriptionId)), 200)).messages.map((m: any) =>
        m.offset.offset
      )
    ).toEqual([1, 2])
    const latest = await expectJson<{ subscriptionId: string }>(
      await post(svc, `${base()}/subscribe?mode=serial`, {
        kafkaConsumerProperties: { "group.id": "late", "auto.offset.reset": "latest" }
      }),
      201
    )
    expect((await expectJson<any>(await svc.get(node("/partitions", latest.subscriptionId)), 200)).messages).toEqual([])
    await expectStatus(await removeSubscription(sub.subscriptionHrn), 202)
  })

  it("answers refusals in the stream API's error shape", async () => {
    const streamError = async (res: Response, status: number, code: string) => {
      const body = await expectJson<any>(res, status)
      expect(body).toMatchObject({
        status,
        code,
        title: expect.any(String),
        cause: expect.any(String),
        action: expect.any(String),
        correlationId: expect.any(String)
      })
    }
    await streamError(await post(svc, `${base()}/subscribe?mode=singleton`, {}), 400, "E213002")
    await streamError(await post(svc, `/stream/v2/catalogs/${MAPS}/layers/nope/subscribe`, {}), 404, "E213027")
    await streamError(await post(svc, `/stream/v2/catalogs/${MAPS}/layers/plain/subscribe`, {}), 404, "E213027")
    await streamError(
      await post(svc, `${base()}/subscribe`, { kafkaConsumerProperties: { "auto.offset.reset": "none" } }),
      400,
      "E213005"
    )
    const sub = await expectJson<{ nodeBaseURL: string; subscriptionId: string }>(
      await post(svc, `${base()}/subscribe?mode=parallel`, {}),
      201
    )
    expect(sub.subscriptionId).toMatch(/^-\d+\.[0-9a-f-]+$/)
    const node = `${sub.nodeBaseURL}/layers/per-transaction`
    await streamError(await svc.get(`${node}/partitions?mode=parallel`), 400, "E213013")
    await streamError(await svc.get(`${node}/partitions?subscriptionId=-1&mode=parallel`), 404, "E213003")
    await streamError(
      await put(svc, `${node}/offsets?subscriptionId=${sub.subscriptionId}&mode=parallel`, {
        offsets: [{ partition: 3, offset: 0 }]
      }),
      400,
      "E213006"
    )
    await streamError(
      await put(svc, `${node}/offsets?subscriptionId=${sub.subscriptionId}&mode=parallel`, {
        offsets: [{ partition: 0, offset: 1_000_000 }]
      }),
      400,
      "E213006"
    )
    await streamError(
      await put(svc, `${node}/offsets?subscriptionId=${sub.subscriptionId}&mode=parallel`, {}),
      400,
      "E213006"
    )
    // Another application cannot use the subscription id: without read access it is refused before the id is looked at,
    // and with read access the id is not one of its own.
    await expectStatus(
      await svc.get(`${node}/partitions?subscriptionId=${sub.subscriptionId}&mode=parallel`, { appId: OTHER }),
      403
    )
    grant(dataDir, MAPS, OTHER, true, false)
    await streamError(
      await svc.get(`${node}/partitions?subscriptionId=${sub.subscriptionId}&mode=parallel`, { appId: OTHER }),
      404,
      "E213003"
    )
    grant(dataDir, MAPS, OTHER, false, false)
  })
})

describe("client SubscriptionsApi and StreamApi", () => {
  it.live("creates idempotently, lists, reads the notifications with commits, and deletes", () =>
    Effect.gen(function*() {
      const source = yield* Effect.promise(() =>
        createCatalog(svc, catalogBody("client-subs", [layer("map", "interactivemap"), layer("out", "stream")]))
      )
      const request = {
        subscriptionName: "client-sub",
        sourceCatalog: source,
        sourceLayer: "map",
        destinationCatalog: source,
        destinationLayer: "out",
        interactiveMapSubscription: { type: "perFeature" as const }
      }
      const subs = yield* SubscriptionsApi
      const stream = yield* StreamApi
      const one = yield* subs.create(request, { idempotencyKey: "client-key-0001" })
      const two = yield* subs.create(request, { idempotencyKey: "client-key-0001" })
      const conflict = yield* Effect.flip(subs.create(request))
      const all = yield* subs.list()
      yield* Effect.promise(() =>
        transact({ insert: [point("m1", {}), point("m2", {})] }, "map", source).then((r) => r.json())
      )
      const consumer = yield* stream.subscribe(source, "out", { groupId: "client" })
      const batch = yield* stream.read(consumer)
      yield* stream.commit(consumer, lastOffsets(batch))
      const empty = yield* stream.read(consumer)
      yield* stream.unsubscribe(consumer)
      const deleted = yield* subs.delete(one.subscriptionHrn)
      const gone = yield* Effect.flip(subs.get(one.subscriptionHrn))
      expect(two.subscriptionHrn).toBe(one.subscriptionHrn)
      expect(conflict).toBeInstanceOf(SubscriptionConflict)
      expect(all.filter((s) => s.subscriptionName === "client-sub")).toHaveLength(1)
      expect(batch.map((m) => JSON.parse(Buffer.from(m.metaData.data!, "base64").toString()).feature.id)).toEqual([
        "m1",
        "m2"
      ])
      expect(empty).toEqual([])
      expect(deleted).toEqual({ status: "deleted", subscriptionHrn: one.subscriptionHrn })
      expect(gone).toBeInstanceOf(SubscriptionNotFound)
    }).pipe(provideClient(svc)))
})
