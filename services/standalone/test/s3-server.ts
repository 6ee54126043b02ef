import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** The S3 settings of a local server, in the variables the files service reads. */
export interface S3Server {
  env: {
    S3_ENDPOINT: string;
    S3_BUCKET: string;
    S3_ACCESS_KEY_ID: string;
    S3_SECRET_ACCESS_KEY: string;
  };
  /** Where s3rver keeps the bucket's objects. */
  directory: string;
  close(): Promise<void>;
}

/**
 * A real server speaking the S3 protocol (s3rver, checking SigV4 signatures) on a free loopback
 * port, over a temporary directory, with one empty bucket.
 */
export async function startS3Server(bucket = "rowbase-files"): Promise<S3Server> {
  const { default: S3rver } = await import("s3rver");
  const directory = await mkdtemp(path.join(os.tmpdir(), "rowbase-s3-"));
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const address = await server.run();
  return {
    env: {
      S3_ENDPOINT: `http://127.0.0.1:${address.port}`,
      S3_BUCKET: bucket,
      S3_ACCESS_KEY_ID: "S3RVER",
      S3_SECRET_ACCESS_KEY: "S3RVER",
    },
    directory,
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
