import { optionalUrl, port, secret, serviceEnv, wholeNumber } from "@rowbase/kit";
import { z } from "zod";

const emptyToUndefined = (value: unknown) => (value === "" ? undefined : value);
const optionalText = z.preprocess(emptyToUndefined, z.string().min(1).optional());

const S3_KEYS = ["S3_ENDPOINT", "S3_BUCKET", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"] as const;

export const filesEnv = z
  .object({
    ...serviceEnv.shape,
    NATS_URL: optionalUrl,
    GRPC_PORT: port(50055),
    /** The organization service: members' roles and plans (`http://host:port`). */
    ORGANIZATION_GRPC_URL: z.url(),
    /** The catalog service: table schemas, to check that a field is a file field. */
    CATALOG_GRPC_URL: z.url(),
    /** The records service: which table and organization a row belongs to. */
    RECORDS_GRPC_URL: z.url(),
    /** The directory backend's root, used when S3 is not configured. */
    FILES_DIR: z.string().min(1).default("./.rowbase/files"),
    /** S3-compatible object storage; the four are set together or not at all. */
    S3_ENDPOINT: optionalUrl,
    S3_BUCKET: optionalText,
    S3_ACCESS_KEY_ID: optionalText,
    S3_SECRET_ACCESS_KEY: optionalText,
    S3_REGION: z.preprocess(emptyToUndefined, z.string().min(1).default("us-east-1")),
    /** Signs the tokens of signed file URLs; shared by every replica. */
    FILE_URL_SECRET: secret,
    /** Life of a signed file URL. */
    FILE_URL_TTL_SECONDS: wholeNumber(1, 604_800, 3600),
  })
  .superRefine((env, ctx) => {
    const set = S3_KEYS.filter((key) => env[key] !== undefined);
    if (set.length > 0 && set.length < S3_KEYS.length) {
      for (const key of S3_KEYS.filter((k) => env[k] === undefined)) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `required with ${set.join(", ")} (the S3 settings go together)`,
        });
      }
    }
  });

export type FilesConfig = z.output<typeof filesEnv>;

/** Where the bytes live: the S3 settings when all are given, else the directory. */
export type StorageSettings =
  | { kind: "directory"; dir: string }
  | {
      kind: "s3";
      endpoint: string;
      bucket: string;
      region: string;
      accessKeyId: string;
      secretAccessKey: string;
    };

export function storageSettingsOf(config: FilesConfig): StorageSettings {
  if (
    config.S3_ENDPOINT &&
    config.S3_BUCKET &&
    config.S3_ACCESS_KEY_ID &&
    config.S3_SECRET_ACCESS_KEY
  ) {
    return {
      kind: "s3",
      endpoint: config.S3_ENDPOINT,
      bucket: config.S3_BUCKET,
      region: config.S3_REGION,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
    };
  }
  return { kind: "directory", dir: config.FILES_DIR };
}
