import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { startS3Server } from "@rowbase/standalone/testing";

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
  const { env, close } = await startS3Server(bucket);
  return { kind: "s3rver", env, close };
}
