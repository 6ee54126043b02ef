import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { callAs, createServiceClient } from "@rowbase/kit";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  ISO_MILLIS,
  RECORD_TEST_RATE_LIMITS,
  setPlan,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";
import { startTestSystem, type TestSystem } from "./support/system.js";

/**
 * SPEC section 7 through the whole system: the gateway streams multipart uploads into the files
 * service, which stores the bytes in a directory, and serves them back with their headers,
 * ranges and signed links; quotas are the plans' (enterprise plans set with the admin command).
 */

type Api = ReturnType<typeof client>;

/** A 1x1 PNG, recognised by its bytes. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
const HTML = Buffer.from("<!DOCTYPE html><html><body><script>alert(document.cookie)</script>");

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

interface Raw {
  status: number;
  headers: Headers;
  bytes: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: tests inspect response bodies freely
  json: any;
}

async function raw(
  baseUrl: string,
  method: string,
  pathAndQuery: string,
  init: { token?: string; headers?: Record<string, string>; body?: FormData } = {},
): Promise<Raw> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const response = await fetch(new URL(pathAndQuery, baseUrl), {
    method,
    headers,
    body: init.body,
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch {}
  return { status: response.status, headers: response.headers, bytes, json };
}

function filePart(content: Buffer, fileName: string, type = "application/octet-stream") {
  const form = new FormData();
  form.append("file", new Blob([content], { type }), fileName);
  return form;
}

const pair = (rowId: number, fieldId: number) => `row_id=${rowId}&field_id=${fieldId}`;

/** A table with a file field and a text field, and `rows` records in it. */
async function fileTable(api: Api, tenant: Tenant, rows = 1) {
  const table = await createTable(api, tenant, [
    { name: "Doc", type: "file" },
    { name: "Title", type: "text" },
  ]);
  const created = await api("POST", v1(table.databaseId, table.tableId).batch, {
    token: tenant.writeToken,
    body: { records: Array.from({ length: rows }, (_, i) => ({ data: { Title: `r${i}` } })) },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const rowIds = (created.body.data.records as { row_id: number }[]).map((r) => r.row_id);
  return { table, fieldId: table.f.Doc!.field_id, textFieldId: table.f.Title!.field_id, rowIds };
}

/** Every regular file under a directory (the directory backend's bytes). */
async function storedFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
}

/** What the files service counts as the organization's stored bytes (GetStorageUsage). */
async function storageUsage(tenant: Tenant): Promise<number> {
  const files = createServiceClient(FilesService, sys.system.grpcUrls.files);
  const options = await callAs(sys.internalJwtSecret, { kind: "service", service: "e2e" }, "e2e");
  const usage = await files.getStorageUsage({ organizationId: BigInt(tenant.orgId) }, options);
  return Number(usage.fileStorageBytes);
}

/** An enterprise plan with generous limits but these. */
async function enterprise(sys: TestSystem, tenant: Tenant, limits: Record<string, number>) {
  const all = {
    records: 10_000,
    "api-calls-per-month": 1_000_000,
    "file-storage-bytes": 1_000_000_000,
    "transfer-bytes-per-month": 1_000_000_000,
    members: 10,
    "max-file-bytes": 100_000_000,
    ...limits,
  };
  await setPlan(
    sys,
    tenant.orgId,
    "enterprise",
    ...Object.entries(all).flatMap(([flag, value]) => [`--${flag}`, String(value)]),
  );
}

let sys: TestSystem;
let api: Api;
let filesDir: string;

beforeAll(async () => {
  filesDir = await mkdtemp(path.join(os.tmpdir(), "rowbase-files-e2e-"));
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS, FILES_DIR: filesDir });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
  await rm(filesDir, { recursive: true, force: true });
});

describe("files", () => {
  let tenant: Tenant;
  let table: TestTable;
  let fieldId: number;
  let textFieldId: number;
  let rowId: number;

  beforeAll(async () => {
    tenant = await createTenant(sys, api, { plan: "business" });
    const created = await fileTable(api, tenant);
    ({ table, fieldId, textFieldId } = created);
    rowId = created.rowIds[0]!;
  });

  it("upload, serve, a range, conditional requests, rename, delete and restore", async () => {
    const check = await raw(
      sys.baseUrl,
      "POST",
      `/file/storage_check?row_id=${rowId}&file_size=${PNG.length}`,
      {
        token: tenant.writeToken,
      },
    );
    expect(check.json).toEqual({ message: "success", data: {} });

    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "pixel.png", "image/png"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    const info = uploaded.json.data.file;
    expect(uploaded.json).toEqual({
      message: "success",
      data: {
        file: {
          row_id: rowId,
          field_id: fieldId,
          file_name: "pixel.png",
          content_type: "image/png",
          size: PNG.length,
          sha256: sha256(PNG),
          created_at: expect.stringMatching(ISO_MILLIS),
          updated_at: expect.stringMatching(ISO_MILLIS),
          deleted_at: null,
        },
      },
    });

    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(Object.fromEntries(served.headers)).toMatchObject({
      "content-type": "image/png",
      "content-length": String(PNG.length),
      etag: `"${sha256(PNG)}"`,
      "accept-ranges": "bytes",
      "content-disposition": `inline; filename="pixel.png"; filename*=UTF-8''pixel.png`,
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; sandbox",
    });

    const range = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=0-9" },
    });
    expect(range.status).toBe(206);
    expect(range.headers.get("content-range")).toBe(`bytes 0-9/${PNG.length}`);
    expect(range.bytes.equals(PNG.subarray(0, 10))).toBe(true);
    const suffix = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=-4" },
    });
    expect(suffix.status).toBe(206);
    expect(suffix.bytes.equals(PNG.subarray(PNG.length - 4))).toBe(true);
    const past = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: `bytes=${PNG.length}-` },
    });
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe(`bytes */${PNG.length}`);
    expect(past.json).toEqual({ message: "range_not_satisfiable", data: {} });
    const notModified = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { "if-none-match": `"${sha256(PNG)}"` },
    });
    expect(notModified.status).toBe(304);
    expect(notModified.bytes.length).toBe(0);

    const renamed = await api("POST", "/file/rename", {
      token: tenant.writeToken,
      query: q({ row_id: rowId, field_id: fieldId }),
      body: { file_name: "Grüße ✓.png" },
    });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    expect(renamed.body.data.file).toEqual({
      ...info,
      file_name: "Grüße ✓.png",
      updated_at: expect.stringMatching(ISO_MILLIS),
    });
    const servedRenamed = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.owner.token,
    });
    expect(servedRenamed.headers.get("content-disposition")).toBe(
      `inline; filename="Gr__e _.png"; filename*=UTF-8''Gr%C3%BC%C3%9Fe%20%E2%9C%93.png`,
    );

    const deleted = await api("POST", "/file/delete", {
      token: tenant.writeToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data.file).toMatchObject({
      sha256: sha256(PNG),
      deleted_at: expect.stringMatching(ISO_MILLIS),
    });
    const gone = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expectError({ status: gone.status, body: gone.json }, 404, "file_not_found");

    const restored = await api("POST", "/file/restore", {
      token: tenant.writeToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(restored.status).toBe(200);
    expect(restored.body.data.file).toMatchObject({ file_name: "Grüße ✓.png", deleted_at: null });
    const back = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(back.bytes.equals(PNG)).toBe(true);
  });

  it("hand out signed URLs that serve without a bearer token, and die with the file", async () => {
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "signed.png"),
    });
    const link = await api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(link.status).toBe(200);
    expect(link.body.data).toEqual({
      url: expect.stringMatching(/^http:\/\/localhost:\d+\/file\/signed\/[A-Za-z0-9_.%-]+$/),
      expires_at: expect.stringMatching(ISO_MILLIS),
    });
    const lifetime = Date.parse(link.body.data.expires_at) - Date.now();
    expect(lifetime).toBeGreaterThan(3_500_000);
    expect(lifetime).toBeLessThanOrEqual(3_600_000);
    const signedPath = new URL(link.body.data.url).pathname;

    const served = await raw(sys.baseUrl, "GET", signedPath);
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(served.headers.get("content-disposition")).toMatch(/^inline; /);
    expect(served.headers.get("x-content-type-options")).toBe("nosniff");
    const ranged = await raw(sys.baseUrl, "GET", signedPath, { headers: { range: "bytes=1-3" } });
    expect(ranged.status).toBe(206);
    expect(ranged.bytes.equals(PNG.subarray(1, 4))).toBe(true);

    const download = await api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId, download: "true" }),
    });
    const attachment = await raw(sys.baseUrl, "GET", new URL(download.body.data.url).pathname);
    expect(attachment.status).toBe(200);
    expect(attachment.headers.get("content-disposition")).toMatch(/^attachment; /);

    const token = signedPath.split("/").at(-1)!;
    const flipped = token.slice(0, -1) + (token.endsWith("A") ? "B" : "A");
    for (const tampered of [
      `/file/signed/${flipped}`,
      `/file/signed/x${token}`,
      "/file/signed/nope",
    ]) {
      const response = await raw(sys.baseUrl, "GET", tampered);
      expectError({ status: response.status, body: response.json }, 404, "file_not_found");
    }

    // Replacing the file kills the link.
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(Buffer.concat([PNG, Buffer.from("v2")]), "v2.png"),
    });
    const dead = await raw(sys.baseUrl, "GET", signedPath);
    expectError({ status: dead.status, body: dead.json }, 404, "file_not_found");
  });

  it("serve HTML uploaded as image/png as an attachment, with nosniff", async () => {
    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(HTML, "cat.png", "image/png"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    expect(uploaded.json.data.file.content_type).toMatch(/^text\/html/);
    for (const [token, pathAndQuery] of [
      [tenant.readToken, `/file/serve?${pair(rowId, fieldId)}`],
      [undefined, await signedPathOf(tenant, rowId, fieldId)],
    ] as const) {
      const served = await raw(sys.baseUrl, "GET", pathAndQuery, { token });
      expect(served.status).toBe(200);
      expect(served.headers.get("content-type")).toMatch(/^text\/html/);
      expect(served.headers.get("content-disposition")).toMatch(/^attachment; filename="cat.png"/);
      expect(served.headers.get("x-content-type-options")).toBe("nosniff");
      expect(served.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    }
  });

  it("refuse path tricks and control characters in a rename", async () => {
    for (const name of ["../x", "a/b", "a\\b", "a\u0000b", "a\nb", "", ".."]) {
      const response = await api("POST", "/file/rename", {
        token: tenant.writeToken,
        query: q({ row_id: rowId, field_id: fieldId }),
        body: { file_name: name },
      });
      expect({ name, status: response.status }).toEqual({ name, status: 400 });
      expect(response.body.extra).toEqual([
        expect.objectContaining({ key: "file_name", source: "body" }),
      ]);
    }
    const unnamed = await api("POST", "/file/rename", {
      token: tenant.writeToken,
      body: { file_name: "x.png" },
    });
    expectError(unnamed, 404, "file_not_found");
  });

  it("keep a read token to serving and links, and a non-file field out", async () => {
    const refused = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      body: filePart(PNG, "no.png"),
    });
    expectError({ status: refused.status, body: refused.json }, 403, "token_read_only");
    for (const route of ["/file/delete", "/file/restore", "/file/storage_check"]) {
      const response = await api("POST", route, {
        token: tenant.readToken,
        query: q(
          route === "/file/storage_check"
            ? { row_id: rowId, file_size: 1 }
            : { row_id: rowId, field_id: fieldId },
        ),
      });
      expectError(response, 403, "token_read_only");
    }
    const text = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, textFieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "x.png"),
    });
    expectError({ status: text.status, body: text.json }, 400, "field_not_file_type");
    const missing = await raw(
      sys.baseUrl,
      "GET",
      `/file/serve?${pair(rowId + 1_000_000, fieldId)}`,
      {
        token: tenant.readToken,
      },
    );
    expectError({ status: missing.status, body: missing.json }, 404, "record_not_found");
  });

  it("hide one organization's files from another, for tokens and sessions", async () => {
    const other = await createTenant(sys, api);
    for (const token of [other.writeToken, other.readToken, other.owner.token]) {
      for (const [method, route] of [
        ["GET", `/file/serve?${pair(rowId, fieldId)}`],
        ["GET", `/file/url?${pair(rowId, fieldId)}`],
        ["POST", `/file/delete?${pair(rowId, fieldId)}`],
      ] as const) {
        const response = await raw(sys.baseUrl, method, route, { token });
        expectError({ status: response.status, body: response.json }, 404, "record_not_found");
      }
      const upload = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
        token,
        body: filePart(PNG, "intruder.png"),
      });
      expectError({ status: upload.status, body: upload.json }, 404, "record_not_found");
    }
    const stranger = await signUp(sys, api);
    const response = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: stranger.token,
    });
    expectError({ status: response.status, body: response.json }, 404, "record_not_found");
  });

  it("show the current FileInfo as the file field's value in record responses", async () => {
    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "in-record.png"),
    });
    expect(uploaded.status).toBe(200);
    const record = await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
      token: tenant.readToken,
    });
    expect(record.status).toBe(200);
    expect(record.body.data.record.data[String(fieldId)]).toEqual(uploaded.json.data.file);
  });

  it("count uploads and serves as the organization's data transfer", async () => {
    const month = new Date().toISOString().slice(0, 7);
    const key = `transfer:${tenant.orgId}:${month}`;
    const before = Number((await sys.system.cache.get(key)) ?? 0);
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "counted.png"),
    });
    await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=0-9" },
    });
    expect(Number(await sys.system.cache.get(key))).toBe(before + PNG.length + 10);
  });
});

async function signedPathOf(tenant: Tenant, rowId: number, fieldId: number): Promise<string> {
  const link = await api("GET", "/file/url", {
    token: tenant.readToken,
    query: q({ row_id: rowId, field_id: fieldId }),
  });
  expect(link.status).toBe(200);
  return new URL(link.body.data.url).pathname;
}

describe("file limits", () => {
  it("refuse an oversize upload with 413, leaving no bytes and no metadata", async () => {
    const tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, { "max-file-bytes": 50_000 });
    const { table, fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const check = await api("POST", "/file/storage_check", {
      token: tenant.writeToken,
      query: q({ row_id: rowId, file_size: 50_001 }),
    });
    expectError(check, 413, "file_too_large");
    const stored = (await storedFiles(filesDir)).length;
    const usage = await storageUsage(tenant);
    const refused = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(randomBytes(200_000), "big.bin"),
    });
    expectError({ status: refused.status, body: refused.json }, 413, "file_too_large");
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
    });
    expectError({ status: served.status, body: served.json }, 404, "file_not_found");
    expect((await storedFiles(filesDir)).length).toBe(stored);
    expect(await storageUsage(tenant)).toBe(usage);
    const record = await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
      token: tenant.readToken,
    });
    expect(record.body.data.record.data[String(fieldId)]).toBeNull();
  });

  it("let parallel uploads racing the storage limit never pass it", async () => {
    const tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, { "file-storage-bytes": 100_000, "max-file-bytes": 60_000 });
    const { fieldId, rowIds } = await fileTable(api, tenant, 8);
    const size = 30_000;
    const results = await Promise.all(
      rowIds.map((rowId) =>
        raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
          token: tenant.writeToken,
          body: filePart(randomBytes(size), `${rowId}.bin`),
        }),
      ),
    );
    const statuses = results.map((result) => result.status);
    const stored = statuses.filter((status) => status === 200).length;
    expect(stored).toBeGreaterThanOrEqual(1);
    expect(stored).toBeLessThanOrEqual(3);
    for (const result of results.filter((r) => r.status !== 200)) {
      expectError({ status: result.status, body: result.json }, 403, "storage_limit_exceeded");
    }
    expect(await storageUsage(tenant)).toBe(stored * size);
    const check = await api("POST", "/file/storage_check", {
      token: tenant.writeToken,
      query: q({ row_id: rowIds[0]!, file_size: 100_000 - stored * size + 1 }),
    });
    expectError(check, 403, "storage_limit_exceeded");
  });

  it("refuse data transfer past the plan's monthly allowance with 403", async () => {
    const tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, { "transfer-bytes-per-month": 100_000 });
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const content = randomBytes(60_000);
    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(content, "a.bin"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    const refused = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expectError({ status: refused.status, body: refused.json }, 403, "transfer_limit_exceeded");
    const part = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=0-39999" },
    });
    expect(part.status).toBe(206);
    const again = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(randomBytes(10), "b.bin"),
    });
    expectError({ status: again.status, body: again.json }, 403, "transfer_limit_exceeded");
  });
});

describe("short-lived signed URLs", () => {
  let short: TestSystem;

  beforeAll(async () => {
    short = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      FILE_URL_TTL_SECONDS: "1",
    });
  });

  afterAll(async () => {
    await short?.stop();
  });

  it("stop serving once FILE_URL_TTL_SECONDS have passed", async () => {
    const shortApi = client(short.baseUrl);
    const tenant = await createTenant(short, shortApi);
    const { fieldId, rowIds } = await fileTable(shortApi, tenant);
    const rowId = rowIds[0]!;
    const uploaded = await raw(short.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "brief.png"),
    });
    expect(uploaded.status).toBe(200);
    const link = await shortApi("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(Date.parse(link.body.data.expires_at) - Date.now()).toBeLessThanOrEqual(1_000);
    const signedPath = new URL(link.body.data.url).pathname;
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const expired = await raw(short.baseUrl, "GET", signedPath);
    expectError({ status: expired.status, body: expired.json }, 404, "file_not_found");
  });
});
