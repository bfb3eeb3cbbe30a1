import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { CreateSchemaRequest, FILE_NAME, formatCoordinates, isArtifactId, isGroupId } from "../../domain/Artifact.ts"
import { decodeSegment } from "../Access.ts"
import {
  createSchema,
  grantSchema,
  parseHrn,
  putArtifactFile,
  readArtifactFile,
  registerArtifact,
  schemaDetails,
  schemaFor,
  schemaInfo
} from "../Artifacts.ts"
import { Caller, withCaller } from "../Auth.ts"
import { ArtifactsRepo } from "../db/ArtifactsRepo.ts"
import { badRequest, dataError, json } from "../Reply.ts"
import * as RequestBody from "../RequestBody.ts"
import * as SearchParams from "../SearchParams.ts"
import { originOf } from "../Views.ts"

/** The artifact API v1 (a platform API in lookup): schemas and the artifact files behind their variants. */

const BASE = "/artifact/v1"
const DEFAULT_PAGE = 100
const MAX_PAGE = 1000

const param = (name: string) => Effect.map(HttpRouter.params, (params) => decodeSegment(params[name]))

const fileParams = Effect.gen(function*() {
  const artifact = yield* parseHrn(yield* param("artifactHrn"), "artifact")
  const fileName = yield* param("fileName")
  if (!FILE_NAME.test(fileName)) {
    return yield* badRequest("fileName", `invalid file name '${fileName}': use 1-255 characters of [A-Za-z0-9_.+-]`)
  }
  return { artifact, fileName }
})

const getSchema = Effect.gen(function*() {
  const { appId } = yield* Caller
  const hrn = formatCoordinates(yield* parseHrn(yield* param("schemaHrn"), "schema"), "schema")
  return json(200, yield* schemaDetails(yield* schemaFor(hrn, appId)))
})

const putSchema = Effect.gen(function*() {
  const { appId } = yield* Caller
  const schema = yield* parseHrn(yield* param("schemaHrn"), "schema")
  const request = yield* RequestBody.decodeJson(CreateSchemaRequest)
  const { row, created } = yield* createSchema(schema, request, appId)
  return json(created ? 201 : 200, yield* schemaDetails(row))
})

const ListSchemasParams = Schema.Struct({
  limit: Schema.optionalWith(SearchParams.IntegerParam.pipe(Schema.between(1, MAX_PAGE)), {
    default: () => DEFAULT_PAGE
  }),
  from: Schema.optionalWith(SearchParams.IntegerParam.pipe(Schema.nonNegative()), { default: () => 0 }),
  order: Schema.optionalWith(
    SearchParams.Param.pipe(Schema.compose(Schema.Uppercase), Schema.compose(Schema.Literal("ASC", "DESC"))),
    {
      default: () => "ASC" as const
    }
  ),
  sort: Schema.optionalWith(SearchParams.Param.pipe(Schema.compose(Schema.Literal("hrn", "name", "created"))), {
    default: () => "hrn" as const
  })
})

const LIST_SCHEMAS_ERRORS: Readonly<Record<string, string>> = {
  limit: `limit must be an integer from 1 to ${MAX_PAGE}`,
  from: "from must be the `from` of a previous page's next link",
  order: "order must be ASC or DESC",
  sort: "sort must be hrn, name or created"
}

const listSchemas = Effect.gen(function*() {
  const { appId } = yield* Caller
  const request = yield* HttpServerRequest.HttpServerRequest
  const { from, limit, order, sort } = yield* SearchParams.decode(
    ListSchemasParams,
    (name) => badRequest(name, LIST_SCHEMAS_ERRORS[name] ?? "invalid parameter")
  )
  const rows = [...(yield* (yield* ArtifactsRepo).readableSchemas(appId))]
  const key = (
    r: (typeof rows)[number]
  ) => (sort === "created" ? String(r.created).padStart(16, "0") : sort === "name" ? r.name : r.hrn)
  rows.sort((a, b) =>
    (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.hrn < b.hrn ? -1 : 1) * (order === "ASC" ? 1 : -1)
  )
  const page = rows.slice(from, from + limit)
  const nextFrom = from + page.length
  const next = nextFrom < rows.length
    ? `${originOf(request.headers)}${BASE}/schema?${new URLSearchParams({
      limit: String(limit),
      from: String(nextFrom),
      order,
      sort
    })}`
    : undefined
  return json(200, {
    items: page.map(schemaInfo),
    ...(next === undefined ? {} : { next }),
    page: { from: String(from), limit, order, sort }
  })
})

const PermissionRequest = Schema.Struct({
  principal: Schema.Struct({ type: Schema.Literal("User", "App", "Group"), token: Schema.String }),
  permissions: Schema.Array(Schema.Literal("READ", "MODIFY", "SHARE")),
  permitted: Schema.optional(Schema.Boolean)
})

const updatePermission = Effect.gen(function*() {
  const { appId } = yield* Caller
  const hrn = formatCoordinates(yield* parseHrn(yield* param("schemaHrn"), "schema"), "schema")
  const row = yield* schemaFor(hrn, appId)
  if (row.owner_app !== appId) {
    return yield* dataError(403, "Forbidden", [{
      name: "schemaHrn",
      error: `only the application that created ${hrn} may share it`
    }])
  }
  const request = yield* RequestBody.decodeJson(PermissionRequest)
  if (request.principal.type !== "App") {
    return yield* badRequest(
      "principal",
      "the local service knows applications only: use principal.type \"App\" with the application id as token"
    )
  }
  const permitted = request.permitted ?? true
  const read = permitted && request.permissions.length > 0
  yield* grantSchema(row, request.principal.token, read, permitted && request.permissions.includes("MODIFY"))
  return json(200, { principal: request.principal, permissions: request.permissions, permitted })
})

const register = Effect.gen(function*() {
  const { appId } = yield* Caller
  const groupId = yield* param("groupId")
  const artifactId = yield* param("artifactId")
  if (!isGroupId(groupId)) return yield* badRequest("groupId", `invalid group id '${groupId}'`)
  if (!isArtifactId(artifactId)) return yield* badRequest("artifactId", `invalid artifact id '${artifactId}'`)
  const registered = yield* registerArtifact(groupId, artifactId, appId, "local")
  return json(registered.created ? 201 : 200, registered)
})

const getFile = Effect.gen(function*() {
  const { appId } = yield* Caller
  const { artifact, fileName } = yield* fileParams
  const bytes = yield* readArtifactFile(artifact, fileName, appId)
  return HttpServerResponse.uint8Array(bytes, {
    contentType: fileName.endsWith(".zip") ? "application/zip" : "application/octet-stream"
  })
})

const putFile = Effect.gen(function*() {
  const { appId } = yield* Caller
  const { artifact, fileName } = yield* fileParams
  const bytes = yield* RequestBody.bytes
  const { created } = yield* putArtifactFile(artifact, fileName, bytes, appId)
  return HttpServerResponse.empty({ status: created ? 201 : 200 })
})

export const routes = HttpRouter.empty.pipe(
  HttpRouter.get(`${BASE}/schema`, withCaller(listSchemas)),
  HttpRouter.get(`${BASE}/schema/:schemaHrn`, withCaller(getSchema)),
  HttpRouter.put(`${BASE}/schema/:schemaHrn`, withCaller(putSchema)),
  HttpRouter.post(`${BASE}/schema/:schemaHrn/permission`, withCaller(updatePermission)),
  HttpRouter.put(`${BASE}/artifact/register/:groupId/:artifactId`, withCaller(register)),
  HttpRouter.get(`${BASE}/artifact/:artifactHrn/:fileName`, withCaller(getFile)),
  HttpRouter.put(`${BASE}/artifact/:artifactHrn/:fileName`, withCaller(putFile))
)
