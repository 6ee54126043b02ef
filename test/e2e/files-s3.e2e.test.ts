import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { filePart, fileTable, PNG, pair, raw, sha256 } from "./support/files.js";
import { client } from "./support/http.js";
import { createTenant, RECORD_TEST_RATE_LIMITS } from "./support/records.js";
import { type S3Endpoint, startS3Endpoint } from "./support/s3.js";

/**
 * The file routes on the S3 backend: the same routes through the gateway with the files service
 * keeping the bytes in a bucket of a real S3-protocol server (MinIO where a container engine
 * runs, s3rver here). The directory backend's routes are in files.e2e.test.ts.
 */

let s3: S3Endpoint;
let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  s3 = await startS3Endpoint();
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS, ...s3.env });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
  await s3?.close();
});

async function bucketKeys(): Promise<string[]> {
  const bucket = new S3Client({
    endpoint: s3.env.S3_ENDPOINT,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: {
      accessKeyId: s3.env.S3_ACCESS_KEY_ID,
      secretAccessKey: s3.env.S3_SECRET_ACCESS_KEY,
    },
  });
  try {
    const listed = await bucket.send(new ListObjectsV2Command({ Bucket: s3.env.S3_BUCKET }));
    return (listed.Contents ?? []).map((object) => object.Key!).sort();
  } finally {
    bucket.destroy();
  }
}

describe(`files on S3`, () => {
  it("uploads into the bucket, serves bytes and ranges, signs URLs, deletes and restores", async () => {
    const tenant = await createTenant(sys, api, { plan: "business" });
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const before = await bucketKeys();

    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "../../etc/pixel.png", "image/png"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    expect(uploaded.json.data.file).toMatchObject({
      file_name: "pixel.png",
      content_type: "image/png",
      size: PNG.length,
      sha256: sha256(PNG),
    });
    const added = (await bucketKeys()).filter((key) => !before.includes(key));
    expect(added).toHaveLength(1);
    expect(added[0]).not.toContain("pixel");

    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(served.headers.get("etag")).toBe(`"${sha256(PNG)}"`);
    const range = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=8-15" },
    });
    expect(range.status).toBe(206);
    expect(range.headers.get("content-range")).toBe(`bytes 8-15/${PNG.length}`);
    expect(range.bytes.equals(PNG.subarray(8, 16))).toBe(true);

    const url = await api("GET", "/file/url", {
      token: tenant.readToken,
      query: { row_id: String(rowId), field_id: String(fieldId), download: "true" },
    });
    expect(url.status).toBe(200);
    const signedPath = new URL(url.body.data.url).pathname;
    const signed = await raw(sys.baseUrl, "GET", signedPath);
    expect(signed.status).toBe(200);
    expect(signed.bytes.equals(PNG)).toBe(true);
    expect(signed.headers.get("content-disposition")).toMatch(/^attachment;/);
    const tampered = await raw(sys.baseUrl, "GET", `${signedPath.slice(0, -2)}xx`);
    expect(tampered.status).toBe(404);
    expect(tampered.json).toEqual({ message: "file_not_found", data: {} });

    const deleted = await api("POST", "/file/delete", {
      token: tenant.writeToken,
      query: { row_id: String(rowId), field_id: String(fieldId) },
    });
    expect(deleted.body.data.file.deleted_at).not.toBeNull();
    const gone = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(gone.status).toBe(404);
    const restored = await api("POST", "/file/restore", {
      token: tenant.writeToken,
      query: { row_id: String(rowId), field_id: String(fieldId) },
    });
    expect(restored.body.data.file).toMatchObject({ sha256: sha256(PNG), deleted_at: null });
    const again = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(again.bytes.equals(PNG)).toBe(true);
  });

  it("refuses an upload past the field's size limit and leaves nothing in the bucket", async () => {
    const tenant = await createTenant(sys, api, { plan: "business" });
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const limited = await api("POST", "/field/update", {
      token: tenant.owner.token,
      query: { field_id: String(fieldId) },
      body: { options: { max_size: 100 } },
    });
    expect(limited.status, JSON.stringify(limited.body)).toBe(200);
    const before = await bucketKeys();
    const refused = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowIds[0]!, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(Buffer.alloc(5000, 1), "big.bin"),
    });
    expect(refused.status).toBe(413);
    expect(refused.json).toEqual({ message: "file_too_large", data: {} });
    await expect.poll(bucketKeys, { timeout: 5000 }).toEqual(before);
    const serve = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowIds[0]!, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(serve.status).toBe(404);
  });
});
