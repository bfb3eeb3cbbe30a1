/**
 * Exports into Azure Blob Storage (az://, abfss://): Azurite, Microsoft's emulator, on loopback; the
 * real CLI with the environment Azure users set (an account and key, a SAS, a connection string).
 * Everything written is read back from the container and checked by DuckDB against what the service
 * holds; files are staged as blocks, and nothing is a blob until whole.
 */
import {
  AccountSASPermissions,
  AccountSASResourceTypes,
  AccountSASServices,
  generateAccountSASQueryParameters,
  StorageSharedKeyCredential
} from "@azure/storage-blob"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { expectMatchesService } from "../reliability/support.ts"
import { ACCOUNT, KEY, NO_AZURE_ENV, startAzurite, type TestAzure } from "../support/azurite.ts"
import { cli } from "../support/cli.ts"
import { readParquet } from "../support/duckdb.ts"
import { DEMO } from "../support/service.ts"
import {
  type Context,
  expectCommitted,
  expectRefused,
  exportArgs,
  exportsToStore,
  runWith,
  startExportService,
  type StoreUnderTest
} from "./objectStores.ts"

let azure: TestAzure
let service: Awaited<ReturnType<typeof startExportService>>

beforeAll(async () => {
  ;[service, azure] = await Promise.all([startExportService(), startAzurite()])
})
afterAll(async () => {
  await azure?.close()
  await service?.close()
})

const underTest = (out: (prefix: string) => string, env: () => Record<string, string>): StoreUnderTest => ({
  out,
  get env() {
    return env()
  },
  keys: (prefix) => azure.keys(prefix),
  download: (prefix) => azure.download(prefix),
  pending: (prefix) => azure.staged(prefix),
  keepsStaged: true
})
const az = underTest((prefix) => `az://${azure.container}/${prefix}`, () => azure.env)
const context = (store: StoreUnderTest = az): Context => ({ ...service, store })

/** A SAS of the account, as the portal makes them: the blob service, `permissions` (e.g. "racwdl"), an hour. */
const sas = (permissions: string) =>
  generateAccountSASQueryParameters({
    permissions: AccountSASPermissions.parse(permissions),
    services: AccountSASServices.parse("b").toString(),
    resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
    expiresOn: new Date(Date.now() + 3600_000)
  }, new StorageSharedKeyCredential(ACCOUNT, KEY)).toString()

const connectionString = () =>
  `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${KEY};BlobEndpoint=${azure.endpoint};`

describe("export to az://container/prefix", () => {
  exportsToStore(() => context(), { bigFile: true, shards: true })
})

describe("export to abfss://container@account.dfs.core.windows.net/prefix", () => {
  it("takes the form Spark and Databricks users write, with a connection string's account, key and endpoint", async () => {
    const out = `abfss://${azure.container}@${ACCOUNT}.dfs.core.windows.net/lake`
    const store = underTest(() => out, () => ({ ...NO_AZURE_ENV, AZURE_STORAGE_CONNECTION_STRING: connectionString() }))
    const result = await runWith(context(store))(exportArgs(out))
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(`-> ${out}/demo/places/version=0\n`)
    expectMatchesService(
      await readParquet(path.join(await azure.download("lake"), "demo/places/version=0")),
      service.expected
    )
    await expectCommitted(store, "lake")
  })
})

describe("check probes the container with a blob it writes and removes", () => {
  const probe = (out: string, env: Record<string, string>) =>
    cli([
      "check",
      "--catalog",
      DEMO,
      "--lookup-url",
      service.svc.lookupUrl,
      "--credentials",
      service.credentials,
      "--out",
      out
    ], { env: { ...NO_AZURE_ENV, ...env } })
  const endpoint = () => ({ AZURE_STORAGE_ACCOUNT: ACCOUNT, AZURE_STORAGE_BLOB_ENDPOINT: azure.endpoint })

  it.each([
    ["an account key", () => ({ ...endpoint(), AZURE_STORAGE_KEY: KEY })],
    ["a SAS token", () => ({ ...endpoint(), AZURE_STORAGE_SAS_TOKEN: sas("racwdl") })],
    ["a connection string", () => ({ AZURE_STORAGE_CONNECTION_STRING: connectionString() })]
  ])("writable with %s", async (_, env) => {
    const before = await azure.keys()
    const out = `az://${azure.container}/probe`
    const ok = await probe(out, env())
    expect(ok.code, ok.stdout + ok.stderr).toBe(0)
    expect(ok.stdout).toContain(`output          ${out}: writable (a probe object written and removed)\n`)
    expect(await azure.keys()).toEqual(before)
  })

  it.each([
    {
      name: "an unknown container",
      out: "az://no-such-container/x",
      env: () => azure.env,
      code: 2,
      says: /az:\/\/no-such-container.*does not exist \(ContainerNotFound\)/
    },
    {
      // DefaultAzureCredential, with no identity to find here: no service principal, workload or
      // managed identity, no Azure CLI login (its configuration an empty directory).
      name: "no key, SAS or connection string, and no Azure identity",
      out: "az://exports/x",
      env: () => ({
        AZURE_STORAGE_ACCOUNT: ACCOUNT,
        AZURE_CLIENT_ID: "",
        AZURE_TENANT_ID: "",
        AZURE_CLIENT_SECRET: "",
        AZURE_FEDERATED_TOKEN_FILE: "",
        IDENTITY_ENDPOINT: "",
        MSI_ENDPOINT: "",
        AZURE_CONFIG_DIR: fs.mkdtempSync(path.join(os.tmpdir(), "no-azure-cli-"))
      }),
      code: 3,
      says: /no Azure credentials could be used \(\w+\)\. No key or SAS is set, so an Azure identity was used/
    },
    {
      name: "a SAS without write permission",
      out: "az://exports/x",
      env: () => ({ ...endpoint(), AZURE_STORAGE_SAS_TOKEN: sas("rl") }),
      code: 3,
      says:
        /refused the credentials or the permission \(AuthorizationPermissionMismatch, HTTP 403\)\. Check AZURE_STORAGE_SAS_TOKEN/
    }
  ])("$name: exit $code", async ({ out, env, code, says }) => {
    const failed = await probe(out, env())
    expect(failed.code, failed.stdout).toBe(code)
    expect(failed.stdout).toMatch(says)
    expect(failed.stdout).not.toContain("sig=")
  })
})

describe("bad output locations", () => {
  const WRONG_KEY = Buffer.from("not-the-key-of-this-account").toString("base64")
  const cases: ReadonlyArray<{ name: string; out: string; env?: Record<string, string>; code: number; says: RegExp }> =
    [
      {
        name: "an unknown container",
        out: "az://no-such-container/x",
        code: 2,
        says:
          /Cannot list az:\/\/no-such-container\/x: the container az:\/\/no-such-container does not exist \(ContainerNotFound\)\. Check the container name/
      },
      {
        name: "a wrong account key",
        out: "az://exports/denied",
        env: { AZURE_STORAGE_KEY: WRONG_KEY },
        code: 3,
        says:
          /refused the credentials or the permission \(Authori[sz]ationFailure, HTTP 403\)\. Check AZURE_STORAGE_KEY: an access key of the storage account devstoreaccount1/
      },
      {
        name: "no storage account",
        out: "az://exports/x",
        env: { AZURE_STORAGE_ACCOUNT: "", AZURE_STORAGE_KEY: "" },
        code: 2,
        says: /no storage account is configured: set AZURE_STORAGE_ACCOUNT/
      },
      {
        name: "a key of another account than the URL's",
        out: "abfss://exports@otheraccount.dfs.core.windows.net/x",
        code: 2,
        says: /names the storage account otheraccount, but AZURE_STORAGE_ACCOUNT is devstoreaccount1/
      },
      {
        name: "no valid container name",
        out: "az://Not_A_Container/x",
        code: 2,
        says: /is not a valid az:\/\/container\/prefix URL; check the container name/
      }
    ]
  it.each(cases)("$name: one sentence, exit $code, nothing in the container", async ({ out, env, code, says }) => {
    await expectRefused(context(), out, { code, says, ...(env ? { env } : {}) }, [KEY, WRONG_KEY])
  })
})
