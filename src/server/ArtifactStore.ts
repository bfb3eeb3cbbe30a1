import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"

/**
 * SQLite access for the artifact API: registered artifacts, their files, schemas and grants. Same
 * database as Store.ts. Artifact files (schema bundles, a few KB to MB) live in SQLite itself, apart
 * from the content-addressed blob packs, whose garbage collection knows only layer blobs.
 */
export const statements: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS artifacts (
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    owner_app TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_id)
  )`,
  `CREATE TABLE IF NOT EXISTS artifact_files (
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    version TEXT NOT NULL,
    file_name TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes BLOB NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_id, version, file_name)
  )`,
  `CREATE TABLE IF NOT EXISTS schemas (
    hrn TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    version TEXT NOT NULL,
    name TEXT NOT NULL,
    summary TEXT,
    owner_app TEXT NOT NULL,
    variants TEXT NOT NULL,
    created INTEGER NOT NULL,
    updated INTEGER NOT NULL
  )`,
  /** Read (and write) grants on artifacts and schemas, like catalog grants; `resource` is `group:artifact` or a schema HRN. */
  `CREATE TABLE IF NOT EXISTS artifact_grants (
    resource TEXT NOT NULL,
    app_id TEXT NOT NULL,
    can_read INTEGER NOT NULL,
    can_write INTEGER NOT NULL,
    PRIMARY KEY (resource, app_id)
  )`
]

export interface ArtifactRow {
  readonly group_id: string
  readonly artifact_id: string
  readonly owner_app: string
  readonly created: number
}

export interface ArtifactFileRow {
  readonly group_id: string
  readonly artifact_id: string
  readonly version: string
  readonly file_name: string
  readonly sha256: string
  readonly created: number
}

export interface SchemaRow {
  readonly hrn: string
  readonly group_id: string
  readonly artifact_id: string
  readonly version: string
  readonly name: string
  readonly summary: string | null
  readonly owner_app: string
  /** JSON array of {id, url} */
  readonly variants: string
  readonly created: number
  readonly updated: number
}

export interface GrantRow {
  readonly can_read: number
  readonly can_write: number
}

export const artifactResource = (groupId: string, artifactId: string) => `${groupId}:${artifactId}`

const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
  const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

  return {
    artifact: (groupId: string, artifactId: string) =>
      sql<ArtifactRow>`SELECT * FROM artifacts WHERE group_id = ${groupId} AND artifact_id = ${artifactId}`.pipe(Effect.map(first)),
    insertArtifact: (row: ArtifactRow) => sql`INSERT INTO artifacts ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    file: (groupId: string, artifactId: string, version: string, fileName: string) =>
      sql<ArtifactFileRow>`SELECT group_id, artifact_id, version, file_name, sha256, created FROM artifact_files
        WHERE group_id = ${groupId} AND artifact_id = ${artifactId} AND version = ${version} AND file_name = ${fileName}`.pipe(Effect.map(first)),
    fileBytes: (groupId: string, artifactId: string, version: string, fileName: string) =>
      sql<{ bytes: Uint8Array }>`SELECT bytes FROM artifact_files
        WHERE group_id = ${groupId} AND artifact_id = ${artifactId} AND version = ${version} AND file_name = ${fileName}`.pipe(
        Effect.map((rows) => rows[0]?.bytes)
      ),
    insertFile: (row: ArtifactFileRow & { readonly bytes: Uint8Array }) => sql`INSERT INTO artifact_files ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    /** The first and last upload of a version of an artifact (its `created` and `updated`). */
    versionTimes: (groupId: string, artifactId: string, version: string) =>
      sql<{ created: number | null; updated: number | null }>`SELECT MIN(created) AS created, MAX(created) AS updated FROM artifact_files
        WHERE group_id = ${groupId} AND artifact_id = ${artifactId} AND version = ${version}`.pipe(Effect.map((rows) => rows[0]!)),
    schema: (hrn: string) => sql<SchemaRow>`SELECT * FROM schemas WHERE hrn = ${hrn}`.pipe(Effect.map(first)),
    insertSchema: (row: SchemaRow) => sql`INSERT INTO schemas ${sql.insert(row as any)}`.pipe(Effect.asVoid),
    /** Schemas the application created or was granted read on, ordered by HRN. */
    readableSchemas: (appId: string) =>
      sql<SchemaRow>`SELECT s.* FROM schemas s WHERE s.owner_app = ${appId}
        OR EXISTS (SELECT 1 FROM artifact_grants g WHERE g.resource = s.hrn AND g.app_id = ${appId} AND g.can_read = 1)
        ORDER BY s.hrn`,
    grantOf: (resource: string, appId: string) =>
      sql<GrantRow>`SELECT can_read, can_write FROM artifact_grants WHERE resource = ${resource} AND app_id = ${appId}`.pipe(Effect.map(first)),
    grant: (resource: string, appId: string, read: boolean, write: boolean) =>
      sql`INSERT INTO artifact_grants (resource, app_id, can_read, can_write) VALUES (${resource}, ${appId}, ${read ? 1 : 0}, ${write ? 1 : 0})
        ON CONFLICT (resource, app_id) DO UPDATE SET can_read = excluded.can_read, can_write = excluded.can_write`.pipe(Effect.asVoid)
  }
})

export type ArtifactStoreShape = Effect.Effect.Success<typeof make>

export class ArtifactStore extends Context.Tag("catalog-export/server/ArtifactStore")<ArtifactStore, ArtifactStoreShape>() {
  static readonly layer: Layer.Layer<ArtifactStore, SqlError, SqlClient.SqlClient> = Layer.effect(ArtifactStore, make)
}
