import type { Readable } from "node:stream";
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import {
  assertStorageKey,
  BlobNotFoundError,
  type BlobRange,
  type BlobStore,
  Meter,
  type StoredBlob,
} from "./blob-store.js";

export interface S3BlobStoreOptions {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Bytes held in memory per upload before they go out as one part (S3's minimum is 5 MiB). */
  partBytes?: number;
}

const MIN_PART_BYTES = 5 * 1024 * 1024;

/**
 * Bytes as objects of one bucket of any S3-compatible store (path-style addressing, so MinIO,
 * s3rver, Ceph and the like work). A body of unknown length goes up in parts: up to one part is
 * held in memory, so an upload never holds more than `partBytes` whatever the file's size. A
 * body that fits one part is sent with PutObject; a larger one as a multipart upload, aborted on
 * any failure so that nothing is left behind. (Give the bucket a lifecycle rule that aborts
 * incomplete multipart uploads after a day, for processes killed mid-upload.)
 */
export class S3BlobStore implements BlobStore {
  readonly kind = "s3";
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly partBytes: number;

  constructor(options: S3BlobStoreOptions) {
    this.client = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      forcePathStyle: true,
      credentials: {
        accessKeyId: options.accessKeyId,
        secretAccessKey: options.secretAccessKey,
      },
      // Plain requests: many S3-compatible stores reject the aws-chunked trailing checksums the
      // SDK would otherwise add. Integrity is the service's own SHA-256.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
    this.bucket = options.bucket;
    this.partBytes = Math.max(options.partBytes ?? 8 * 1024 * 1024, MIN_PART_BYTES);
  }

  async put(
    key: string,
    body: AsyncIterable<Uint8Array>,
    options: { maxBytes: number },
  ): Promise<StoredBlob> {
    assertStorageKey(key);
    const meter = new Meter(options.maxBytes);
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    let uploadId: string | undefined;
    const parts: CompletedPart[] = [];

    const sendPart = async () => {
      const data = Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      if (!uploadId) {
        const created = await this.client.send(
          new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key }),
        );
        uploadId = created.UploadId;
        if (!uploadId) throw new Error("S3 CreateMultipartUpload returned no UploadId");
      }
      const partNumber = parts.length + 1;
      const uploaded = await this.client.send(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          PartNumber: partNumber,
          Body: data,
          ContentLength: data.byteLength,
        }),
      );
      parts.push({ PartNumber: partNumber, ETag: uploaded.ETag });
    };

    try {
      for await (const chunk of meter.pass(body)) {
        pending.push(chunk);
        pendingBytes += chunk.byteLength;
        if (pendingBytes >= this.partBytes) await sendPart();
      }
      if (!uploadId) {
        const data = Buffer.concat(pending, pendingBytes);
        pending = [];
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Body: data,
            ContentLength: data.byteLength,
          }),
        );
      } else {
        if (pendingBytes > 0) await sendPart();
        await this.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
          }),
        );
      }
    } catch (error) {
      pending = [];
      if (uploadId) {
        await this.client
          .send(
            new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }),
          )
          .catch(() => undefined);
      }
      throw error;
    }
    return meter.result();
  }

  async get(key: string, range?: BlobRange): Promise<AsyncIterable<Uint8Array>> {
    assertStorageKey(key);
    try {
      const object = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          ...(range ? { Range: `bytes=${range.first}-${range.last}` } : {}),
        }),
      );
      if (!object.Body) throw new BlobNotFoundError(key);
      return object.Body as Readable;
    } catch (error) {
      if (
        error instanceof NoSuchKey ||
        (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404)
      ) {
        throw new BlobNotFoundError(key);
      }
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    assertStorageKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
