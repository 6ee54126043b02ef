import { type ConfigError, parseConfig } from "@rowbase/kit";
import { describe, expect, it } from "vitest";
import { filesEnv, storageSettingsOf } from "./config.js";

const BASE = {
  DATABASE_URL: "postgres://localhost/rowbase",
  INTERNAL_JWT_SECRET: "x".repeat(32),
  FILE_URL_SECRET: "y".repeat(32),
  ORGANIZATION_GRPC_URL: "http://localhost:50052",
  CATALOG_GRPC_URL: "http://localhost:50053",
  RECORDS_GRPC_URL: "http://localhost:50054",
};

const S3 = {
  S3_ENDPOINT: "http://localhost:9000",
  S3_BUCKET: "files",
  S3_ACCESS_KEY_ID: "key",
  S3_SECRET_ACCESS_KEY: "secret",
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    parseConfig(filesEnv, env);
  } catch (error) {
    return (error as ConfigError).problems;
  }
  return [];
}

describe("filesEnv", () => {
  it("defaults to the directory backend, port 50055 and one-hour URLs", () => {
    const config = parseConfig(filesEnv, BASE);
    expect(config).toMatchObject({
      GRPC_PORT: 50055,
      FILES_DIR: "./.rowbase/files",
      FILE_URL_TTL_SECONDS: 3600,
    });
    expect(storageSettingsOf(config)).toEqual({ kind: "directory", dir: "./.rowbase/files" });
  });

  it("uses S3 when all four settings are given", () => {
    const config = parseConfig(filesEnv, { ...BASE, ...S3, S3_REGION: "" });
    expect(storageSettingsOf(config)).toEqual({
      kind: "s3",
      endpoint: "http://localhost:9000",
      bucket: "files",
      region: "us-east-1",
      accessKeyId: "key",
      secretAccessKey: "secret",
    });
  });

  it("refuses some S3 settings without the others, and weak secrets", () => {
    expect(
      problemsOf({ ...BASE, S3_BUCKET: "files", S3_ENDPOINT: "http://localhost:9000" }),
    ).toEqual([
      "S3_ACCESS_KEY_ID: required with S3_ENDPOINT, S3_BUCKET (the S3 settings go together)",
      "S3_SECRET_ACCESS_KEY: required with S3_ENDPOINT, S3_BUCKET (the S3 settings go together)",
    ]);
    expect(problemsOf({ ...BASE, FILE_URL_SECRET: "short" })).toEqual([
      "FILE_URL_SECRET: must be at least 32 characters",
    ]);
    expect(problemsOf({ ...BASE, FILE_URL_TTL_SECONDS: "0" })).toHaveLength(1);
    expect(problemsOf({ ...BASE, ...S3, S3_ENDPOINT: "" })).toHaveLength(1);
  });
});
