/**
 * The artifact API v1 of the local service: registering artifacts, uploading files, creating and
 * reading schemas, permissions, paging; read back by the product's client and by the official HERE
 * Data SDK for TypeScript's ArtifactClient, unchanged.
 */
import "@here/olp-sdk-fetch"
import { loadCredentialsFromFile, requestToken, UserAuth } from "@here/olp-sdk-authentication"
import { HRN, OlpClientSettings } from "@here/olp-sdk-core"
import { ArtifactClient, SchemaDetailsRequest, SchemaRequest } from "@here/olp-sdk-dataservice-read"
import * as Effect from "effect/Effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ArtifactApi } from "../../src/client/ArtifactApi.ts"
import { OTHER_APP } from "../../src/server/Seed.ts"
import { clientLayerFor, runWith } from "../support/client.ts"
import { startService, type TestService } from "../support/service.ts"
import { expectJson, expectStatus } from "./helpers.ts"

const GROUP = "com.example.test"
const ARTIFACT_ID = "road_v1_ds"
const ARTIFACT = `hrn:local:artifact:::${GROUP}:${ARTIFACT_ID}:1.0.0`
const SCHEMA = `hrn:local:schema:::${GROUP}:road_v1:1.0.0`
const FILE = "road_v1_ds-1.0.0.zip"
const A = "/artifact/v1"

describe("artifact API", () => {
  let svc: TestService
  const bundle = new Uint8Array(randomBytes(3000))

  beforeAll(async () => {
    svc = await startService({ seed: false })
  })
  afterAll(() => svc.close())

  const put = (path: string, body: string | Uint8Array, appId?: string, contentType = "application/octet-stream") =>
    svc.get(`${A}${path}`, {
      method: "PUT",
      body,
      headers: { "content-type": contentType },
      ...(appId === undefined ? {} : { appId })
    })

  it("is listed in platform lookup", async () => {
    const apis = await expectJson<Array<{ api: string; version: string; baseURL: string }>>(
      await svc.get("/lookup/v1/platform/apis"),
      200
    )
    expect(apis.find((e) => e.api === "artifact")).toEqual({
      api: "artifact",
      version: "v1",
      baseURL: `${svc.url}/artifact/v1`,
      parameters: {}
    })
  })

  it("registers an artifact, stores immutable files and creates a schema from them", async () => {
    const registered = await expectJson(
      await put(`/artifact/register/${GROUP}/${ARTIFACT_ID}`, "{}", undefined, "application/json"),
      201
    )
    expect(registered).toEqual({
      groupId: GROUP,
      artifactId: ARTIFACT_ID,
      created: true,
      hrnPrefix: `hrn:local:artifact:::${GROUP}:${ARTIFACT_ID}`
    })
    expect((await expectJson(await put(`/artifact/register/${GROUP}/${ARTIFACT_ID}`, "{}"), 200)).created).toBe(false)
    await expectJson(await put(`/artifact/register/${GROUP}/${ARTIFACT_ID}`, "{}", OTHER_APP), 409)

    await expectStatus(await put(`/artifact/${ARTIFACT}/${FILE}`, bundle), 201)
    await expectStatus(await put(`/artifact/${ARTIFACT}/${FILE}`, bundle), 200)
    await expectJson(await put(`/artifact/${ARTIFACT}/${FILE}`, new Uint8Array([1, 2, 3])), 409)
    await expectJson(await put(`/artifact/${ARTIFACT}/${FILE}`, bundle, OTHER_APP), 404)
    await expectJson(await put(`/artifact/hrn:local:artifact:::${GROUP}:unregistered:1.0.0/x.zip`, bundle), 404)
    const res = await svc.get(`${A}/artifact/${ARTIFACT}/${FILE}`)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/zip")
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bundle)

    const request = { name: "Road", summary: "Roads", variants: [{ id: "ds", url: `artifact/${ARTIFACT}/${FILE}` }] }
    await expectJson(
      await put(
        `/schema/${SCHEMA}`,
        JSON.stringify({ variants: [{ id: "ds", url: `artifact/${ARTIFACT}/missing.zip` }] }),
        undefined,
        "application/json"
      ),
      404
    )
    const created = await expectJson(
      await put(`/schema/${SCHEMA}`, JSON.stringify(request), undefined, "application/json"),
      201
    )
    expect(created.schema).toMatchObject({
      hrn: SCHEMA,
      groupId: GROUP,
      artifactId: "road_v1",
      version: "1.0.0",
      name: "Road",
      summary: "Roads"
    })
    expect(created.artifacts).toEqual([
      expect.objectContaining({ hrn: ARTIFACT, groupId: GROUP, artifactId: ARTIFACT_ID, version: "1.0.0" })
    ])
    expect(created.variants).toEqual(request.variants)
    expect(created.schemaValidationResults).toEqual([])
    await expectJson(await put(`/schema/${SCHEMA}`, JSON.stringify(request), undefined, "application/json"), 200)
    await expectJson(
      await put(
        `/schema/${SCHEMA}`,
        JSON.stringify({ ...request, variants: [...request.variants, { id: "doc", url: request.variants[0]!.url }] }),
        undefined,
        "application/json"
      ),
      409
    )

    // HRNs go into paths raw, as the SDKs send them; percent-encoded works too.
    expect(await expectJson(await svc.get(`${A}/schema/${SCHEMA}`), 200)).toEqual(created)
    expect(await expectJson(await svc.get(`${A}/schema/${encodeURIComponent(SCHEMA)}`), 200)).toEqual(created)
    await expectJson(await svc.get(`${A}/schema/hrn:local:schema:::${GROUP}:road_v1:9.9.9`), 404)
    await expectJson(await svc.get(`${A}/schema/not-an-hrn`), 400)
  })

  it("hides schemas and artifacts from other applications until shared", async () => {
    await expectJson(await svc.get(`${A}/schema/${SCHEMA}`, { appId: OTHER_APP }), 404)
    await expectJson(await svc.get(`${A}/artifact/${ARTIFACT}/${FILE}`, { appId: OTHER_APP }), 404)
    expect((await expectJson(await svc.get(`${A}/schema`, { appId: OTHER_APP }), 200)).items).toEqual([])
    const share = JSON.stringify({ principal: { type: "App", token: OTHER_APP }, permissions: ["READ"] })
    await expectJson(
      await svc.get(`${A}/schema/${SCHEMA}/permission`, {
        method: "POST",
        body: share,
        headers: { "content-type": "application/json" },
        appId: OTHER_APP
      }),
      404
    )
    await expectJson(
      await svc.get(`${A}/schema/${SCHEMA}/permission`, {
        method: "POST",
        body: share,
        headers: { "content-type": "application/json" }
      }),
      200
    )
    await expectJson(await svc.get(`${A}/schema/${SCHEMA}`, { appId: OTHER_APP }), 200)
    expect(
      new Uint8Array(await (await svc.get(`${A}/artifact/${ARTIFACT}/${FILE}`, { appId: OTHER_APP })).arrayBuffer())
    ).toEqual(bundle)
    // Read is not write.
    await expectJson(await put(`/artifact/${ARTIFACT}/other.zip`, bundle, OTHER_APP), 403)
  })

  it("needs a bearer token", async () => {
    for (const path of [`${A}/schema`, `${A}/schema/${SCHEMA}`, `${A}/artifact/${ARTIFACT}/${FILE}`]) {
      expect((await fetch(`${svc.url}${path}`)).status).toBe(401)
    }
  })

  it("lists schemas in pages that the client follows", async () => {
    const layer = await clientLayerFor(svc)
    await runWith(
      layer,
      Effect.gen(function*() {
        const artifacts = yield* ArtifactApi
        for (const v of ["1.1.0", "1.2.0", "2.0.0"]) {
          const artifact = `hrn:local:artifact:::${GROUP}:${ARTIFACT_ID}:${v}`
          yield* artifacts.putArtifactFile(artifact, `road_v1_ds-${v}.zip`, bundle)
          yield* artifacts.createSchema(`hrn:local:schema:::${GROUP}:road_v1:${v}`, {
            variants: [{ id: "ds", url: `artifact/${artifact}/road_v1_ds-${v}.zip` }]
          })
        }
      })
    )
    const first = await expectJson(await svc.get(`${A}/schema?limit=2`), 200)
    expect(first.items).toHaveLength(2)
    expect(first.page).toEqual({ from: "0", limit: 2, order: "ASC", sort: "hrn" })
    const second = await expectJson(await svc.get(first.next), 200)
    expect(second.items).toHaveLength(2)
    expect(second.next).toBeUndefined()
    const listed = await runWith(layer, Effect.flatMap(ArtifactApi, (a) => a.listSchemas({ pageSize: 1 })))
    expect(listed.map((s) => s.hrn)).toEqual([...first.items, ...second.items].map((s: { hrn: string }) => s.hrn))
    expect(listed.map((s) => s.version)).toEqual(["1.0.0", "1.1.0", "1.2.0", "2.0.0"])
    const bytes = await runWith(layer, Effect.flatMap(ArtifactApi, (a) => a.getSchemaBundle(SCHEMA)))
    expect(bytes).toEqual(bundle)
    const missing = await runWith(
      layer,
      Effect.flip(Effect.flatMap(ArtifactApi, (a) => a.getSchemaBundle(`hrn:local:schema:::${GROUP}:nope:1.0.0`)))
    )
    expect(missing._tag).toBe("SchemaNotFound")
  })

  it("serves the official SDK's ArtifactClient unchanged", async () => {
    const userAuth = new UserAuth({
      credentials: loadCredentialsFromFile(await svc.credentialsFile()),
      customUrl: svc.tokenUrl,
      tokenRequester: requestToken
    })
    const settings = new OlpClientSettings({ environment: svc.lookupUrl, getToken: () => userAuth.getToken() })
    const client = new ArtifactClient(settings)
    const details = await client.getSchemaDetails(new SchemaDetailsRequest().withSchema(HRN.fromString(SCHEMA)))
    expect(details.schema?.hrn).toBe(SCHEMA)
    const ds = details.variants?.find((v) => v.id === "ds")
    expect(ds).toBeDefined()
    const bytes = await client.getSchema(new SchemaRequest().withVariant(ds!))
    expect(new Uint8Array(bytes)).toEqual(bundle)
    await expect(
      client.getSchema(new SchemaRequest().withVariant({ id: "ds", url: `artifact/${ARTIFACT}/missing.zip` }))
    ).rejects.toThrow(/HTTP 404/)
  })
})
