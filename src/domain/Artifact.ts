import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { InvalidHrn, parse } from "./Hrn.ts"

/**
 * The artifact API v1 (platform API `artifact` in lookup): schemas and the Maven-style artifacts that
 * hold their files. Shapes as in the HERE Data SDK for TypeScript (`artifact-api` of
 * `@here/olp-sdk-dataservice-api`): `GET /schema/{schemaHrn}`, `GET /schema` (paged),
 * `PUT /artifact/register/{groupId}/{artifactId}`, `GET|PUT /artifact/{artifactHrn}/{fileName}`.
 *
 * Schema HRN: `hrn:<partition>:schema:::<groupId>:<artifactId>:<version>`; artifact HRN:
 * `hrn:<partition>:artifact:::<groupId>:<artifactId>:<version>`.
 */

/** The variant that holds the schema bundle (a ZIP of .proto files and a compiled descriptor set). */
export const SCHEMA_BUNDLE_VARIANT = "ds"

export const ArtifactInfo = Schema.Struct({
  artifactId: Schema.String,
  created: Schema.String,
  groupId: Schema.String,
  hrn: Schema.String,
  updated: Schema.String,
  version: Schema.String
})
export type ArtifactInfo = typeof ArtifactInfo.Type

export const SchemaInfo = Schema.Struct({
  artifactId: Schema.String,
  created: Schema.String,
  groupId: Schema.String,
  hrn: Schema.String,
  name: Schema.String,
  summary: Schema.optional(Schema.String),
  updated: Schema.String,
  version: Schema.String
})
export type SchemaInfo = typeof SchemaInfo.Type

export const Variant = Schema.Struct({ id: Schema.String, url: Schema.String })
export type Variant = typeof Variant.Type

export const SchemaValidationResult = Schema.Struct({
  module: Schema.String,
  backwardsCompatibility: Schema.optional(Schema.Boolean),
  fileExtension: Schema.optional(Schema.Boolean),
  googleStyle: Schema.optional(Schema.Boolean),
  majorVersionInPackage: Schema.optional(Schema.Boolean),
  packageConsistency: Schema.optional(Schema.Boolean)
})

/** `GET /schema/{schemaHrn}` */
export const SchemaDetails = Schema.Struct({
  schema: SchemaInfo,
  artifacts: Schema.Array(ArtifactInfo),
  schemaValidationResults: Schema.Array(SchemaValidationResult),
  variants: Schema.Array(Variant)
})
export type SchemaDetails = typeof SchemaDetails.Type

/** `GET /schema` */
export const SchemaList = Schema.Struct({
  items: Schema.Array(SchemaInfo),
  next: Schema.optional(Schema.String),
  page: Schema.optional(Schema.Struct({
    from: Schema.optional(Schema.String),
    limit: Schema.optional(Schema.Number),
    order: Schema.String,
    sort: Schema.String
  }))
})
export type SchemaList = typeof SchemaList.Type

/** `PUT /artifact/register/{groupId}/{artifactId}` */
export const RegisterArtifactResponse = Schema.Struct({
  artifactId: Schema.String,
  groupId: Schema.String,
  created: Schema.Boolean,
  hrnPrefix: Schema.String
})
export type RegisterArtifactResponse = typeof RegisterArtifactResponse.Type

/**
 * The local service's way to create a schema (`PUT /schema/{schemaHrn}`); on the platform a schema
 * comes into being when its Maven project is deployed. Each variant names a file already uploaded.
 */
export const CreateSchemaRequest = Schema.Struct({
  name: Schema.optional(Schema.String),
  summary: Schema.optional(Schema.String),
  variants: Schema.Array(Variant)
})
export type CreateSchemaRequest = typeof CreateSchemaRequest.Type

/** Maven coordinates. */
export interface Coordinates {
  readonly partition: string
  readonly groupId: string
  readonly artifactId: string
  readonly version: string
}

const GROUP_ID = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/
const ARTIFACT_ID = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/
const VERSION = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}$/
/** File names in an artifact: no path separators, never `.` or `..`. */
export const FILE_NAME = /^(?!\.\.?$)[A-Za-z0-9_.+-]{1,255}$/

export const isGroupId = (s: string) => GROUP_ID.test(s)
export const isArtifactId = (s: string) => ARTIFACT_ID.test(s)

/** `hrn:<p>:<service>:::<groupId>:<artifactId>:<version>` for service `schema` or `artifact`. */
export const parseCoordinates = (
  input: string,
  service: "schema" | "artifact"
): Either.Either<Coordinates, InvalidHrn> =>
  Either.flatMap(parse(input.trim()), (hrn) => {
    const example = `hrn:here:${service}:::com.example:my-schema_v1:1.0.0`
    const fail = (reason: string) =>
      Either.left(new InvalidHrn({ input, reason: `${reason} (a ${service} HRN looks like ${example})` }))
    if (hrn.service !== service) return fail(`the service is "${hrn.service}", not "${service}"`)
    const parts = hrn.resource.split(":")
    if (parts.length !== 3) return fail("the resource must be <groupId>:<artifactId>:<version>")
    const [groupId, artifactId, version] = parts as [string, string, string]
    if (!GROUP_ID.test(groupId)) return fail(`"${groupId}" is not a valid group id`)
    if (!ARTIFACT_ID.test(artifactId)) return fail(`"${artifactId}" is not a valid artifact id`)
    if (!VERSION.test(version)) return fail(`"${version}" is not a valid version`)
    return Either.right({ partition: hrn.partition, groupId, artifactId, version })
  })

export const formatCoordinates = (c: Coordinates, service: "schema" | "artifact") =>
  `hrn:${c.partition}:${service}:::${c.groupId}:${c.artifactId}:${c.version}`

/** What a variant URL (relative to the artifact API's base URL) names: `artifact/<artifactHrn>/<fileName>`. */
export const variantUrl = (artifactHrn: string, fileName: string) => `artifact/${artifactHrn}/${fileName}`

export const parseVariantUrl = (
  url: string
): { readonly artifactHrn: string; readonly fileName: string } | undefined => {
  const m = /^\/?artifact\/([^/]+)\/([^/]+)$/.exec(url)
  return m === null ? undefined : { artifactHrn: decodeURIComponent(m[1]!), fileName: decodeURIComponent(m[2]!) }
}
