/**
 * Azure Blob Storage for the tests: Azurite (Microsoft's emulator, from npm) on loopback, a free
 * port, in memory, its telemetry off. The SDK may be newer than the emulator: the API version check
 * is skipped. One per test file.
 */
import { BlobServiceClient, type ContainerClient, StorageSharedKeyCredential } from "@azure/storage-blob"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"

/** Azurite's account and key (public, the same in every emulator). */
export const ACCOUNT = "devstoreaccount1"
export const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

/** No Azure setting of the developer's reaches the CLI (and never the identity chain: it would probe the cloud's endpoints). */
export const NO_AZURE_ENV = {
  AZURE_STORAGE_CONNECTION_STRING: "",
  AZURE_STORAGE_ACCOUNT: "",
  AZURE_STORAGE_KEY: "",
  AZURE_STORAGE_SAS_TOKEN: "",
  AZURE_STORAGE_BLOB_ENDPOINT: ""
}

export interface TestAzure {
  /** The account's blob endpoint, `http://127.0.0.1:PORT/devstoreaccount1`. */
  readonly endpoint: string
  readonly container: string
  /** The environment the CLI needs (account, key, endpoint) and nothing of a developer's own Azure setup. */
  readonly env: Record<string, string>
  readonly service: BlobServiceClient
  readonly client: ContainerClient
  /** Blob names below `prefix`, sorted. */
  readonly keys: (prefix?: string) => Promise<Array<string>>
  /** Copies every blob below `prefix` to a new local directory (for DuckDB), returns it. */
  readonly download: (prefix: string) => Promise<string>
  /** Names below `prefix` that have staged blocks and no committed blob: files being uploaded, invisible to readers. */
  readonly staged: (prefix?: string) => Promise<Array<string>>
  readonly close: () => Promise<void>
}

const azuriteBlob = createRequire(import.meta.url).resolve("azurite/dist/src/blob/main.js")

const listening = (child: ChildProcess) =>
  new Promise<number>((resolve, reject) => {
    let out = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      const port = /listens on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1]
      if (port !== undefined) resolve(Number(port))
    })
    child.on("exit", (code) => reject(new Error(`Azurite exited (${code}) before listening:\n${out}`)))
  })

export const startAzurite = async (container = "exports"): Promise<TestAzure> => {
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "azurite-"))
  const child = spawn(process.execPath, [
    azuriteBlob,
    "--blobHost",
    "127.0.0.1",
    "--blobPort",
    "0",
    "--inMemoryPersistence",
    "--extentMemoryLimit",
    "512",
    "--disableTelemetry",
    "--skipApiVersionCheck",
    "--silent"
  ], { cwd: workspace, stdio: ["ignore", "pipe", "inherit"] })
  const port = await listening(child)
  const endpoint = `http://127.0.0.1:${port}/${ACCOUNT}`
  const service = new BlobServiceClient(endpoint, new StorageSharedKeyCredential(ACCOUNT, KEY))
  const client = service.getContainerClient(container)
  await client.create()
  const names = async (prefix: string, includeUncommitedBlobs: boolean) => {
    const out: Array<string> = []
    for await (const blob of client.listBlobsFlat({ prefix, includeUncommitedBlobs })) out.push(blob.name)
    return out.sort()
  }
  const keys = (prefix = "") => names(prefix, false)
  return {
    endpoint,
    container,
    service,
    client,
    env: {
      ...NO_AZURE_ENV,
      AZURE_STORAGE_ACCOUNT: ACCOUNT,
      AZURE_STORAGE_KEY: KEY,
      AZURE_STORAGE_BLOB_ENDPOINT: endpoint
    },
    keys,
    download: async (prefix: string) => {
      const local = fs.mkdtempSync(path.join(os.tmpdir(), "azure-download-"))
      for (const name of await keys(prefix)) {
        const file = path.join(local, name.slice(prefix.length).replace(/^\//, ""))
        fs.mkdirSync(path.dirname(file), { recursive: true })
        fs.writeFileSync(file, await client.getBlockBlobClient(name).downloadToBuffer())
      }
      return local
    },
    staged: async (prefix = "") => {
      const committed = new Set(await keys(prefix))
      return (await names(prefix, true)).filter((name) => !committed.has(name))
    },
    close: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill()
      await exited
      fs.rmSync(workspace, { recursive: true, force: true })
    }
  }
}
