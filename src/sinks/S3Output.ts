import type { S3Client } from "@aws-sdk/client-s3"
import {
  AbortMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand
} from "@aws-sdk/client-s3"
import type { Landing } from "./FileOutput.ts"
import { describeStoreFailure } from "./ObjectStore.ts"
import { PartedOutput } from "./PartedOutput.ts"
import type { SinkFailureFields } from "./SinkFailure.ts"

/**
 * A file streamed into an S3-API store (S3, GCS's XML API) as a multipart upload under its final key,
 * completed when the file is published (Destination.publish); a small file is one PUT.
 */
export class S3Output extends PartedOutput<{ PartNumber: number; ETag: string }> {
  private upload: Promise<string> | undefined

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly key: string,
    path: string
  ) {
    super(path)
  }

  protected async sendPart(PartNumber: number, Body: Uint8Array) {
    this.upload ??= this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: this.key })).then((
      r
    ) => r.UploadId!)
    const UploadId = await this.upload
    const sent = await this.client.send(
      new UploadPartCommand({ Bucket: this.bucket, Key: this.key, UploadId, PartNumber, Body })
    )
    return { PartNumber, ETag: sent.ETag! }
  }

  protected async storeWhole(Body: Uint8Array): Promise<Landing> {
    const stored = await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.key, Body }))
    return { _tag: "Stored", etag: stored.ETag }
  }

  protected async landing(parts: ReadonlyArray<{ PartNumber: number; ETag: string }>): Promise<Landing> {
    return { _tag: "Upload", uploadId: await this.upload!, parts }
  }

  protected discard(parts: Promise<unknown>): void {
    const upload = this.upload
    if (upload === undefined) return
    // Best effort: what is left is aborted by the next commit (or the bucket's lifecycle rule).
    void parts.then(() => upload).then(
      (UploadId) => this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key, UploadId })),
      () => undefined
    ).catch(() => undefined)
  }

  protected describe(cause: unknown): SinkFailureFields {
    return describeStoreFailure(this.path, "upload", cause)
  }
}
