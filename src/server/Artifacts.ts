import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { createHash } from "node:crypto"
import {
  type Coordinates,
  type CreateSchemaRequest,
  formatCoordinates,
  parseCoordinates,
  parseVariantUrl,
  type SchemaDetails,
  type SchemaInfo
} from "../domain/Artifact.ts"
import { artifactResource, ArtifactsRepo, type SchemaRow } from "./db/ArtifactsRepo.ts"
import { badRequest, conflict, dataError, notFound } from "./Reply.ts"

/**
 * The artifact API's rules, shared by its routes and the demo seed. Permissions follow the catalogs':
 * the application that registered an artifact (or created a schema) may read and write it, others
 * only with a grant, and one it may not read answers exactly like one that does not exist (404).
 */

const iso = (millis: number) => new Date(millis).toISOString()

export const parseHrn = (raw: string, service: "schema" | "artifact") =>
  Either.match(parseCoordinates(raw, service), {
    onLeft: (e) => Effect.fail(badRequest(`${service}Hrn`, e.message)),
    onRight: (c) => Effect.succeed(c)
  })

const mayUse = (owner: string, resource: string, appId: string, write: boolean) =>
  Effect.gen(function*() {
    if (owner === appId) return true
    const grant = yield* (yield* ArtifactsRepo).grantOf(resource, appId)
    return grant !== undefined && grant.can_read === 1 && (!write || grant.can_write === 1)
  })

/** The registered artifact if the caller may use it; a missing or invisible one is 404, a read-only one 403 for writes. */
export const artifactFor = (groupId: string, artifactId: string, appId: string, write: boolean) =>
  Effect.gen(function*() {
    const row = yield* (yield* ArtifactsRepo).artifact(groupId, artifactId)
    const resource = artifactResource(groupId, artifactId)
    if (row === undefined || !(yield* mayUse(row.owner_app, resource, appId, false))) {
      return yield* notFound(
        "artifactHrn",
        `artifact ${groupId}:${artifactId} not found; register it first (PUT /artifact/register/${groupId}/${artifactId})`
      )
    }
    if (write && !(yield* mayUse(row.owner_app, resource, appId, true))) {
      return yield* dataError(403, "Forbidden", [{
        name: "artifactHrn",
        error: `no write permission on artifact ${groupId}:${artifactId}`
      }])
    }
    return row
  })

/** Registers `groupId:artifactId` for the caller; registering one's own again is a no-op (`created: false`). */
export const registerArtifact = (groupId: string, artifactId: string, appId: string, partition: string) =>
  Effect.gen(function*() {
    const artifacts = yield* ArtifactsRepo
    const existing = yield* artifacts.artifact(groupId, artifactId)
    if (
      existing !== undefined && !(yield* mayUse(existing.owner_app, artifactResource(groupId, artifactId), appId, true))
    ) {
      return yield* conflict(
        "artifactId",
        `artifact ${groupId}:${artifactId} is registered by another application; choose another group or artifact id`
      )
    }
    if (existing === undefined) {
      yield* artifacts.insertArtifact({
        group_id: groupId,
        artifact_id: artifactId,
        owner_app: appId,
        created: Date.now()
      })
    }
    return {
      groupId,
      artifactId,
      created: existing === undefined,
      hrnPrefix: `hrn:${partition}:artifact:::${groupId}:${artifactId}`
    }
  })

/** Stores a file of a released artifact version; files are immutable, the same bytes again are accepted. */
export const putArtifactFile = (artifact: Coordinates, fileName: string, bytes: Uint8Array, appId: string) =>
  Effect.gen(function*() {
    const artifacts = yield* ArtifactsRepo
    yield* artifactFor(artifact.groupId, artifact.artifactId, appId, true)
    const sha256 = createHash("sha256").update(bytes).digest("hex")
    const existing = yield* artifacts.file(artifact.groupId, artifact.artifactId, artifact.version, fileName)
    if (existing !== undefined) {
      if (existing.sha256 === sha256) return { created: false }
      return yield* conflict(
        "fileName",
        `${fileName} of ${
          formatCoordinates(artifact, "artifact")
        } exists with other content; released artifacts are immutable, publish a new version`
      )
    }
    yield* artifacts.insertFile({
      group_id: artifact.groupId,
      artifact_id: artifact.artifactId,
      version: artifact.version,
      file_name: fileName,
      sha256,
      bytes,
      created: Date.now()
    })
    return { created: true }
  })

export const readArtifactFile = (artifact: Coordinates, fileName: string, appId: string) =>
  Effect.gen(function*() {
    yield* artifactFor(artifact.groupId, artifact.artifactId, appId, false)
    const bytes = yield* (yield* ArtifactsRepo).fileBytes(
      artifact.groupId,
      artifact.artifactId,
      artifact.version,
      fileName
    )
    if (bytes === undefined) {
      return yield* notFound("fileName", `${formatCoordinates(artifact, "artifact")} has no file ${fileName}`)
    }
    return bytes
  })

export const schemaFor = (hrn: string, appId: string) =>
  Effect.gen(function*() {
    const row = yield* (yield* ArtifactsRepo).schema(hrn)
    if (row === undefined || !(yield* mayUse(row.owner_app, row.hrn, appId, false))) {
      return yield* notFound("schemaHrn", `schema ${hrn} not found`)
    }
    return row
  })

export const schemaInfo = (row: SchemaRow): SchemaInfo => ({
  artifactId: row.artifact_id,
  created: iso(row.created),
  groupId: row.group_id,
  hrn: row.hrn,
  name: row.name,
  ...(row.summary === null ? {} : { summary: row.summary }),
  updated: iso(row.updated),
  version: row.version
})

export const schemaDetails = (row: SchemaRow) =>
  Effect.gen(function*() {
    const repo = yield* ArtifactsRepo
    const variants = JSON.parse(row.variants) as SchemaDetails["variants"]
    const artifacts: Array<SchemaDetails["artifacts"][number]> = []
    for (
      const hrn of new Set(
        variants.map((v) => parseVariantUrl(v.url)?.artifactHrn).filter((h): h is string => h !== undefined)
      )
    ) {
      const c = Either.getOrUndefined(parseCoordinates(hrn, "artifact"))
      if (c === undefined) continue
      const times = yield* repo.versionTimes(c.groupId, c.artifactId, c.version)
      artifacts.push({
        artifactId: c.artifactId,
        created: iso(times.created ?? row.created),
        groupId: c.groupId,
        hrn,
        updated: iso(times.updated ?? row.created),
        version: c.version
      })
    }
    return { schema: schemaInfo(row), artifacts, schemaValidationResults: [], variants } satisfies SchemaDetails
  })

/**
 * Creates a schema whose variants name files the caller may read. A schema version is immutable: the
 * same request again answers with the existing schema, a different one is a conflict.
 */
export const createSchema = (schema: Coordinates, request: CreateSchemaRequest, appId: string) =>
  Effect.gen(function*() {
    const artifacts = yield* ArtifactsRepo
    const hrn = formatCoordinates(schema, "schema")
    if (request.variants.length === 0) {
      return yield* badRequest(
        "variants",
        "a schema needs at least one variant (e.g. {\"id\":\"ds\",\"url\":\"artifact/<artifactHrn>/<file>.zip\"})"
      )
    }
    for (const variant of request.variants) {
      const target = parseVariantUrl(variant.url)
      if (target === undefined) {
        return yield* badRequest(
          "variants",
          `variant ${variant.id}: url must be artifact/<artifactHrn>/<fileName>, got '${variant.url}'`
        )
      }
      const artifact = yield* parseHrn(target.artifactHrn, "artifact")
      yield* readArtifactFile(artifact, target.fileName, appId)
    }
    const variants = JSON.stringify(request.variants.map((v) => ({ id: v.id, url: v.url })))
    const existing = yield* artifacts.schema(hrn)
    if (existing !== undefined) {
      const same = existing.owner_app === appId && existing.variants === variants
      if (same) return { row: existing, created: false }
      return yield* conflict(
        "schemaHrn",
        `schema ${hrn} already exists; schema versions are immutable, publish a new version`
      )
    }
    const now = Date.now()
    const row: SchemaRow = {
      hrn,
      group_id: schema.groupId,
      artifact_id: schema.artifactId,
      version: schema.version,
      name: request.name ?? schema.artifactId,
      summary: request.summary ?? null,
      owner_app: appId,
      variants,
      created: now,
      updated: now
    }
    yield* artifacts.insertSchema(row)
    return { row, created: true }
  })

/** Grants (or revokes) another application's permissions on a schema and the artifacts of its variants. */
export const grantSchema = (row: SchemaRow, appId: string, read: boolean, write: boolean) =>
  Effect.gen(function*() {
    const artifacts = yield* ArtifactsRepo
    yield* artifacts.grant(row.hrn, appId, read, write)
    for (const variant of JSON.parse(row.variants) as Array<{ url: string }>) {
      const target = parseVariantUrl(variant.url)
      const c = target === undefined
        ? undefined
        : Either.getOrUndefined(parseCoordinates(target.artifactHrn, "artifact"))
      if (c !== undefined) yield* artifacts.grant(artifactResource(c.groupId, c.artifactId), appId, read, false)
    }
  })
