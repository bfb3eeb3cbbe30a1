import type { BlockBlobClient } from "@azure/storage-blob"
import { randomBytes } from "node:crypto"
import { blockId, describeAzureFailure } from "./Azure.ts"
import type { Landing } from "./FileOutput.ts"
import { PartedOutput } from "./PartedOutput.ts"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * A file streamed into Azure Blob Storage as blocks staged under its final name (Put Block): they
 * are no blob until committed (Put Block List) when the file is published (Destination.publish); a
 * small file is one Put Blob. Blocks never committed (a killed run) are no blob and cannot be
 * deleted: Azure discards them when the name is next committed, or after seven days.
 */
export class AzureOutput extends PartedOutput<string> {
  private readonly token = randomBytes(8).toString("hex")

  constructor(private readonly blob: BlockBlobClient, path: string) {
    super(path)
  }

  protected async sendPart(n: number, body: Uint8Array) {
    const id = blockId(this.token, n)
    await this.blob.stageBlock(id, body, body.byteLength)
    return id
  }

  protected async storeWhole(body: Uint8Array): Promise<Landing> {
    const stored = await this.blob.upload(body, body.byteLength)
    return { _tag: "Stored", etag: stored.etag }
  }

  protected landing(blockIds: ReadonlyArray<string>): Promise<Landing> {
    return Promise.resolve({ _tag: "Blocks", blockIds })
  }

  protected discard(): void {
    // Staged blocks cannot be removed (see above); nothing to do.
  }

  protected describe(cause: unknown): SinkFailureFields {
    return describeAzureFailure(this.path, "upload", cause)
  }
}
