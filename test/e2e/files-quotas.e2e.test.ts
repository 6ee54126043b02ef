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
  raw,
  sha256,
  storageUsage,
  tokenIdOf,
  type UsageEvents,
  usageEvents,
} from "./support/files.js";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import { createTenant, RECORD_TEST_RATE_LIMITS, type Tenant, v1 } from "./support/records.js";

/**
 * The plan's quotas on the file routes through the whole system: every call is one API call
 * of the organization that owns the record (a member's session is charged to the record's
 * organization), up to the plan's allowance; the bytes of uploads, serves and signed downloads
 * are its data transfer, refused before a byte moves. The counters are the gateway's, in the
 * shared cache; the usage events are read from the system's bus as published.
 */

type Api = ReturnType<typeof client>;

let sys: TestSystem;
let api: Api;
let events: UsageEvents;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
  events = await usageEvents(sys, "e2e_files_quotas");
});

afterAll(async () => {
  await events?.stop();
  await sys?.stop();
});

async function upload(
  tenant: Tenant,
  rowId: number,
  fieldId: number,
  content: Buffer,
  name: string,
) {
  return raw(sys.baseUrl, "POST", `/file/upload?${pair(rowId, fieldId)}`, {
    token: tenant.writeToken,
    body: filePart(content, name),
  });
}

/** An upload whose body has no length: sent chunked, in pieces of 16 KiB. */
async function uploadChunked(
  tenant: Tenant,
  rowId: number,
  fieldId: number,
  content: Buffer,
  name: string,
): Promise<{ status: number; json: unknown }> {
  const form = new Response(filePart(content, name));
  const body = Buffer.from(await form.arrayBuffer());
  return new Promise((resolve, reject) => {
    const request = http.request(
      new URL(`/file/upload?${pair(rowId, fieldId)}`, sys.baseUrl),
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${tenant.writeToken}`,
          "content-type": form.headers.get("content-type") ?? "",
          "transfer-encoding": "chunked",
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString("utf8")),
          }),
        );
      },
    );
    // The answer may come (and the connection close) before the whole body went out.
    request.on("error", reject);
    for (let at = 0; at < body.length; at += 16_384) request.write(body.subarray(at, at + 16_384));
    request.end();
  });
}

/**
 * An upload with a `Content-Length` whose body is on its way: the first `sentFirst` bytes of the
 * file have gone out; `finish` sends the rest. `answer` is the response's status.
 */
function uploadOnItsWay(
  tenant: Tenant,
  rowId: number,
  fieldId: number,
  content: Buffer,
  sentFirst: number,
): { answer: Promise<number>; finish: () => void } {
  const boundary = "----on-its-way";
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.bin"\r\n` +
      "Content-Type: application/octet-stream\r\n\r\n",
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  let finish = () => {};
  const answer = new Promise<number>((resolve, reject) => {
    const request = http.request(
      new URL(`/file/upload?${pair(rowId, fieldId)}`, sys.baseUrl),
      {
        method: "POST",
        headers: {
          authorization: `Bearer ${tenant.writeToken}`,
          "content-type": `multipart/form-data; boundary=${boundary}`,
          "content-length": String(head.length + content.length + tail.length),
        },
      },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
      },
    );
    request.on("error", reject);
    request.write(Buffer.concat([head, content.subarray(0, sentFirst)]));
    finish = () => request.end(Buffer.concat([content.subarray(sentFirst), tail]));
  });
  // Awaited by the test; one that fails before then must not leave it unhandled.
  answer.catch(() => {});
  return { answer, finish };
}

function serve(
  token: string | undefined,
  rowId: number,
  fieldId: number,
  headers: Record<string, string> = {},
) {
  return raw(sys.baseUrl, "GET", `/file/serve?${pair(rowId, fieldId)}`, { token, headers });
}

describe("file calls as API calls", () => {
  it("charge a member's session call to the record's organization; others get 404", async () => {
    const tenant = await createTenant(sys, api);
    const other = await createTenant(sys, api);
    const mine = await fileTable(api, tenant);
    const theirs = await fileTable(api, other);
    expect((await upload(tenant, mine.rowIds[0]!, mine.fieldId, PNG, "a.png")).status).toBe(200);
    expect((await upload(other, theirs.rowIds[0]!, theirs.fieldId, PNG, "b.png")).status).toBe(200);
    const stranger = await signUp(sys, api);
    const before = await counted(sys, "api-calls", tenant.orgId);
    const otherBefore = await counted(sys, "api-calls", other.orgId);

    const served = await serve(tenant.owner.token, mine.rowIds[0]!, mine.fieldId);
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(await counted(sys, "api-calls", tenant.orgId)).toBe(before + 1);

    for (const [token, rowId, fieldId] of [
      [stranger.token, mine.rowIds[0]!, mine.fieldId],
      [other.owner.token, mine.rowIds[0]!, mine.fieldId],
      [tenant.owner.token, theirs.rowIds[0]!, theirs.fieldId],
    ] as const) {
      const response = await serve(token, rowId, fieldId);
      expectError({ status: response.status, body: response.json }, 404, "record_not_found");
    }
    // Nobody is charged for a record they cannot see.
    expect(await counted(sys, "api-calls", tenant.orgId)).toBe(before + 1);
    expect(await counted(sys, "api-calls", other.orgId)).toBe(otherBefore);
  });

  it("count every call as an API call of the organization, up to the plan's allowance", async () => {
    const tenant = await createTenant(sys, api);
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const used = await counted(sys, "api-calls", tenant.orgId);
    await enterprise(sys, tenant, { "api-calls-per-month": used + 3 });
    // The gateway publishes its counts as sums per token every second: wait for the earlier ones.
    const [write, read] = [
      await tokenIdOf(api, tenant, tenant.writeToken),
      await tokenIdOf(api, tenant, tenant.readToken),
    ];
    const callsOf = (tokenId: bigint) =>
      events
        .apiCalls(tenant.orgId)
        .filter((event) => event.tokenId === tokenId)
        .reduce((sum, event) => sum + event.apiCalls, 0n);
    const all = () => callsOf(write) + callsOf(read) + callsOf(0n);
    await expect.poll(all, { timeout: 10_000 }).toBe(BigInt(used));
    const before = [callsOf(write), callsOf(read), callsOf(0n)];

    expect((await upload(tenant, rowId, fieldId, PNG, "a.png")).status).toBe(200);
    const link = await api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(link.status).toBe(200);
    const deleted = await api("POST", "/file/delete", {
      token: tenant.owner.token,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(deleted.status).toBe(200);
    const refused = await api("POST", "/file/restore", {
      token: tenant.writeToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expectError(refused, 429, "api_call_limit_exceeded");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await counted(sys, "api-calls", tenant.orgId)).toBe(used + 3);

    // Published with who made them: a token by its id, a member's session as 0.
    await expect.poll(all, { timeout: 10_000 }).toBe(BigInt(used + 3));
    const after = [callsOf(write), callsOf(read), callsOf(0n)];
    expect(after.map((calls, i) => calls - (before[i] ?? 0n))).toEqual([1n, 1n, 1n]);
  });
});

describe("file transfer", () => {
  it("count uploaded and served bytes as the organization's transfer, and publish them", async () => {
    const tenant = await createTenant(sys, api);
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const content = Buffer.concat([PNG, randomBytes(3000)]);
    expect((await upload(tenant, rowId, fieldId, content, "a.png")).status).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(content.length);
    const part = await serve(tenant.owner.token, rowId, fieldId, { range: "bytes=0-99" });
    expect(part.status).toBe(206);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(content.length + 100);
    const whole = await serve(tenant.readToken, rowId, fieldId);
    expect(whole.bytes.equals(content)).toBe(true);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(2 * content.length + 100);

    const [write, read] = [
      await tokenIdOf(api, tenant, tenant.writeToken),
      await tokenIdOf(api, tenant, tenant.readToken),
    ];
    await expect.poll(() => events.transfers(tenant.orgId).length).toBe(3);
    expect(
      events.transfers(tenant.orgId).map((event) => [event.tokenId, event.transferBytes]),
    ).toEqual([
      [write, BigInt(content.length)],
      [0n, 100n],
      [read, BigInt(content.length)],
    ]);
  });

  it("count a signed link's download as transfer, not as an API call", async () => {
    const tenant = await createTenant(sys, api);
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    expect((await upload(tenant, rowId, fieldId, PNG, "a.png")).status).toBe(200);
    const link = await api("GET", "/file/url", {
      token: tenant.readToken,
      query: q({ row_id: rowId, field_id: fieldId }),
    });
    expect(link.status).toBe(200);
    const signedPath = new URL(link.body.data.url).pathname;
    const calls = await counted(sys, "api-calls", tenant.orgId);
    const moved = await counted(sys, "transfer", tenant.orgId);

    const served = await raw(sys.baseUrl, "GET", signedPath);
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    const ranged = await raw(sys.baseUrl, "GET", signedPath, { headers: { range: "bytes=0-3" } });
    expect(ranged.status).toBe(206);
    expect(await counted(sys, "api-calls", tenant.orgId)).toBe(calls);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(moved + PNG.length + 4);
    await expect.poll(() => events.transfers(tenant.orgId).length).toBe(3);
    expect(
      events
        .transfers(tenant.orgId)
        .slice(1)
        .map((event) => [event.tokenId, event.transferBytes]),
    ).toEqual([
      [0n, BigInt(PNG.length)],
      [0n, 4n],
    ]);
  });

  it("count an upload the files service did not answer in time: it may have been stored", async () => {
    const tenant = await createTenant(sys, api);
    const { fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    expect((await upload(tenant, rowId, fieldId, PNG, "a.png")).status).toBe(200);
    const before = await counted(sys, "transfer", tenant.orgId);
    // The files service commits an upload by adding its size to the organization's usage row;
    // holding that row makes it wait past the gateway's deadline with the bytes all sent.
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    try {
      await db.query("begin");
      await db.query("select 1 from files.storage_usage where organization_id = $1 for update", [
        tenant.orgId,
      ]);
      const content = Buffer.concat([PNG, randomBytes(3000)]);
      const slow = await upload(tenant, rowId, fieldId, content, "b.png");
      expectError({ status: slow.status, body: slow.json }, 503, "service_unavailable");
      expect(await counted(sys, "transfer", tenant.orgId)).toBe(before + content.length);
    } finally {
      await db.query("rollback");
      await db.end();
    }
  }, 30_000);

  it("let parallel downloads take exactly what the month allows, each organization its own", async () => {
    const setups = [];
    for (const downloads of [5, 2]) {
      const tenant = await createTenant(sys, api);
      const { fieldId, rowIds } = await fileTable(api, tenant);
      const content = randomBytes(10_000);
      const uploaded = await upload(tenant, rowIds[0]!, fieldId, content, "a.bin");
      expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
      const link = await api("GET", "/file/url", {
        token: tenant.readToken,
        query: q({ row_id: rowIds[0]!, field_id: fieldId }),
      });
      expect(link.status).toBe(200);
      const allowance = (await counted(sys, "transfer", tenant.orgId)) + downloads * 10_000;
      await enterprise(sys, tenant, { "transfer-bytes-per-month": allowance });
      setups.push({ tenant, rowId: rowIds[0]!, fieldId, content, allowance, downloads, link });
    }
    // Tokens, a member's session and the signed link, of both organizations at once.
    const responses = await Promise.all(
      setups.flatMap(({ tenant, rowId, fieldId, link }) =>
        Array.from({ length: 15 }, (_, i) =>
          i % 3 === 0
            ? serve(tenant.readToken, rowId, fieldId)
            : i % 3 === 1
              ? serve(tenant.owner.token, rowId, fieldId)
              : raw(sys.baseUrl, "GET", new URL(link.body.data.url).pathname),
        ),
      ),
    );
    for (const [index, { tenant, content, allowance, downloads }] of setups.entries()) {
      const mine = responses.slice(index * 15, index * 15 + 15);
      const served = mine.filter((response) => response.status === 200);
      expect(served).toHaveLength(downloads);
      for (const response of served) expect(response.bytes.equals(content)).toBe(true);
      for (const response of mine.filter((r) => r.status !== 200)) {
        expectError(
          { status: response.status, body: response.json },
          403,
          "transfer_limit_exceeded",
        );
      }
      expect(await counted(sys, "transfer", tenant.orgId)).toBe(allowance);
    }
  });

  it("let parallel uploads racing the transfer allowance store exactly those that fit", async () => {
    const tenant = await createTenant(sys, api);
    const used = await counted(sys, "transfer", tenant.orgId);
    // Files larger than a reservation block (1 MiB), room for three of them with their bodies'
    // multipart framing, not for a fourth: each upload must hold its whole body or nothing, or
    // six uploads each holding part of the room could all be refused.
    const size = 1_500_000;
    await enterprise(sys, tenant, { "transfer-bytes-per-month": used + 3 * size + 100_000 });
    const { table, fieldId, rowIds } = await fileTable(api, tenant, 6);
    const responses = await Promise.all(
      rowIds.map((rowId) => upload(tenant, rowId, fieldId, randomBytes(size), `${rowId}.bin`)),
    );
    const stored = rowIds.filter((_, i) => responses[i]!.status === 200);
    expect(stored).toHaveLength(3);
    for (const response of responses.filter((r) => r.status !== 200)) {
      expectError({ status: response.status, body: response.json }, 403, "transfer_limit_exceeded");
    }
    // What moved is what was stored, within the allowance; a refused upload left no file.
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(used + 3 * size);
    expect(await storageUsage(sys, tenant)).toBe(3 * size);
    for (const rowId of rowIds) {
      const record = await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
        token: tenant.readToken,
      });
      expect(record.status).toBe(200);
      const file = record.body.data.record.data[String(fieldId)];
      if (stored.includes(rowId)) expect(file).toMatchObject({ size });
      else expect(file ?? null).toBeNull();
    }
  });

  it("hold back no more for an upload than its body can move", async () => {
    const tenant = await createTenant(sys, api);
    // Room for the first file, a block of 1 MiB, and 500,000 bytes more.
    await enterprise(sys, tenant, { "transfer-bytes-per-month": 600_000 + 1_048_576 + 500_000 });
    const { fieldId, rowIds } = await fileTable(api, tenant, 2);
    const content = randomBytes(600_000);
    expect((await upload(tenant, rowIds[0]!, fieldId, content, "big.bin")).status).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(600_000);

    // A small upload whose body is on its way.
    const { answer, finish } = uploadOnItsWay(tenant, rowIds[1]!, fieldId, randomBytes(100), 50);
    await expect.poll(() => counted(sys, "transfer", tenant.orgId)).toBeGreaterThan(600_000);
    // Its reservation leaves the room for the first file to be served once more.
    const served = await serve(tenant.readToken, rowIds[0]!, fieldId);
    expect(served.status, JSON.stringify(served.json)).toBe(200);
    expect(served.bytes.equals(content)).toBe(true);
    finish();
    expect(await answer).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(1_200_100);
  });

  it("hold back no more for an upload than the plan lets its file be", async () => {
    const tenant = await createTenant(sys, api);
    // Room for the first file, the plan's largest file (100,000 bytes), and the first again.
    await enterprise(sys, tenant, {
      "max-file-bytes": 100_000,
      "transfer-bytes-per-month": 60_000 + 100_000 + 60_000,
    });
    const { table, fieldId, rowIds } = await fileTable(api, tenant, 2);
    const content = randomBytes(60_000);
    expect((await upload(tenant, rowIds[0]!, fieldId, content, "a.bin")).status).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(60_000);

    // An upload of 140,000 bytes on its way: its body is not so long that it can only be too
    // large, but its file cannot be more than 100,000 bytes, all it holds.
    const { answer, finish } = uploadOnItsWay(
      tenant,
      rowIds[1]!,
      fieldId,
      randomBytes(140_000),
      50_000,
    );
    await expect.poll(() => counted(sys, "transfer", tenant.orgId)).toBeGreaterThan(60_000);
    const served = await serve(tenant.readToken, rowIds[0]!, fieldId);
    expect(served.status, JSON.stringify(served.json)).toBe(200);
    expect(served.bytes.equals(content)).toBe(true);
    // Past the plan's size the upload is refused, stores nothing and counts nothing.
    finish();
    expect(await answer).toBe(413);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(120_000);
    const record = await api("GET", v1(table.databaseId, table.tableId).record(rowIds[1]!), {
      token: tenant.readToken,
    });
    expect(record.body.data.record.data[String(fieldId)] ?? null).toBeNull();
  });

  it("refuse a file too large for the plan with 413 whatever transfer is left", async () => {
    const tenant = await createTenant(sys, api);
    const used = await counted(sys, "transfer", tenant.orgId);
    // Room for a file of the plan's largest size, not for the bodies of the files below.
    await enterprise(sys, tenant, {
      "max-file-bytes": 100_000,
      "transfer-bytes-per-month": used + 110_000,
    });
    const { table, fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    // A body too long for any file the plan takes, one within the framing's slack of it, and
    // a chunked one: all 413, holding and counting no transfer.
    for (const refused of [
      await upload(tenant, rowId, fieldId, randomBytes(200_000), "huge.bin"),
      await upload(tenant, rowId, fieldId, randomBytes(120_000), "big.bin"),
      await uploadChunked(tenant, rowId, fieldId, randomBytes(200_000), "huge.bin"),
    ]) {
      expectError({ status: refused.status, body: refused.json }, 413, "file_too_large");
      expect(await counted(sys, "transfer", tenant.orgId)).toBe(used);
    }
    const record = await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
      token: tenant.readToken,
    });
    expect(record.body.data.record.data[String(fieldId)] ?? null).toBeNull();
    expect(await storageUsage(sys, tenant)).toBe(0);
    // A file the plan takes moves within what is left.
    const stored = await upload(tenant, rowId, fieldId, randomBytes(100_000), "max.bin");
    expect(stored.status, JSON.stringify(stored.json)).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(used + 100_000);
  });

  it("refuse transfer past the plan with 403 before a byte moves, and give back the rest", async () => {
    const tenant = await createTenant(sys, api);
    await enterprise(sys, tenant, { "transfer-bytes-per-month": 100_000 });
    const { table, fieldId, rowIds } = await fileTable(api, tenant);
    const rowId = rowIds[0]!;
    const content = randomBytes(60_000);
    const uploaded = await upload(tenant, rowId, fieldId, content, "a.bin");
    expect(uploaded.status, JSON.stringify(uploaded.json)).toBe(200);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(60_000);

    // 60,000 bytes do not fit the 40,000 left: refused whole, nothing counted.
    const refused = await serve(tenant.readToken, rowId, fieldId);
    expectError({ status: refused.status, body: refused.json }, 403, "transfer_limit_exceeded");
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(60_000);
    const part = await serve(tenant.readToken, rowId, fieldId, { range: "bytes=0-39999" });
    expect(part.status).toBe(206);
    expect(part.bytes.equals(content.subarray(0, 40_000))).toBe(true);
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(100_000);
    const again = await upload(tenant, rowId, fieldId, randomBytes(10), "b.bin");
    expectError({ status: again.status, body: again.json }, 403, "transfer_limit_exceeded");
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(100_000);

    // Room for 100,000 more bytes, not for 150,000: an upload of known length is refused before
    // a byte moves; a chunked one mid-stream, what it had moved given back. The file stays the
    // one stored before.
    await enterprise(sys, tenant, { "transfer-bytes-per-month": 200_000 });
    const big = await upload(tenant, rowId, fieldId, randomBytes(150_000), "big.bin");
    expectError({ status: big.status, body: big.json }, 403, "transfer_limit_exceeded");
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(100_000);
    const chunked = await uploadChunked(tenant, rowId, fieldId, randomBytes(150_000), "big.bin");
    expectError({ status: chunked.status, body: chunked.json }, 403, "transfer_limit_exceeded");
    expect(await counted(sys, "transfer", tenant.orgId)).toBe(100_000);
    const record = await api("GET", v1(table.databaseId, table.tableId).record(rowId), {
      token: tenant.readToken,
    });
    expect(record.body.data.record.data[String(fieldId)]).toMatchObject({
      file_name: "a.bin",
      size: 60_000,
      sha256: sha256(content),
    });
    expect(await storageUsage(sys, tenant)).toBe(60_000);
  });
});
