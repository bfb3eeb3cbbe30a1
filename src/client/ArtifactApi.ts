import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import {
  type CreateSchemaRequest,
  RegisterArtifactResponse,
  SCHEMA_BUNDLE_VARIANT,
  SchemaDetails,
  type SchemaInfo,
  SchemaList,
  type Variant
} from "../domain/Artifact.ts"
import { ExitCode } from "../domain/ExitCode.ts"
import { ApiClient, joinUrl, segment } from "./ApiClient.ts"
import { ApiError } from "./Errors.ts"
import { Lookup, type LookupFailure } from "./Lookup.ts"

/**
 * Artifact API v1 (a platform API in lookup): schemas, their variants, and the artifact files behind
 * them. HRNs go into paths raw, as the HERE SDKs send them; file names are encoded.
 */

/** The schema does not exist or these credentials may not read it (the service answers 404 for both). */
export class SchemaNotFound extends Schema.TaggedError<SchemaNotFound>()("SchemaNotFound", {
  hrn: Schema.String,
  reason: Schema.String
}) {
  get exitCode() {
    return ExitCode.notFound
  }

  override get message(): string {
    return `Schema ${this.hrn}: ${this.reason}. Check the HRN (catalog-export schemas list shows the schemas these credentials can read), or pass the bundle with --schema-bundle.`
  }
}

export type ArtifactFailure = LookupFailure | SchemaNotFound

export interface ArtifactApiShape {
  readonly getSchema: (schemaHrn: string) => Effect.Effect<SchemaDetails, ArtifactFailure>
  /** Every page of `GET /schema`. */
  readonly listSchemas: (
    options?: { readonly pageSize?: number }
  ) => Effect.Effect<ReadonlyArray<SchemaInfo>, ArtifactFailure>
  /** The file a variant points at (its url is relative to the artifact API's base URL). */
  readonly getVariant: (variant: Variant) => Effect.Effect<Uint8Array, ArtifactFailure>
  /** The schema bundle (variant `ds`) of a schema. */
  readonly getSchemaBundle: (schemaHrn: string) => Effect.Effect<Uint8Array, ArtifactFailure>
  readonly getArtifactFile: (artifactHrn: string, fileName: string) => Effect.Effect<Uint8Array, ArtifactFailure>
  readonly putArtifactFile: (
    artifactHrn: string,
    fileName: string,
    bytes: Uint8Array,
    contentType?: string
  ) => Effect.Effect<void, ArtifactFailure>
  readonly registerArtifact: (
    groupId: string,
    artifactId: string
  ) => Effect.Effect<RegisterArtifactResponse, ArtifactFailure>
  /** `PUT /schema/{schemaHrn}`: the local service's way to create a schema from uploaded files. */
  readonly createSchema: (
    schemaHrn: string,
    request: CreateSchemaRequest
  ) => Effect.Effect<SchemaDetails, ArtifactFailure>
}

const isNotFound = (e: unknown): e is ApiError => e instanceof ApiError && (e.status === 404 || e.status === 403)

export class ArtifactApi extends Context.Tag("catalog-export/client/ArtifactApi")<ArtifactApi, ArtifactApiShape>() {
  static readonly layer: Layer.Layer<ArtifactApi, never, ApiClient | Lookup> = Layer.effect(
    ArtifactApi,
    Effect.gen(function*() {
      const api = yield* ApiClient
      const lookup = yield* Lookup
      const base = lookup.baseUrl({ api: "artifact", version: "v1" })

      const getSchema = Effect.fn("ArtifactApi.getSchema")(function*(schemaHrn: string) {
        const root = yield* base
        return yield* api.json(HttpClientRequest.get(joinUrl(root, `/schema/${schemaHrn}`)), SchemaDetails).pipe(
          Effect.catchIf(
            isNotFound,
            (e) =>
              Effect.fail(
                new SchemaNotFound({
                  hrn: schemaHrn,
                  reason: `not found or not readable with these credentials (${e.status})`
                })
              )
          )
        )
      })

      const listSchemas = Effect.fn("ArtifactApi.listSchemas")(function*(options?: { readonly pageSize?: number }) {
        const root = yield* base
        const items: Array<SchemaInfo> = []
        let url = `${joinUrl(root, "/schema")}?limit=${options?.pageSize ?? 100}`
        const seen = new Set<string>()
        for (;;) {
          const page = yield* api.json(HttpClientRequest.get(url), SchemaList)
          items.push(...page.items)
          if (page.next === undefined || page.next === "" || seen.has(page.next)) return items
          seen.add(page.next)
          url = new URL(page.next, `${joinUrl(root, "/schema")}`).toString()
        }
      })

      const fetchBytes = (url: string) => Effect.map(api.bytes(HttpClientRequest.get(url)), (r) => r.bytes)

      const getVariant = Effect.fn("ArtifactApi.getVariant")(function*(variant: Variant) {
        const root = yield* base
        return yield* fetchBytes(joinUrl(root, `/${variant.url.replace(/^\/+/, "")}`))
      })

      const getArtifactFile = Effect.fn("ArtifactApi.getArtifactFile")(
        function*(artifactHrn: string, fileName: string) {
          const root = yield* base
          return yield* fetchBytes(joinUrl(root, `/artifact/${artifactHrn}/${segment(fileName)}`))
        }
      )

      const getSchemaBundle = Effect.fn("ArtifactApi.getSchemaBundle")(function*(schemaHrn: string) {
        const details = yield* getSchema(schemaHrn)
        const variant = details.variants.find((v) => v.id === SCHEMA_BUNDLE_VARIANT)
        if (variant === undefined) {
          return yield* new SchemaNotFound({
            hrn: schemaHrn,
            reason: `it has no schema bundle (variant "${SCHEMA_BUNDLE_VARIANT}"; variants: ${
              details.variants.map((v) => v.id).join(", ") || "none"
            })`
          })
        }
        return yield* getVariant(variant).pipe(
          Effect.catchIf(
            isNotFound,
            (e) =>
              Effect.fail(
                new SchemaNotFound({
                  hrn: schemaHrn,
                  reason: `its schema bundle ${variant.url} is not readable (${e.status})`
                })
              )
          )
        )
      })

      const putArtifactFile = Effect.fn("ArtifactApi.putArtifactFile")(function*(
        artifactHrn: string,
        fileName: string,
        bytes: Uint8Array,
        contentType = "application/octet-stream"
      ) {
        const root = yield* base
        yield* api.discard(
          HttpClientRequest.put(joinUrl(root, `/artifact/${artifactHrn}/${segment(fileName)}`)).pipe(
            HttpClientRequest.bodyUint8Array(bytes, contentType)
          )
        )
      })

      const registerArtifact = Effect.fn("ArtifactApi.registerArtifact")(
        function*(groupId: string, artifactId: string) {
          const root = yield* base
          return yield* api.json(
            HttpClientRequest.put(joinUrl(root, `/artifact/register/${segment(groupId)}/${segment(artifactId)}`)).pipe(
              HttpClientRequest.bodyUnsafeJson({})
            ),
            RegisterArtifactResponse
          )
        }
      )

      const createSchema = Effect.fn("ArtifactApi.createSchema")(
        function*(schemaHrn: string, request: CreateSchemaRequest) {
          const root = yield* base
          return yield* api.json(
            HttpClientRequest.put(joinUrl(root, `/schema/${schemaHrn}`)).pipe(
              HttpClientRequest.bodyUnsafeJson(request)
            ),
            SchemaDetails
          )
        }
      )

      return ArtifactApi.of({
        getSchema,
        listSchemas,
        getVariant,
        getSchemaBundle,
        getArtifactFile,
        putArtifactFile,
        registerArtifact,
        createSchema
      })
    })
  )
}
