import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import { describe, expect, it } from "vitest"
import { AutomaticDeletionPending } from "../../pipelines/retention.ts"
import { EXIT_MEANINGS, exitCodeOf, JobFailed } from "../../src/cli/Exit.ts"
import { CatalogExists, OperationFailed } from "../../src/client/AdminApi.ts"
import { SchemaNotFound } from "../../src/client/ArtifactApi.ts"
import {
  ApiError,
  ApiNotFound,
  AuthError,
  CatalogNotFound,
  CredentialsError,
  RegionUnavailable,
  ResponseDecodeError,
  RetryBudgetExhausted,
  TransportError
} from "../../src/client/Errors.ts"
import { SubscriptionConflict, SubscriptionNotFound } from "../../src/client/SubscriptionsApi.ts"
import { DecodeError, DecodeSetupError } from "../../src/decode/Errors.ts"
import { ExitCode, type HasExitCode, UsageError } from "../../src/domain/ExitCode.ts"
import { InvalidHrn } from "../../src/domain/Hrn.ts"
import {
  IntegrityError,
  InvalidLayerId,
  LayerNotExportable,
  LayerNotVersioned,
  NotFound,
  OutputConflict,
  ShardsUnfinished
} from "../../src/export/Errors.ts"
import { JobConfigError } from "../../src/export/JobConfig.ts"
import { FileUnreadable, JsonInvalid } from "../../src/export/Json.ts"
import { ExportLocationError } from "../../src/retention/ExportLocation.ts"
import { RetentionRefused } from "../../src/retention/Policy.ts"
import { StartFailed } from "../../src/server/LocalService.ts"
import { SinkError, SinkErrorReason } from "../../src/sinks/SinkError.ts"

/**
 * Every exit code the documentation promises (DESIGN.md and README "Exit codes": 0 done; 2 bad input;
 * 3 authentication or permission; 4 not found; 5 transient, safe to run again; 6 integrity; 7 a
 * sharded export committed before its shards finished; 1 anything else), and the errors that
 * produce each. Each error declares its code where it is defined (src/domain/ExitCode.ts); one
 * without cannot reach a command (it does not compile), and a renamed tag or a changed code fails
 * here, before a cron wrapper retries what it should not.
 */

const request = { method: "GET", url: "https://service.example/metadata/v1/catalogs/x/versions/latest" }
const api = (status: number) => new ApiError({ ...request, status })
const transport = new TransportError({ ...request, reason: "socket hang up", code: "ECONNRESET", retriable: true })
const sink = (reason: SinkErrorReason) => new SinkError({ path: "/out/x.parquet", reason, message: reason })

const DOCUMENTED: Record<ExitCode, ReadonlyArray<readonly [string, HasExitCode & { readonly _tag: string }]>> = {
  [ExitCode.ok]: [],
  [ExitCode.failure]: [
    ["TransportError", transport],
    ["ResponseDecodeError", new ResponseDecodeError({ ...request, status: 200, reason: "not JSON" })],
    ["OperationFailed", new OperationFailed({ href: "/status/1", reason: "failed" })],
    ["ExportLocationError", new ExportLocationError({ message: "cannot read" })],
    ["JsonInvalid", new JsonInvalid({ notJson: true, detail: "Unexpected token" })],
    ["FileUnreadable", new FileUnreadable({ file: "/x.json", why: "the file does not exist" })],
    ["AutomaticDeletionPending", new AutomaticDeletionPending({ catalogHrn: "hrn:here:data:::c" })],
    ["StartFailed", new StartFailed({ cause: new Error("listen EADDRINUSE") })],
    ["ApiError", api(409)],
    ...([
      "DiskFull",
      "PermissionDenied",
      "ReadOnlyFileSystem",
      "NotFound",
      "TooManyOpenFiles",
      "InvalidRow",
      "Encode",
      "Io",
      "Installation"
    ]
      .map((reason) => ["SinkError", sink(reason as SinkErrorReason)] as const))
  ],
  [ExitCode.usage]: [
    ["UsageError", new UsageError({ message: "--parts must be a positive integer, got 0." })],
    ["InvalidHrn", new InvalidHrn({ input: "x", reason: "too short" })],
    ["JobConfigError", new JobConfigError({ message: "Job config x.json is invalid" })],
    [
      "LayerNotExportable",
      new LayerNotExportable({ catalogHrn: "hrn:here:data:::c", layerId: "s", layerType: "stream" })
    ],
    ["LayerNotVersioned", new LayerNotVersioned({ catalogHrn: "hrn:here:data:::c", layerId: "v" })],
    ["InvalidLayerId", new InvalidLayerId({ layerId: "../x" })],
    ["RetentionRefused", new RetentionRefused({ message: "Refusing" })],
    ["CatalogExists", new CatalogExists({ id: "c" })],
    ["SubscriptionConflict", new SubscriptionConflict({ detail: "exists" })],
    ["DecodeSetupError", new DecodeSetupError({ layer: "l", reason: "no schema" })],
    ["ApiError", api(400)],
    ["ApiError", api(416)],
    ["SinkError", sink("NoSuchBucket")],
    ["SinkError", sink("InvalidOptions")]
  ],
  [ExitCode.auth]: [
    ["CredentialsError", new CredentialsError({ path: "/c.properties", reason: "the file does not exist" })],
    ["AuthError", new AuthError({ endpoint: "https://account.example/oauth2/token", status: 401, reason: "refused" })],
    ["ApiError", api(401)],
    ["ApiError", api(403)],
    ["SinkError", sink("AccessDenied")]
  ],
  [ExitCode.notFound]: [
    ["NotFound", new NotFound({ what: "layer", message: "no layer" })],
    ["CatalogNotFound", new CatalogNotFound({ hrn: "hrn:here:data:::c", status: 403 })],
    ["ApiNotFound", new ApiNotFound({ api: "blob", version: "v1", lookupUrl: "https://l.example", available: [] })],
    ["SubscriptionNotFound", new SubscriptionNotFound({ hrn: "hrn:here:pipeline:::s", status: 404 })],
    ["SchemaNotFound", new SchemaNotFound({ hrn: "hrn:here:schema:::g:a:1", reason: "no such schema" })],
    ["ApiError", api(404)]
  ],
  [ExitCode.transient]: [
    [
      "RetryBudgetExhausted",
      new RetryBudgetExhausted({ ...request, retries: 20, elapsedMs: 600_000, lastError: api(503) })
    ],
    ["RegionUnavailable", new RegionUnavailable({ ...request, failures: 5, lastError: transport })],
    ["ApiError", api(408)],
    ["ApiError", api(429)],
    ["ApiError", api(500)],
    ["ApiError", api(503)],
    ["SinkError", sink("Unavailable")]
  ],
  [ExitCode.integrity]: [
    ["IntegrityError", new IntegrityError({ message: "checksum mismatch" })],
    ["DecodeError", new DecodeError({ layer: "l", partition: "p", dataHandle: "h", reason: "truncated" })],
    ["OutputConflict", new OutputConflict({ message: "another export" })]
  ],
  [ExitCode.unfinished]: [
    ["ShardsUnfinished", new ShardsUnfinished({ plan: "/out/c/l/version=1/_plan.json", missing: [1], broken: [] })]
  ]
}

describe("exit codes", () => {
  it("are the documented ones, each with what it tells whoever runs the command next", () => {
    expect(Object.keys(DOCUMENTED).map(Number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    expect(Object.keys(EXIT_MEANINGS).map(Number)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    for (const meaning of Object.values(EXIT_MEANINGS)) expect(meaning.length).toBeGreaterThan(20)
  })

  it("are those of the errors that produce them, by tag", () => {
    for (const [code, errors] of Object.entries(DOCUMENTED)) {
      for (const [tag, error] of errors) {
        expect(error._tag).toBe(tag)
        expect(exitCodeOf(error), `${tag}: ${(error as unknown as Error).message}`).toBe(Number(code))
      }
    }
    // Every exit code but 0 has an error that produces it.
    expect(Object.entries(DOCUMENTED).filter(([code, errors]) => code !== "0" && errors.length === 0)).toEqual([])
  })

  it("are 2 for what the argument parser refuses, and the deciding one of a job that failed in part", () => {
    expect(exitCodeOf(ValidationError.invalidValue(HelpDoc.p("--format must be one of parquet, arrow, both")))).toBe(2)
    expect(exitCodeOf(ValidationError.missingFlag(HelpDoc.p("--catalog")))).toBe(2)
    expect(exitCodeOf(new JobFailed({ exitCode: ExitCode.transient, message: "2 of 3 layers failed" }))).toBe(5)
  })

  it("of the output's failures: every reason of a SinkError has its line above", () => {
    const listed = Object.values(DOCUMENTED).flat().flatMap(([, e]) => e instanceof SinkError ? [e.reason] : [])
    expect([...listed].sort()).toEqual([...SinkErrorReason.literals].sort())
  })

  it("are said by every error: one without does not compile, and none is guessed", () => {
    const unclassified = new Error("no exit code")
    // @ts-expect-error an error without an exit code is refused by the compiler (and so by every command: src/cli/commands.ts)
    const code = exitCodeOf(unclassified)
    expect(code).toBeUndefined()
  })
})
