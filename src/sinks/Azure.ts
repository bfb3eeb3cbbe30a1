import type { BlobServiceClient, ContainerClient } from "@azure/storage-blob"
import { joinKey, NETWORK_CODES, StoreSettingError, type StoreUrl } from "./ObjectStore.ts"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * Azure Blob Storage destinations (`az://container/prefix`, `abfss://container@account.dfs.core.windows.net/prefix`)
 * in plain code (the encoder thread uses it too and loads no Effect): the container's client from the
 * environment, committing a file's staged blocks, and what failures mean. The Azure SDK is loaded on
 * first use, only when an Azure destination is written.
 *
 * Credentials, the first that is set, as Azure's own tools take them:
 * - AZURE_STORAGE_CONNECTION_STRING (its account, key or SAS, and its BlobEndpoint if any);
 * - AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY (a shared key) or AZURE_STORAGE_SAS_TOKEN;
 * - otherwise an Azure identity, @azure/identity's DefaultAzureCredential (environment, workload
 *   identity, managed identity, Azure CLI, ...) for AZURE_STORAGE_ACCOUNT or the account of an abfss URL.
 * The blob endpoint is `https://<account>.blob.core.windows.net` (the abfss URL's cloud), or
 * AZURE_STORAGE_BLOB_ENDPOINT (an emulator such as Azurite: `http://127.0.0.1:10000/devstoreaccount1`).
 */

type Sdk = typeof import("@azure/storage-blob")

const azureSdk = async (): Promise<Sdk> => {
  const loaded = await import("@azure/storage-blob")
  return "BlobServiceClient" in loaded ? loaded : (loaded as unknown as { default: Sdk }).default
}

type Env = Readonly<Record<string, string | undefined>>
const set = (value: string | undefined) => (value === undefined || value === "" ? undefined : value)

type Source = "connection string" | "key" | "sas" | "identity"

/** Which credentials the environment gives (the same in every thread of the process). */
const sourceOf = (env: Env): Source =>
  set(env.AZURE_STORAGE_CONNECTION_STRING) !== undefined
    ? "connection string"
    : set(env.AZURE_STORAGE_KEY) !== undefined
    ? "key"
    : set(env.AZURE_STORAGE_SAS_TOKEN) !== undefined
    ? "sas"
    : "identity"

/** What to check when the account refuses the credentials (never their values). */
const credentialAdvice = (env: Env): string => {
  switch (sourceOf(env)) {
    case "connection string":
      return "Check AZURE_STORAGE_CONNECTION_STRING (its AccountName with AccountKey, or its SharedAccessSignature)"
    case "key":
      return `Check AZURE_STORAGE_KEY: an access key of the storage account ${
        set(env.AZURE_STORAGE_ACCOUNT) ?? "in the URL"
      } (Security + networking, Access keys)`
    case "sas":
      return "Check AZURE_STORAGE_SAS_TOKEN: a SAS of this storage account, not expired, with read, add, create, write, delete and list permissions"
    case "identity":
      return "No key or SAS is set, so an Azure identity was used (DefaultAzureCredential: environment, workload identity, managed identity, Azure CLI): give it the Storage Blob Data Contributor role on the container, or set AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING"
  }
}

/** A container, reached with the environment's credentials. */
export interface AzureContainer {
  readonly client: ContainerClient
  readonly account: string
  /** The container's URI as tables record files (Spark, Trino, DuckDB and PyIceberg read it): `abfss://container@account.dfs.core.windows.net`. */
  readonly uri: string
}

const DEFAULT_SUFFIX = "core.windows.net"

const clientOptions = { retryOptions: { maxTries: 5 } }

const service = async (url: StoreUrl, env: Env): Promise<BlobServiceClient> => {
  const sdk = await azureSdk()
  const named = url.host?.split(".")[0]
  const connection = set(env.AZURE_STORAGE_CONNECTION_STRING)
  if (connection !== undefined) {
    let client: BlobServiceClient
    try {
      client = sdk.BlobServiceClient.fromConnectionString(connection, clientOptions)
    } catch {
      throw new StoreSettingError(
        "AZURE_STORAGE_CONNECTION_STRING is not a storage account connection string (AccountName=…;AccountKey=…, or BlobEndpoint=…;SharedAccessSignature=…); copy it from the storage account's Access keys."
      )
    }
    if (named !== undefined && client.accountName !== "" && client.accountName !== named) {
      throw new StoreSettingError(
        `the URL names the storage account ${named}, but AZURE_STORAGE_CONNECTION_STRING is one of ${client.accountName}; use the account's own connection string, or its name in the URL.`
      )
    }
    return client
  }
  const given = set(env.AZURE_STORAGE_ACCOUNT)
  const account = named ?? given
  if (account === undefined) {
    throw new StoreSettingError(
      "no storage account is configured: set AZURE_STORAGE_ACCOUNT (with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, or an Azure identity), or AZURE_STORAGE_CONNECTION_STRING, or name the account in the URL: abfss://container@account.dfs.core.windows.net/prefix."
    )
  }
  const key = set(env.AZURE_STORAGE_KEY)
  const sas = set(env.AZURE_STORAGE_SAS_TOKEN)
  if ((key !== undefined || sas !== undefined) && given !== undefined && named !== undefined && given !== named) {
    throw new StoreSettingError(
      `the URL names the storage account ${named}, but AZURE_STORAGE_ACCOUNT is ${given} (whose ${
        key !== undefined ? "AZURE_STORAGE_KEY" : "AZURE_STORAGE_SAS_TOKEN"
      } is set); use one account.`
    )
  }
  const suffix = url.host?.slice(url.host.indexOf(".dfs.") + ".dfs.".length) ?? DEFAULT_SUFFIX
  const endpoint = (set(env.AZURE_STORAGE_BLOB_ENDPOINT) ?? `https://${account}.blob.${suffix}`).replace(/\/+$/, "")
  if (key !== undefined) {
    return new sdk.BlobServiceClient(endpoint, new sdk.StorageSharedKeyCredential(account, key), clientOptions)
  }
  if (sas !== undefined) {
    return new sdk.BlobServiceClient(
      `${endpoint}?${sas.replace(/^\?/, "")}`,
      new sdk.AnonymousCredential(),
      clientOptions
    )
  }
  const { DefaultAzureCredential } = await import("@azure/identity")
  return new sdk.BlobServiceClient(endpoint, new DefaultAzureCredential(), clientOptions)
}

/** The Data Lake host of the account that `client` reaches: the abfss URL's, or derived from a standard blob endpoint. */
const dfsHost = (url: StoreUrl, client: BlobServiceClient) => {
  if (url.host !== undefined) return url.host
  const standard = /^https:\/\/[a-z0-9]+\.blob\.([a-z0-9.-]+?)\/?$/.exec(client.url.split("?")[0]!)
  return `${client.accountName}.dfs.${standard?.[1] ?? DEFAULT_SUFFIX}`
}

const containers = new Map<string, Promise<AzureContainer>>()

/** The container `url` names, with this thread's client for its account (made on first use). */
export const azureContainer = (url: StoreUrl): Promise<AzureContainer> => {
  const id = `${url.host ?? ""}/${url.bucket}`
  let container = containers.get(id)
  if (container === undefined) {
    container = service(url, process.env).then((client) => ({
      client: client.getContainerClient(url.bucket),
      account: client.accountName,
      uri: `abfss://${url.bucket}@${dfsHost(url, client)}`
    }))
    container.catch(() => containers.delete(id))
    containers.set(id, container)
  }
  return container
}

/**
 * The id of block `n` of a file: the same length for every block of every file (Azure requires it of
 * a blob's blocks), unique per writer (`token`), so that blocks a killed run staged are never committed.
 */
export const blockId = (token: string, n: number): string =>
  Buffer.from(`${token}-${String(n).padStart(6, "0")}`).toString("base64")

/** Commits the staged blocks of the file `name` below `url`: the blob appears whole, at once. Returns its ETag. */
export const commitBlocks = async (
  url: StoreUrl,
  name: string,
  blockIds: ReadonlyArray<string>
): Promise<string | undefined> => {
  const { client } = await azureContainer(url)
  const done = await client.getBlockBlobClient(joinKey(url.prefix, name)).commitBlockList([...blockIds])
  return done.etag
}

/** The status and error code of a failed request (the SDK's RestError), else undefined. */
export const statusOf = (cause: unknown): { status: number | undefined; code: string | undefined } => {
  const e = cause as { statusCode?: unknown; code?: unknown; details?: { errorCode?: unknown } }
  return {
    status: typeof e?.statusCode === "number" ? e.statusCode : undefined,
    code: typeof e?.code === "string"
      ? e.code
      : typeof e?.details?.errorCode === "string"
      ? e.details.errorCode
      : undefined
  }
}

const AUTH_CODES = new Set([
  "AuthenticationFailed",
  "AuthorizationFailure",
  "AuthorizationPermissionMismatch",
  "AuthorizationSourceIPMismatch",
  "AuthorizationProtocolMismatch",
  "AuthorizationResourceTypeMismatch",
  "AuthorizationServiceMismatch",
  "InsufficientAccountPermissions",
  "InvalidAuthenticationInfo",
  "NoAuthenticationInformation",
  "KeyBasedAuthenticationNotPermitted"
])
/** @azure/identity's failures: no identity found, or the token refused. */
const IDENTITY_ERRORS = new Set(["CredentialUnavailableError", "AuthenticationError", "AggregateAuthenticationError"])
const BUSY_CODES = new Set(["ServerBusy", "OperationTimedOut", "InternalError", "REQUEST_SEND_ERROR"])

/** The first line of a service message, with anything that looks like a signature or key blanked. */
const scrubbed = (message: string) =>
  message.split("\n")[0]!.replace(/\b(sig|signature|AccountKey|SharedAccessSignature)=[^&\s;]+/gi, "$1=…")

/**
 * Describes a failed Azure request on `location` (`doing`: "upload", "read", "list", ...). Never names
 * a secret. The reasons carry the exit class (SinkFailure.ts): NoSuchBucket 2, AccessDenied 3,
 * Unavailable 5, InvalidOptions 2.
 */
export const describeAzureFailure = (location: string, doing: string, cause: unknown): SinkFailureFields => {
  const env = process.env
  const fail = (reason: SinkFailureFields["reason"], why: string): SinkFailureFields => ({
    path: location,
    reason,
    message: `Cannot ${doing} ${location}: ${why}`
  })
  if (cause instanceof StoreSettingError) return fail("InvalidOptions", cause.message)
  const name = (cause as { name?: unknown })?.name
  if (typeof name === "string" && IDENTITY_ERRORS.has(name)) {
    return fail("AccessDenied", `no Azure credentials could be used (${name}). ${credentialAdvice(env)}.`)
  }
  const { code, status } = statusOf(cause)
  const what = `${code ?? "Error"}${status === undefined ? "" : `, HTTP ${status}`}`
  const container = /^[a-z]+:\/\/[^/]+/i.exec(location)?.[0] ?? location
  if (code === "ContainerNotFound") {
    return fail(
      "NoSuchBucket",
      `the container ${container} does not exist (ContainerNotFound). Check the container name in the URL and the storage account (AZURE_STORAGE_ACCOUNT, the connection string or the abfss URL), or create the container.`
    )
  }
  if ((code !== undefined && AUTH_CODES.has(code)) || status === 401 || status === 403) {
    return fail(
      "AccessDenied",
      `the storage account refused the credentials or the permission (${what}). ${
        credentialAdvice(env)
      }; they must allow listing, reading, writing and deleting blobs in this container.`
    )
  }
  if (code === "ENOTFOUND" && set(env.AZURE_STORAGE_BLOB_ENDPOINT) === undefined) {
    return fail(
      "InvalidOptions",
      "the storage account's endpoint does not resolve (ENOTFOUND). Check the account name (AZURE_STORAGE_ACCOUNT, the connection string or the abfss URL)."
    )
  }
  if (
    (status !== undefined && (status >= 500 || status === 429 || status === 408)) ||
    (code !== undefined && (BUSY_CODES.has(code) || NETWORK_CODES.has(code)))
  ) {
    return fail(
      "Unavailable",
      `the storage account did not answer successfully after retries (${what}). Run the same command again: finished work is kept.`
    )
  }
  const message = (cause as { message?: unknown })?.message
  return fail("Io", `${typeof message === "string" && message !== "" ? scrubbed(message) : "failed"} (${what}).`)
}
