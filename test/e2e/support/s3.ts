import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import S3rver from "s3rver";

/** A server speaking the S3 protocol, as the files service's `S3_*` variables. */
export interface S3Endpoint {
  kind: "minio" | "s3rver";
  env: Record<"S3_ENDPOINT" | "S3_BUCKET" | "S3_ACCESS_KEY_ID" | "S3_SECRET_ACCESS_KEY", string>;
  close(): Promise<void>;
}

/**
 * MinIO in a container where a container engine runs (testcontainers), else s3rver on a free
 * loopback port over a temporary directory; either way with one empty bucket.
 */
export async function startS3Endpoint(bucket = "rowbase-files"): Promise<S3Endpoint> {
  const tc = await import("testcontainers");
  const engine = await tc.getContainerRuntimeClient().then(
    () => true,
    () => false,
  );
  if (engine) {
    const { MinioContainer } = await import("@testcontainers/minio");
    const minio = await new MinioContainer("minio/minio:RELEASE.2025-04-22T22-12-26Z").start();
    const env = {
      S3_ENDPOINT: minio.getConnectionUrl(),
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: minio.getUsername(),
      S3_SECRET_ACCESS_KEY: minio.getPassword(),
    };
    const s3 = new S3Client({
      endpoint: env.S3_ENDPOINT,
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY },
    });
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s3.destroy();
    return { kind: "minio", env, close: async () => void (await minio.stop()) };
  }
  const directory = await mkdtemp(path.join(os.tmpdir(), "rowbase-s3-e2e-"));
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const address = await server.run();
  return {
    kind: "s3rver",
    env: {
      S3_ENDPOINT: `http://127.0.0.1:${address.port}`,
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
    },
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
