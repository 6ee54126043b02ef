import { randomBytes } from "node:crypto";
import http from "node:http";
import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUp } from "./support/accounts.js";
import {
  counted,
  enterprise,
  filePart,
  fileTable,
  PNG,
  pair,
  partialFiles,
  raw,
  sha256,
  storageUsage,
  storedFiles,
} from "./support/files.js";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  createTenant,
  ISO_MILLIS,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/**
 * The file routes through the whole system: the gateway streams multipart uploads into the files
 * service, which stores the bytes in a directory, and serves them back with their headers,
 * ranges, conditional answers and signed links; refused and abandoned uploads leave nothing;
 * quotas are the plans' (enterprise plans set with the admin command). A second system has a
 * short signed-URL lifetime and a small upload ceiling. API calls and transfer: see
 * files-quotas.e2e.test.ts.
 */

type Api = ReturnType<typeof client>;

const HTML = Buffer.from("<!DOCTYPE html><html><body><script>alert(document.cookie)</script>");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let sys: TestSystem;
let api: Api;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
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
      "cache-control": "private, no-cache",
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

  it("stream a file of many 64 KiB chunks through, answering its FileInfo", async () => {
    const content = Buffer.concat([PNG, randomBytes(300_000)]);
    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(content, "Grüße.png"),
    });
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    expect(uploaded.json).toEqual({
      message: "success",
      data: {
        file: {
          row_id: rowId,
          field_id: fieldId,
          file_name: "Grüße.png",
          content_type: "image/png",
          size: content.length,
          sha256: sha256(content),
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
    expect(served.bytes.equals(content)).toBe(true);
    expect(served.headers.get("content-disposition")).toBe(
      `inline; filename="Gr__e.png"; filename*=UTF-8''Gr%C3%BC%C3%9Fe.png`,
    );
  });

  it("answer one range with 206, and the whole file for several or a malformed one", async () => {
    const content = Buffer.from("0123456789abcdefghijklmnopqrstuvwxyz");
    const uploaded = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(content, "digits.txt"),
    });
    expect(uploaded.status).toBe(200);
    const get = (range: string) =>
      raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
        token: tenant.readToken,
        headers: { range },
      });
    const size = content.length;
    for (const [range, first, last] of [
      ["bytes=0-9", 0, 9],
      ["bytes=-5", size - 5, size - 1],
      ["bytes=5-", 5, size - 1],
      ["bytes=30-1000", 30, size - 1],
    ] as const) {
      const response = await get(range);
      expect({ range, status: response.status }).toEqual({ range, status: 206 });
      expect(response.headers.get("content-range")).toBe(`bytes ${first}-${last}/${size}`);
      expect(response.headers.get("content-length")).toBe(String(last - first + 1));
      expect(response.bytes.toString()).toBe(content.subarray(first, last + 1).toString());
    }
    for (const range of ["bytes=0-1,4-5", "bytes=x-y", "items=0-1", "bytes=9-2"]) {
      const response = await get(range);
      expect({ range, status: response.status, body: response.bytes.toString() }).toEqual({
        range,
        status: 200,
        body: content.toString(),
      });
      expect(response.headers.get("content-range")).toBeNull();
    }
    const unsatisfiable = await get(`bytes=${size}-`);
    expect(unsatisfiable.status).toBe(416);
    expect(unsatisfiable.headers.get("content-range")).toBe(`bytes */${size}`);
    expect(unsatisfiable.json).toEqual({ message: "range_not_satisfiable", data: {} });
  });

  it("answer 304 to a matching If-None-Match, and ignore Range for a stale If-Range", async () => {
    const content = Buffer.concat([PNG, Buffer.from("more bytes")]);
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(content, "etag.png"),
    });
    const etag = `"${sha256(content)}"`;
    const serve = (headers: Record<string, string>) =>
      raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
        token: tenant.readToken,
        headers,
      });
    const transferBefore = await counted(sys, "transfer", tenant.orgId);
    for (const header of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
      const response = await serve({ "if-none-match": header });
      expect({ header, status: response.status, length: response.bytes.length }).toEqual({
        header,
        status: 304,
        length: 0,
      });
      expect(response.headers.get("etag")).toBe(etag);
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    }
    // Nothing moved.
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(transferBefore);
    const changed = await serve({ "if-none-match": `"${sha256(PNG)}"` });
    expect(changed.status).toBe(200);
    expect(changed.bytes.equals(content)).toBe(true);

    const stale = await serve({ range: "bytes=0-3", "if-range": '"stale"' });
    expect(stale.status).toBe(200);
    expect(stale.bytes.equals(content)).toBe(true);
    const fresh = await serve({ range: "bytes=0-3", "if-range": etag });
    expect(fresh.status).toBe(206);
    expect(fresh.bytes.equals(content.subarray(0, 4))).toBe(true);

    // A range past the end comes after the preconditions: 304 for a matching If-None-Match, the
    // whole file for a stale If-Range (a download of a longer, older version resumed), and 416
    // only when neither decides.
    const past = `bytes=${content.length + 100}-`;
    const unchanged = await serve({ range: past, "if-none-match": etag });
    expect(unchanged.status).toBe(304);
    expect(unchanged.bytes.length).toBe(0);
    const resumed = await serve({ range: past, "if-range": '"older"' });
    expect(resumed.status).toBe(200);
    expect(resumed.bytes.equals(content)).toBe(true);
    const neither: Record<string, string>[] = [
      { "if-range": etag },
      { "if-none-match": '"older"' },
    ];
    for (const headers of neither) {
      const refused = await serve({ range: past, ...headers });
      expect(refused.status).toBe(416);
      expect(refused.headers.get("content-range")).toBe(`bytes */${content.length}`);
    }
  });

  it("answer HEAD with the headers and no bytes, counting no transfer", async () => {
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "head.png"),
    });
    const before = await counted(sys, "transfer", tenant.orgId);
    const whole = await raw(sys.baseUrl, "HEAD", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
    });
    expect(whole.status).toBe(200);
    expect(whole.bytes.length).toBe(0);
    expect(Object.fromEntries(whole.headers)).toMatchObject({
      "content-type": "image/png",
      "content-length": String(PNG.length),
      etag: `"${sha256(PNG)}"`,
      "content-disposition": `inline; filename="head.png"; filename*=UTF-8''head.png`,
      "x-content-type-options": "nosniff",
    });
    const part = await raw(sys.baseUrl, "HEAD", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.readToken,
      headers: { range: "bytes=0-3" },
    });
    expect(part.status).toBe(206);
    expect(part.headers.get("content-range")).toBe(`bytes 0-3/${PNG.length}`);
    expect(part.bytes.length).toBe(0);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(before);
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
    // No PUBLIC_BASE_URL: the link names the port the gateway listens on (a free one here).
    expect(link.body.data).toEqual({
      url: expect.stringMatching(
        new RegExp(`^http://localhost:${sys.system.port}/file/signed/[A-Za-z0-9_.%-]+$`),
      ),
      expires_at: expect.stringMatching(ISO_MILLIS),
    });
    const lifetime = Date.parse(link.body.data.expires_at) - Date.now();
    expect(lifetime).toBeGreaterThan(3_500_000);
    expect(lifetime).toBeLessThanOrEqual(3_600_000);
    const signedPath = new URL(link.body.data.url).pathname;

    // The link as handed out, whole.
    const served = await raw(sys.baseUrl, "GET", link.body.data.url);
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
      // Bytes a token never holds: refused as a tampered token is, never a 500.
      `/file/signed/${token}%00`,
      `/file/signed/${token}%2F${token}`,
      `/file/signed/%C0%AE${token}`,
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

  it("keep a signed link to a renamed file, and end it with a deleted one for good", async () => {
    const local = await fileTable(api, tenant);
    const [row] = local.rowIds as [number];
    const at = pair(row, local.fieldId);
    await raw(sys.baseUrl, "POST", `/file/upload?${at}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "before.png"),
    });
    const signedPath = await signedPathOf(tenant, row, local.fieldId);
    const renamed = await api("POST", "/file/rename", {
      token: tenant.writeToken,
      query: q({ row_id: row, field_id: local.fieldId }),
      body: { file_name: "after.png" },
    });
    expect(renamed.status).toBe(200);
    // The same bytes: the link serves them, under the name they have now.
    const served = await raw(sys.baseUrl, "GET", signedPath);
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(served.headers.get("content-disposition")).toMatch(/filename="after\.png"/);

    for (const step of ["/file/delete", "/file/restore"]) {
      const done = await api("POST", step, {
        token: tenant.writeToken,
        query: q({ row_id: row, field_id: local.fieldId }),
      });
      expect(done.status).toBe(200);
      // Deleted, the file's link dies, and a restore does not bring it back: a new one is asked.
      const dead = await raw(sys.baseUrl, "GET", signedPath);
      expectError({ status: dead.status, body: dead.json }, 404, "file_not_found");
    }
    const fresh = await raw(sys.baseUrl, "GET", await signedPathOf(tenant, row, local.fieldId));
    expect(fresh.bytes.equals(PNG)).toBe(true);
  });

  it("end a signed link with its record, before the files service has heard of it", async () => {
    const local = await fileTable(api, tenant);
    const [row] = local.rowIds as [number];
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(row, local.fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "doomed.png"),
    });
    const signedPath = await signedPathOf(tenant, row, local.fieldId);
    expect((await raw(sys.baseUrl, "GET", signedPath)).status).toBe(200);
    // The files service applies records.deleted under an exclusive lock on the row's scope
    // (services/files/src/db/scopes.ts): holding it shared keeps the file live in its table,
    // as a stopped consumer or bus would.
    const recordPath = v1(local.table.databaseId, local.table.tableId).record(row);
    await withDb(async (db) => {
      const liveFiles = async () =>
        (
          await db.query(
            "select count(*)::int as n from files.file where row_id = $1 and deleted_at is null",
            [row],
          )
        ).rows[0].n;
      await holdingShared(db, [`files.row:${row}`], async () => {
        const deleted = await api("DELETE", recordPath, { token: tenant.writeToken });
        expect(deleted.status).toBe(200);
        const dead = await raw(sys.baseUrl, "GET", signedPath);
        expectError({ status: dead.status, body: dead.json }, 404, "record_not_found");
        expect(await liveFiles()).toBe(1);
      });
      await expect.poll(liveFiles, { timeout: 10_000 }).toBe(0);
      const still = await raw(sys.baseUrl, "GET", signedPath);
      expectError({ status: still.status, body: still.json }, 404, "file_not_found");
    });
  });

  it("end a signed link with its field, before the files service has heard of it", async () => {
    const local = await fileTable(api, tenant);
    const [row] = local.rowIds as [number];
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(row, local.fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "doomed.png"),
    });
    const signedPath = await signedPathOf(tenant, row, local.fieldId);
    expect((await raw(sys.baseUrl, "GET", signedPath)).status).toBe(200);
    // As for a deleted record above: the shared lock on the field's scope holds off the files
    // service's deletion of its files, as a stopped consumer or bus would.
    await withDb((db) =>
      holdingShared(db, [`files.field:${local.fieldId}`], async () => {
        const deleted = await api("POST", "/field/delete", {
          token: tenant.owner.token,
          query: q({ field_id: local.fieldId }),
        });
        expect(deleted.status).toBe(200);
        const dead = await raw(sys.baseUrl, "GET", signedPath);
        expectError({ status: dead.status, body: dead.json }, 404, "file_not_found");
        expect(dead.bytes.includes(PNG)).toBe(false);
      }),
    );
  });

  it("end a signed link with its organization, before the other services have heard of it", async () => {
    const doomed = await createTenant(sys, api);
    const local = await fileTable(api, doomed);
    const [row] = local.rowIds as [number];
    await raw(sys.baseUrl, "POST", `/file/upload?${pair(row, local.fieldId)}`, {
      token: doomed.writeToken,
      body: filePart(PNG, "doomed.png"),
    });
    const signedPath = await signedPathOf(doomed, row, local.fieldId);
    expect((await raw(sys.baseUrl, "GET", signedPath)).status).toBe(200);
    // Catalog, records and files delete what they hold for a deleted organization under
    // exclusive locks on it: holding them shared keeps its tables, records and files in place,
    // as stopped consumers or a stopped bus would.
    const scopes = ["catalog", "records", "files"].map((s) => `${s}.organization:${doomed.orgId}`);
    await withDb((db) =>
      holdingShared(db, scopes, async () => {
        const deleted = await api("POST", "/organization/delete", {
          token: doomed.owner.token,
          query: q({ organization_id: doomed.orgId }),
        });
        expect(deleted.status).toBe(200);
        const dead = await raw(sys.baseUrl, "GET", signedPath);
        expectError({ status: dead.status, body: dead.json }, 404, "record_not_found");
        expect(dead.bytes.includes(PNG)).toBe(false);
      }),
    );
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
    // A member's session renames too; the name is trimmed. Without ids, no file is named.
    const trimmed = await api("POST", "/file/rename", {
      token: tenant.owner.token,
      query: q({ row_id: rowId, field_id: fieldId }),
      body: { file_name: "  padded.png  " },
    });
    expect(trimmed.status, JSON.stringify(trimmed.body)).toBe(200);
    expect(trimmed.body.data.file).toMatchObject({ file_name: "padded.png", deleted_at: null });
    for (const token of [tenant.writeToken, tenant.owner.token]) {
      const unnamed = await api("POST", "/file/rename", { token, body: { file_name: "x.png" } });
      expectError(unnamed, 404, "file_not_found");
    }
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
    // A rename's field_id defaults to 0, which names no file; a read token naming its own record
    // is refused for what it is all the same, as with any other field id, and nothing changes.
    const fileOfRecord = async () =>
      (
        await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
          token: tenant.readToken,
        })
      ).body.data.record.data[String(fieldId)];
    const before = await fileOfRecord();
    const queries: Record<string, number>[] = [
      { row_id: rowId },
      { row_id: rowId, field_id: fieldId },
    ];
    for (const query of queries) {
      const rename = await api("POST", "/file/rename", {
        token: tenant.readToken,
        query: q(query),
        body: { file_name: "renamed.png" },
      });
      expectError(rename, 403, "token_read_only");
    }
    expect(await fileOfRecord()).toEqual(before);
    const text = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, textFieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "x.png"),
    });
    expectError({ status: text.status, body: text.json }, 400, "field_not_file_type");
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, textFieldId)}`, {
      token: tenant.readToken,
    });
    expectError({ status: served.status, body: served.json }, 400, "field_not_file_type");
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

  it("answer 404 field_not_found for a field that exists nowhere, on every pair route", async () => {
    const other = await fileTable(api, tenant);
    const upload = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "kept.png"),
    });
    expect(upload.status, JSON.stringify(upload.json)).toBe(200);
    const usage = await storageUsage(sys, tenant);
    const stored = (await storedFiles(sys.filesDir)).length;
    const fileOfRecord = async () =>
      (
        await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
          token: tenant.readToken,
        })
      ).body.data.record.data[String(fieldId)];
    const before = await fileOfRecord();
    const routes = (field: number) =>
      [
        ["POST", `/file/upload?${pair(rowId, field)}`, filePart(PNG, "x.png")],
        ["GET", `/file/serve?${pair(rowId, field)}`],
        ["GET", `/file/url?${pair(rowId, field)}`],
        ["POST", `/file/rename?${pair(rowId, field)}`, JSON.stringify({ file_name: "y.png" })],
        ["POST", `/file/delete?${pair(rowId, field)}`],
        ["POST", `/file/restore?${pair(rowId, field)}`],
      ] as const;
    for (const [field, status, code] of [
      [987_654_321, 404, "field_not_found"],
      // Real fields that are not a file field of this record's table: another table's file
      // field, this table's text field.
      [other.fieldId, 400, "field_not_file_type"],
      [textFieldId, 400, "field_not_file_type"],
    ] as const) {
      for (const [method, route, body] of routes(field)) {
        const response = await raw(sys.baseUrl, method, route, {
          token: tenant.writeToken,
          ...(body === undefined ? {} : { body }),
          ...(typeof body === "string" ? { headers: { "content-type": "application/json" } } : {}),
        });
        expect({ route, status: response.status, body: response.json }).toEqual({
          route,
          status,
          body: { message: code, data: {} },
        });
      }
    }
    expect(await fileOfRecord()).toEqual(before);
    expect(await storageUsage(sys, tenant)).toBe(usage);
    expect((await storedFiles(sys.filesDir)).length).toBe(stored);
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
});

/** A connection to the system's database for `work`, closed after. */
async function withDb<T>(work: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
  try {
    return await work(db);
  } finally {
    await db.end();
  }
}

/**
 * Runs `work` while `db` holds the advisory locks `keys` shared, in a transaction rolled back
 * after: the services take them exclusively to apply a deletion, so holding them keeps what
 * they hold in place, as a stopped consumer or bus would.
 */
async function holdingShared(db: pg.Client, keys: string[], work: () => Promise<void>) {
  await db.query("begin");
  try {
    for (const key of keys) {
      await db.query("select pg_advisory_xact_lock_shared(hashtextextended($1, 0))", [key]);
    }
    await work();
  } finally {
    await db.query("rollback");
  }
}

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
    const stored = (await storedFiles(sys.filesDir)).length;
    const usage = await storageUsage(sys, tenant);
    const refused = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(randomBytes(200_000), "big.bin"),
    });
    expectError({ status: refused.status, body: refused.json }, 413, "file_too_large");
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
    });
    expectError({ status: served.status, body: served.json }, 404, "file_not_found");
    expect((await storedFiles(sys.filesDir)).length).toBe(stored);
    expect(await storageUsage(sys, tenant)).toBe(usage);
    // What streamed before the refusal counts no transfer.
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(0);
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
    expect(await storageUsage(sys, tenant)).toBe(stored * size);
    const check = await api("POST", "/file/storage_check", {
      token: tenant.writeToken,
      query: q({ row_id: rowIds[0]!, file_size: 100_000 - stored * size + 1 }),
    });
    expectError(check, 403, "storage_limit_exceeded");
  });
});

describe("files of deleted records", () => {
  it("stop counting toward file_storage_bytes, so a full plan makes room by deleting records", async () => {
    const tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, { "file-storage-bytes": 100_000, "max-file-bytes": 60_000 });
    const { table, fieldId, rowIds } = await fileTable(api, tenant, 3);
    const [first, second, third] = rowIds as [number, number, number];
    const size = 40_000;
    const uploadTo = (rowId: number) =>
      raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
        token: tenant.writeToken,
        body: filePart(randomBytes(size), `${rowId}.bin`),
      });
    // A replaced file counts until purged: the first record holds two files' bytes.
    for (const rowId of [first, first]) expect((await uploadTo(rowId)).status).toBe(200);
    const full = await uploadTo(second);
    expectError({ status: full.status, body: full.json }, 403, "storage_limit_exceeded");
    expect(await storageUsage(sys, tenant)).toBe(2 * size);

    const deleted = await api("DELETE", v1(table.databaseId, table.tableId).record(first), {
      token: tenant.writeToken,
    });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    // Both files went with their record (once files has the deletion), the bytes with them.
    await expect.poll(() => storageUsage(sys, tenant), { timeout: 10_000 }).toBe(0);
    const limits = await api("GET", "/organization/limits", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
    });
    expect(limits.body.data.usage.file_storage_bytes).toBe(0);
    for (const rowId of [second, third]) expect((await uploadTo(rowId)).status).toBe(200);
    expect(await storageUsage(sys, tenant)).toBe(2 * size);

    // Nothing of the deleted record can come back: its record is gone.
    const restored = await api("POST", "/file/restore", {
      token: tenant.writeToken,
      query: q({ row_id: first, field_id: fieldId }),
    });
    expectError(restored, 404, "record_not_found");
    expect(await storageUsage(sys, tenant)).toBe(2 * size);
  });
});

describe("uploads that store nothing", () => {
  let tenant: Tenant;
  let fieldId: number;
  let rowIds: number[];

  beforeAll(async () => {
    tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, {});
    ({ fieldId, rowIds } = await fileTable(api, tenant, 2));
  });

  /** The pair has no file, no bytes were added, none counted as stored or moved. */
  async function expectNothingStored(rowId: number, stored: number) {
    const served = await raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
    });
    expectError({ status: served.status, body: served.json }, 404, "file_not_found");
    expect(await storedFiles(sys.filesDir)).toHaveLength(stored);
    expect(await storageUsage(sys, tenant)).toBe(0);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(0);
  }

  it("refuse a multipart body without exactly one part named file", async () => {
    const rowId = rowIds[0]!;
    const stored = (await storedFiles(sys.filesDir)).length;
    const form = (parts: [name: string, content: Buffer | string, fileName?: string][]) => {
      const data = new FormData();
      for (const [name, content, fileName] of parts) {
        if (fileName === undefined) data.append(name, String(content));
        else data.append(name, new Blob([content]), fileName);
      }
      return data;
    };
    const bodies: [FormData, string][] = [
      [form([["upload", "x", "a.txt"]]), "upload"],
      // The first part streams into the files service before the second one is seen.
      [
        form([
          ["file", randomBytes(150_000), "a.bin"],
          ["file", "y", "b.bin"],
        ]),
        "file",
      ],
      [
        form([
          ["file", "x", "a.txt"],
          ["note", "hello"],
        ]),
        "file",
      ],
      [form([["file", "just text"]]), "file"],
      [form([]), "file"],
    ];
    for (const [body, key] of bodies) {
      const response = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
        token: tenant.writeToken,
        body,
      });
      expect({ key, status: response.status }).toEqual({ key, status: 400 });
      expect(response.json).toMatchObject({
        status_code: 400,
        extra: [{ key, source: "body" }],
      });
    }
    const json = await raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect({ status: json.status, body: json.json }).toEqual({
      status: 400,
      body: {
        status_code: 400,
        detail: "Validation failed for POST /file/upload",
        extra: [
          {
            key: "content-type",
            message: "must be multipart/form-data",
            source: "header",
            code: "invalid_value",
          },
        ],
      },
    });
    await expectNothingStored(rowId, stored);
  });

  it("store nothing when the client goes away mid-upload", async () => {
    const rowId = rowIds[1]!;
    const stored = (await storedFiles(sys.filesDir)).length;
    const boundary = "----gone";
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n` +
        "Content-Type: application/octet-stream\r\n\r\n",
    );
    const request = http.request(new URL(`/file/upload?${pair(rowId, fieldId)}`, sys.baseUrl), {
      method: "POST",
      headers: {
        authorization: `Bearer ${tenant.writeToken}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
        "content-length": String(head.length + 500_000),
      },
    });
    request.on("error", () => {});
    request.write(head);
    request.write(randomBytes(150_000));
    // The bytes are on their way: the gateway reserved transfer for them, and the files service
    // is writing them.
    await expect.poll(() => counted(sys, "transfer", tenant.orgId)).toBeGreaterThan(0);
    await expect.poll(() => partialFiles(sys.filesDir)).toBeGreaterThan(0);
    // A reset, as a client that dies sends; a closed socket would look like a short body.
    request.socket!.resetAndDestroy();
    // The upload was abandoned: its reservation given back, its partial bytes removed.
    await expect.poll(() => counted(sys, "transfer", tenant.orgId)).toBe(0);
    await expect.poll(() => partialFiles(sys.filesDir)).toBe(0);
    await expectNothingStored(rowId, stored);
  });
});

/** A second system: signed URLs that live one second, and uploads of at most CEILING bytes. */
describe("a second system with short-lived URLs and a small upload ceiling", () => {
  const CEILING = 200_000;
  let second: TestSystem;
  let secondApi: Api;
  let stopped = false;

  beforeAll(async () => {
    second = await startTestSystem({
      RATE_LIMITS: RECORD_TEST_RATE_LIMITS,
      FILE_URL_TTL_SECONDS: "1",
      FILE_UPLOAD_MAX_BYTES: String(CEILING),
    });
    secondApi = client(second.baseUrl);
  });

  afterAll(async () => {
    if (!stopped) await second?.stop();
  });

  it("stop serving once FILE_URL_TTL_SECONDS have passed", async () => {
    const tenant = await createTenant(second, secondApi);
    const { fieldId, rowIds } = await fileTable(secondApi, tenant);
    const rowId = rowIds[0]!;
    const uploaded = await raw(second.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(PNG, "brief.png"),
    });
    expect(uploaded.status).toBe(200);
    const link = await secondApi("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(Date.parse(link.body.data.expires_at) - Date.now()).toBeLessThanOrEqual(1_000);
    const signedPath = new URL(link.body.data.url).pathname;
    await sleep(2_100);
    const expired = await raw(second.baseUrl, "GET", signedPath);
    expectError({ status: expired.status, body: expired.json }, 404, "file_not_found");
  });

  it("cut an upload past FILE_UPLOAD_MAX_BYTES with 413, whatever the plan", async () => {
    const tenant = await createTenant(second, secondApi);
    await enterprise(second, tenant, { "max-file-bytes": 10 * CEILING });
    const { fieldId, rowIds } = await fileTable(secondApi, tenant);
    const rowId = rowIds[0]!;
    const stored = (await storedFiles(second.filesDir)).length;
    const refused = await raw(second.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(randomBytes(CEILING + 70_000), "big.bin"),
    });
    expectError({ status: refused.status, body: refused.json }, 413, "file_too_large");
    const served = await raw(second.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
    });
    expectError({ status: served.status, body: served.json }, 404, "file_not_found");
    expect(await storedFiles(second.filesDir)).toHaveLength(stored);
    expect(await storageUsage(second, tenant)).toBe(0);
    expect(await counted(second, "transfer", tenant.orgId)).toBe(0);
    const fits = await raw(second.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
      token: tenant.writeToken,
      body: filePart(randomBytes(CEILING), "fits.bin"),
    });
    expect(fits.status, JSON.stringify(fits.json)).toBe(200);
    expect(fits.json.data.file.size).toBe(CEILING);
  });

  // Last: it stops the system.
  it("leave no call open when the service refuses uploads mid-stream", async () => {
    const tenant = await createTenant(second, secondApi);
    await enterprise(second, tenant, { "max-file-bytes": 1000 });
    const { fieldId, rowIds } = await fileTable(secondApi, tenant);
    for (let i = 0; i < 3; i++) {
      const refused = await raw(
        second.baseUrl,
        "POST",
        `/file/upload?${pair(rowIds[0]!, fieldId)}`,
        { token: tenant.writeToken, body: filePart(randomBytes(150_000), "big.bin") },
      );
      expectError({ status: refused.status, body: refused.json }, 413, "file_too_large");
    }
    // A call whose input stayed open would keep the files service from shutting down.
    stopped = true;
    const outcome = await Promise.race([
      second.stop().then(() => "stopped"),
      sleep(10_000).then(() => "still open"),
    ]);
    expect(outcome).toBe("stopped");
  });
});
