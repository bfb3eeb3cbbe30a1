import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { findAll, findOne, run, single, write } from "./Database.ts"

export const ArtifactRow = Schema.Struct({
  group_id: Schema.String,
  artifact_id: Schema.String,
  owner_app: Schema.String,
  created: Schema.Number
})
export type ArtifactRow = typeof ArtifactRow.Type

export const ArtifactFileRow = Schema.Struct({
  group_id: Schema.String,
  artifact_id: Schema.String,
  version: Schema.String,
  file_name: Schema.String,
  sha256: Schema.String,
  created: Schema.Number
})
export type ArtifactFileRow = typeof ArtifactFileRow.Type

const ArtifactFile = Schema.Struct({ ...ArtifactFileRow.fields, bytes: Schema.Uint8ArrayFromSelf })

export const SchemaRow = Schema.Struct({
  hrn: Schema.String,
  group_id: Schema.String,
  artifact_id: Schema.String,
  version: Schema.String,
  name: Schema.String,
  summary: Schema.NullOr(Schema.String),
  owner_app: Schema.String,
  /** JSON array of {id, url} */
  variants: Schema.String,
  created: Schema.Number,
  updated: Schema.Number
})
export type SchemaRow = typeof SchemaRow.Type

const GrantRow = Schema.Struct({ can_read: Schema.Number, can_write: Schema.Number })
export type GrantRow = typeof GrantRow.Type

const FileKey = ArtifactFileRow.pick("group_id", "artifact_id", "version", "file_name")
const VersionKey = ArtifactFileRow.pick("group_id", "artifact_id", "version")

export const artifactResource = (groupId: string, artifactId: string) => `${groupId}:${artifactId}`

/**
 * The artifact API: registered artifacts, their files (kept in SQLite itself), schemas, and grants
 * on them (`resource` is `group:artifact` or a schema HRN).
 */
export class ArtifactsRepo extends Context.Tag("catalog-export/server/ArtifactsRepo")<ArtifactsRepo, {
  readonly artifact: (groupId: string, artifactId: string) => Effect.Effect<ArtifactRow | undefined>
  readonly insertArtifact: (row: ArtifactRow) => Effect.Effect<void>
  readonly file: (
    groupId: string,
    artifactId: string,
    version: string,
    fileName: string
  ) => Effect.Effect<ArtifactFileRow | undefined>
  readonly fileBytes: (
    groupId: string,
    artifactId: string,
    version: string,
    fileName: string
  ) => Effect.Effect<Uint8Array | undefined>
  readonly insertFile: (row: typeof ArtifactFile.Type) => Effect.Effect<void>
  /** The first and last upload of a version of an artifact (its `created` and `updated`). */
  readonly versionTimes: (
    groupId: string,
    artifactId: string,
    version: string
  ) => Effect.Effect<{ readonly created: number | null; readonly updated: number | null }>
  readonly schema: (hrn: string) => Effect.Effect<SchemaRow | undefined>
  readonly insertSchema: (row: SchemaRow) => Effect.Effect<void>
  /** Schemas the application created or was granted read on, ordered by HRN. */
  readonly readableSchemas: (appId: string) => Effect.Effect<ReadonlyArray<SchemaRow>>
  readonly grantOf: (resource: string, appId: string) => Effect.Effect<GrantRow | undefined>
  readonly grant: (resource: string, appId: string, read: boolean, write: boolean) => Effect.Effect<void>
}>() {
  static readonly layer = Layer.effect(
    ArtifactsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const artifact = findOne({
        Request: ArtifactRow.pick("group_id", "artifact_id"),
        Result: ArtifactRow,
        execute: (k) => sql`SELECT * FROM artifacts WHERE group_id = ${k.group_id} AND artifact_id = ${k.artifact_id}`
      })
      const file = findOne({
        Request: FileKey,
        Result: ArtifactFileRow,
        execute: (k) =>
          sql`SELECT group_id, artifact_id, version, file_name, sha256, created FROM artifact_files
            WHERE group_id = ${k.group_id} AND artifact_id = ${k.artifact_id} AND version = ${k.version} AND file_name = ${k.file_name}`
      })
      const fileBytes = findOne({
        Request: FileKey,
        Result: Schema.Struct({ bytes: Schema.Uint8ArrayFromSelf }),
        execute: (k) =>
          sql`SELECT bytes FROM artifact_files
            WHERE group_id = ${k.group_id} AND artifact_id = ${k.artifact_id} AND version = ${k.version} AND file_name = ${k.file_name}`
      })
      const versionTimes = single({
        Request: VersionKey,
        Result: Schema.Struct({ created: Schema.NullOr(Schema.Number), updated: Schema.NullOr(Schema.Number) }),
        execute: (k) =>
          sql`SELECT MIN(created) AS created, MAX(created) AS updated FROM artifact_files
            WHERE group_id = ${k.group_id} AND artifact_id = ${k.artifact_id} AND version = ${k.version}`
      })
      const grantOf = findOne({
        Request: Schema.Struct({ resource: Schema.String, appId: Schema.String }),
        Result: GrantRow,
        execute: ({ appId, resource }) =>
          sql`SELECT can_read, can_write FROM artifact_grants WHERE resource = ${resource} AND app_id = ${appId}`
      })
      return ArtifactsRepo.of({
        artifact: (group_id, artifact_id) => artifact({ group_id, artifact_id }),
        insertArtifact: write({
          Request: ArtifactRow,
          execute: (row) => sql`INSERT INTO artifacts ${sql.insert(row)}`
        }),
        file: (group_id, artifact_id, version, file_name) => file({ group_id, artifact_id, version, file_name }),
        fileBytes: (group_id, artifact_id, version, file_name) =>
          Effect.map(fileBytes({ group_id, artifact_id, version, file_name }), (row) => row?.bytes),
        insertFile: write({
          Request: ArtifactFile,
          execute: (row) => sql`INSERT INTO artifact_files ${sql.insert(row)}`
        }),
        versionTimes: (group_id, artifact_id, version) => versionTimes({ group_id, artifact_id, version }),
        schema: findOne({
          Request: Schema.String,
          Result: SchemaRow,
          execute: (hrn) => sql`SELECT * FROM schemas WHERE hrn = ${hrn}`
        }),
        insertSchema: write({ Request: SchemaRow, execute: (row) => sql`INSERT INTO schemas ${sql.insert(row)}` }),
        readableSchemas: findAll({
          Request: Schema.String,
          Result: SchemaRow,
          execute: (appId) =>
            sql`SELECT s.* FROM schemas s WHERE s.owner_app = ${appId}
              OR EXISTS (SELECT 1 FROM artifact_grants g WHERE g.resource = s.hrn AND g.app_id = ${appId} AND g.can_read = 1)
              ORDER BY s.hrn`
        }),
        grantOf: (resource, appId) => grantOf({ resource, appId }),
        grant: (resource, appId, read, write) =>
          run(
            sql`INSERT INTO artifact_grants (resource, app_id, can_read, can_write) VALUES (${resource}, ${appId}, ${
              read ? 1 : 0
            }, ${write ? 1 : 0})
            ON CONFLICT (resource, app_id) DO UPDATE SET can_read = excluded.can_read, can_write = excluded.can_write`
          )
      })
    })
  )
}
