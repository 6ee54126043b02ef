import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import { create, fromBinary } from "@bufbuild/protobuf";
import {
  createLogger,
  createServiceClient,
  MemoryBus,
  MemoryCache,
  membershipCacheKey,
  planCacheKey,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import {
  type ApiCallsCounted,
  ApiCallsCountedSchema,
  type TransferCounted,
  TransferCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { PlanLimitsSchema } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ApiTokenLookup, apiTokenSha256 } from "../../auth/api-token-authenticator.js";
import type { ApiTokenCaller } from "../../auth/authenticate.js";
import { apiCallCounterKey, utcMonthOf } from "../../quota/api-call-counter.js";
import { createApiCallQuota } from "../../quota/api-call-quota.js";
import { encodeCachedPlanLimits } from "../../quota/plan-allowances.js";
import { recordOrganizationKey } from "../../quota/record-organizations.js";
import { transferCounterKey } from "../../quota/transfer-quota.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { type FakeFilesService, startFakeFilesService } from "../../testing/fake-files-service.js";
import {
  HARNESS_INTERNAL_SECRET,
  type RouteHarness,
  startRouteHarness,
} from "../../testing/route-harness.js";
import { fileRoutes } from "./file-routes.js";

/**
 * The file routes through the real pipeline, quotas and multipart streaming, against an
 * in-memory files service behind a real gRPC server (testing/fake-files-service.ts). What the
 * quotas read from other services (plans, a record's organization, memberships) is put in the
 * shared cache as a warm cache would hold it; the records and organization services are at
 * closed ports.
 */

const ORG = 5n;
const OTHER_ORG = 6n;
const ROW = 7n;
const OTHER_ROW = 8n;
const FIELD = 3n;
const TEXT_FIELD = 4n;
const MEMBER = 42n;
const STRANGER = 43n;
const CEILING = 200_000;
const PUBLIC_BASE = "https://files.example.com";

const READ_WRITE_TOKEN = `rb_${"W".repeat(40)}`;
const READ_TOKEN = `rb_${"R".repeat(40)}`;

const callers: Record<string, ApiTokenCaller> = {
  [READ_WRITE_TOKEN]: {
    kind: "api_token",
    tokenId: 11n,
    organizationId: ORG,
    access: "read_write",
  },
  [READ_TOKEN]: { kind: "api_token", tokenId: 12n, organizationId: ORG, access: "read" },
};

const tokenLookup: ApiTokenLookup = async (sha256) =>
  Object.entries(callers).find(
    ([token]) => apiTokenSha256(token).toString("hex") === Buffer.from(sha256).toString("hex"),
  )?.[1];

const PNG = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from("0123456789abcdefghijklmnopqrstuvwxyz"),
]);
const HTML = Buffer.from("<html><script>alert(document.cookie)</script></html>");

async function routesFor(cache: MemoryCache, bus: MemoryBus, filesUrl: string): Promise<Route[]> {
  const organization = createServiceClient(OrganizationService, await closedPortUrl());
  return fileRoutes({
    files: createServiceClient(FilesService, filesUrl),
    filesUrl,
    records: createServiceClient(RecordsService, await closedPortUrl()),
    organization,
    cache,
    bus,
    quota: createApiCallQuota({
      cache,
      bus,
      organization,
      catalog: createServiceClient(CatalogService, await closedPortUrl()),
      internalSecret: HARNESS_INTERNAL_SECRET,
    }),
    internalSecret: HARNESS_INTERNAL_SECRET,
    publicBaseUrl: PUBLIC_BASE,
    uploadMaxBytes: CEILING,
  });
}

interface Setup {
  harness: RouteHarness;
  cache: MemoryCache;
  fake: FakeFilesService;
  apiCalls: ApiCallsCounted[];
  transfers: TransferCounted[];
  close(): Promise<void>;
}

async function setUp(): Promise<Setup> {
  const cache = new MemoryCache();
  const bus = new MemoryBus(createLogger("bus", "silent"));
  const apiCalls: ApiCallsCounted[] = [];
  const transfers: TransferCounted[] = [];
  await bus.consume({ stream: "USAGE", durable: "a", subject: "usage.api_calls" }, async (m) => {
    apiCalls.push(fromBinary(ApiCallsCountedSchema, m.data));
  });
  await bus.consume({ stream: "USAGE", durable: "t", subject: "usage.transfer" }, async (m) => {
    transfers.push(fromBinary(TransferCountedSchema, m.data));
  });
  const fake = await startFakeFilesService(HARNESS_INTERNAL_SECRET);
  const harness = await startRouteHarness(await routesFor(cache, bus, fake.url), {
    cache,
    apiTokenLookup: tokenLookup,
  });
  return {
    harness,
    cache,
    fake,
    apiCalls,
    transfers,
    async close() {
      await harness.close();
      await fake.close();
      await bus.close();
    },
  };
}

/** A warm shared cache for organization 5 (its record 7, its member 42) and organization 6. */
async function warm(cache: MemoryCache, limits: { apiCalls?: bigint; transfer?: bigint } = {}) {
  const plan = create(PlanLimitsSchema, {
    records: 1_000n,
    apiCallsPerMonth: limits.apiCalls ?? 1_000n,
    transferBytesPerMonth: limits.transfer ?? 10_000_000n,
    maxFileBytes: 1_000_000n,
    fileStorageBytes: 100_000_000n,
  });
  for (const organizationId of [ORG, OTHER_ORG]) {
    await cache.set(planCacheKey(organizationId), encodeCachedPlanLimits(plan), 3600);
  }
  await cache.set(recordOrganizationKey(ROW), ORG.toString(), 3600);
  await cache.set(recordOrganizationKey(OTHER_ROW), OTHER_ORG.toString(), 3600);
  await cache.set(membershipCacheKey(ORG, MEMBER), "editor", 3600);
  await cache.set(membershipCacheKey(ORG, STRANGER), "-", 3600);
  await cache.set(membershipCacheKey(OTHER_ORG, MEMBER), "-", 3600);
}

const month = () => utcMonthOf(new Date());

async function counter(cache: MemoryCache, key: string): Promise<number> {
  return Number((await cache.get(key)) ?? 0);
}

const apiCallsOf = (cache: MemoryCache, org = ORG) =>
  counter(cache, apiCallCounterKey(org, month()));
const transferOf = (cache: MemoryCache, org = ORG) =>
  counter(cache, transferCounterKey(org, month()));

/** Lets fire-and-forget publishing and cancelled streams run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

interface Response {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json: unknown;
}

async function send(
  harness: RouteHarness,
  method: string,
  path: string,
  init: {
    token?: string;
    headers?: Record<string, string>;
    body?: NonNullable<RequestInit["body"]>;
  } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const response = await fetch(harness.baseUrl + path, { method, headers, body: init.body });
  const bytes = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch {}
  return { status: response.status, headers: response.headers, bytes, json };
}

function form(parts: { name: string; content: Buffer | string; filename?: string }[]): FormData {
  const data = new FormData();
  for (const part of parts) {
    if (part.filename === undefined) data.append(part.name, String(part.content));
    else data.append(part.name, new Blob([part.content]), part.filename);
  }
  return data;
}

async function upload(
  setup: Setup,
  content: Buffer,
  options: { token?: string; name?: string; query?: string } = {},
): Promise<Response> {
  const query = options.query ?? `row_id=${ROW}&field_id=${FIELD}`;
  return send(setup.harness, "POST", `/file/upload?${query}`, {
    token: options.token ?? READ_WRITE_TOKEN,
    body: form([{ name: "file", content, filename: options.name ?? "picture.png" }]),
  });
}

const validation = (method: string, path: string, extra: unknown[]) => ({
  status_code: 400,
  detail: `Validation failed for ${method} ${path}`,
  extra,
});

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

describe("file routes", () => {
  let setup: Setup;
  let member: string;
  let stranger: string;

  beforeAll(async () => {
    setup = await setUp();
    member = await setup.harness.sessionToken(MEMBER);
    stranger = await setup.harness.sessionToken(STRANGER);
  });

  beforeEach(async () => {
    await setup.cache.close();
    await warm(setup.cache);
    setup.apiCalls.length = 0;
    setup.transfers.length = 0;
    const { state } = setup.fake;
    state.records.clear();
    state.records.set(ROW, { organizationId: ORG, fileFields: [FIELD] });
    state.records.set(OTHER_ROW, { organizationId: OTHER_ORG, fileFields: [FIELD] });
    state.live.clear();
    state.deleted.clear();
    state.uploads = { committed: 0, failed: 0 };
    state.maxFileBytes = 1_000_000;
  });

  afterAll(async () => {
    await setup.close();
  });

  it("register the routes of SPEC 7, all but the signed link for a token or a session", async () => {
    const routes = await routesFor(
      new MemoryCache(),
      new MemoryBus(createLogger("b", "silent")),
      await closedPortUrl(),
    );
    expect(routes.map((route) => [route.method, route.path, route.auth])).toEqual([
      ["POST", "/file/storage_check", "session_or_token"],
      ["POST", "/file/upload", "session_or_token"],
      ["GET", "/file/serve", "session_or_token"],
      ["GET", "/file/url", "session_or_token"],
      ["GET", "/file/signed/:token", "none"],
      ["POST", "/file/rename", "session_or_token"],
      ["POST", "/file/delete", "session_or_token"],
      ["POST", "/file/restore", "session_or_token"],
    ]);
    for (const route of routes.filter((r) => r.auth !== "none")) {
      expect(route.rateLimits).toEqual(["records_token", "records_user"]);
    }
    const byId = Object.fromEntries(routes.map((route) => [route.operationId, route]));
    expect(byId.fileUpload?.multipartFile).toBe("file");
    expect(byId.fileServe?.binary).toBe(true);
    expect(byId.fileSigned?.binary).toBe(true);
  });

  it("answer 401 without a valid credential, except the signed link", async () => {
    for (const [method, path] of [
      ["POST", `/file/storage_check?row_id=${ROW}&file_size=1`],
      ["POST", `/file/upload?row_id=${ROW}&field_id=${FIELD}`],
      ["GET", `/file/serve?row_id=${ROW}&field_id=${FIELD}`],
      ["GET", `/file/url?row_id=${ROW}&field_id=${FIELD}`],
      ["POST", `/file/rename?row_id=${ROW}&field_id=${FIELD}`],
      ["POST", `/file/delete?row_id=${ROW}&field_id=${FIELD}`],
      ["POST", `/file/restore?row_id=${ROW}&field_id=${FIELD}`],
    ] as const) {
      for (const token of [undefined, "not-a-jwt", `rb_${"x".repeat(40)}`]) {
        const response = await send(setup.harness, method, path, { token });
        expect({ path, token, status: response.status, body: response.json }).toEqual({
          path,
          token,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
      }
    }
    expect(await apiCallsOf(setup.cache)).toBe(0);
  });

  it("refuse bad parameters with the 400 validation shape", async () => {
    const cases: [string, string, unknown[], NonNullable<RequestInit["body"]>?][] = [
      [
        "GET",
        "/file/serve?row_id=7",
        [{ key: "field_id", message: "is required", source: "query" }],
      ],
      [
        "GET",
        "/file/serve?row_id=x&field_id=3",
        [{ key: "row_id", message: expect.stringMatching(/^must be an integer/), source: "query" }],
      ],
      [
        "GET",
        "/file/url?row_id=7&field_id=3&download=maybe",
        [{ key: "download", message: "must be true or false", source: "query" }],
      ],
      [
        "POST",
        "/file/storage_check?row_id=7&file_size=-1",
        [
          {
            key: "file_size",
            message: expect.stringMatching(/^must be an integer between 0/),
            source: "query",
          },
        ],
      ],
      [
        "POST",
        "/file/delete?row_id=7&field_id=3&extra=1",
        [{ key: "extra", message: "is not allowed", source: "query" }],
      ],
      ["GET", "/file/signed/abc?x=1", [{ key: "x", message: "is not allowed", source: "query" }]],
    ];
    for (const [method, path, extra] of cases) {
      const response = await send(setup.harness, method, path, { token: READ_WRITE_TOKEN });
      expect({ path, status: response.status, body: response.json }).toEqual({
        path,
        status: 400,
        body: validation(method, path.split("?")[0]!, extra),
      });
    }
  });

  it("refuse path tricks and control characters in a new name", async () => {
    for (const name of [
      "../x",
      "a/b",
      "a\\b",
      "a\u0000b",
      "line\nbreak",
      "",
      "   ",
      "..",
      "x".repeat(256),
    ]) {
      const response = await send(setup.harness, "POST", `/file/rename?row_id=7&field_id=3`, {
        token: READ_WRITE_TOKEN,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ file_name: name }),
      });
      expect({ name, status: response.status }).toEqual({ name, status: 400 });
      expect(response.json).toMatchObject({ extra: [{ key: "file_name", source: "body" }] });
    }
  });

  it("upload one part in 64 KiB chunks and answer its FileInfo", async () => {
    const content = Buffer.concat([PNG, randomBytes(150_000)]);
    const response = await upload(setup, content, { name: "Grüße.png" });
    expect(response.status).toBe(200);
    expect(response.json).toEqual({
      message: "success",
      data: {
        file: {
          row_id: 7,
          field_id: 3,
          file_name: "Grüße.png",
          content_type: "image/png",
          size: content.length,
          sha256: sha256(content),
          created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          updated_at: expect.stringMatching(/Z$/),
          deleted_at: null,
        },
      },
    });
    expect(setup.fake.state.uploads).toEqual({ committed: 1, failed: 0 });
    expect(Math.max(...setup.fake.state.lastChunks)).toBeLessThanOrEqual(64 * 1024);
    expect(setup.fake.state.lastChunks.length).toBeGreaterThan(2);
  });

  it("refuse a multipart body without exactly one part named file, storing nothing", async () => {
    const path = `/file/upload?row_id=${ROW}&field_id=${FIELD}`;
    const bodies: [NonNullable<RequestInit["body"]>, string][] = [
      [form([{ name: "upload", content: "x", filename: "a.txt" }]), "upload"],
      [
        form([
          { name: "file", content: randomBytes(70_000), filename: "a" },
          { name: "file", content: "y", filename: "b" },
        ]),
        "file",
      ],
      [form([{ name: "file", content: "just text" }]), "file"],
      [form([]), "file"],
    ];
    for (const [body, key] of bodies) {
      const response = await send(setup.harness, "POST", path, { token: READ_WRITE_TOKEN, body });
      expect(response.status).toBe(400);
      expect(response.json).toMatchObject({ extra: [{ key, source: "body" }] });
    }
    const json = await send(setup.harness, "POST", path, {
      token: READ_WRITE_TOKEN,
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(json.json).toEqual(
      validation("POST", "/file/upload", [
        { key: "content-type", message: "must be multipart/form-data", source: "header" },
      ]),
    );
    await settle();
    expect(setup.fake.state.uploads.committed).toBe(0);
    expect(setup.fake.state.live.size).toBe(0);
  });

  it("cut an upload past the gateway's ceiling or the service's limit with 413", async () => {
    const tooBig = await upload(setup, randomBytes(CEILING + 70_000));
    expect(tooBig.status).toBe(413);
    expect(tooBig.json).toEqual({ message: "file_too_large", data: {} });
    setup.fake.state.maxFileBytes = 1000;
    const overPlan = await upload(setup, randomBytes(5000));
    expect(overPlan.status).toBe(413);
    expect(overPlan.json).toEqual({ message: "file_too_large", data: {} });
    await settle();
    expect(setup.fake.state.uploads.committed).toBe(0);
    expect(setup.fake.state.live.size).toBe(0);
    // Refused uploads count no transfer.
    expect(await transferOf(setup.cache)).toBe(0);
    expect(setup.transfers).toEqual([]);
  });

  it("leave no call open when the service refuses an upload mid-stream", async () => {
    const cache = new MemoryCache();
    await warm(cache);
    const bus = new MemoryBus(createLogger("bus", "silent"));
    const fake = await startFakeFilesService(HARNESS_INTERNAL_SECRET);
    fake.state.records.set(ROW, { organizationId: ORG, fileFields: [FIELD] });
    fake.state.maxFileBytes = 1000;
    const harness = await startRouteHarness(await routesFor(cache, bus, fake.url), {
      cache,
      apiTokenLookup: tokenLookup,
    });
    try {
      for (let i = 0; i < 3; i++) {
        const response = await send(harness, "POST", `/file/upload?row_id=7&field_id=3`, {
          token: READ_WRITE_TOKEN,
          body: form([{ name: "file", content: randomBytes(150_000), filename: "big.bin" }]),
        });
        expect(response.json).toEqual({ message: "file_too_large", data: {} });
      }
      // A call whose input stayed open would keep the server from closing.
      const closed = await Promise.race([
        fake.close().then(() => "closed"),
        new Promise((resolve) => setTimeout(() => resolve("still open"), 3000)),
      ]);
      expect(closed).toBe("closed");
    } finally {
      await harness.close();
      await bus.close();
    }
  });

  it("store nothing when the client goes away mid-upload", async () => {
    const boundary = "----gone";
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n` +
        "Content-Type: application/octet-stream\r\n\r\n",
    );
    const request = http.request(`${setup.harness.baseUrl}/file/upload?row_id=7&field_id=3`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${READ_WRITE_TOKEN}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
        "content-length": String(head.length + 500_000),
      },
    });
    request.on("error", () => {});
    request.write(head);
    request.write(randomBytes(150_000));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // A reset, as a client that dies does; a closed socket would look like a short body.
    request.socket?.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(setup.fake.state.uploads).toEqual({ committed: 0, failed: 1 });
    expect(await transferOf(setup.cache)).toBe(0);
  });

  it("let a read token serve but not upload; keep other organizations' records hidden", async () => {
    const refused = await upload(setup, PNG, { token: READ_TOKEN });
    expect(refused.status).toBe(403);
    expect(refused.json).toEqual({ message: "token_read_only", data: {} });
    await upload(setup, PNG);
    const served = await send(setup.harness, "GET", `/file/serve?row_id=7&field_id=3`, {
      token: READ_TOKEN,
    });
    expect(served.status).toBe(200);
    const crossOrg = await send(setup.harness, "GET", `/file/serve?row_id=8&field_id=3`, {
      token: READ_WRITE_TOKEN,
    });
    expect(crossOrg.status).toBe(404);
    expect(crossOrg.json).toEqual({ message: "record_not_found", data: {} });
    const notAFileField = await send(
      setup.harness,
      "GET",
      `/file/serve?row_id=7&field_id=${TEXT_FIELD}`,
      {
        token: READ_WRITE_TOKEN,
      },
    );
    expect(notAFileField.json).toEqual({ message: "field_not_file_type", data: {} });
    expect(setup.fake.state.uploads.committed).toBe(1);
  });

  it("charge a member's session call to the record's organization; a stranger gets 404", async () => {
    await upload(setup, PNG);
    const before = await apiCallsOf(setup.cache);
    const served = await send(setup.harness, "GET", `/file/serve?row_id=7&field_id=3`, {
      token: member,
    });
    expect(served.status).toBe(200);
    expect(await apiCallsOf(setup.cache)).toBe(before + 1);
    for (const [token, row] of [
      [stranger, ROW],
      [member, OTHER_ROW],
    ] as const) {
      const response = await send(setup.harness, "GET", `/file/serve?row_id=${row}&field_id=3`, {
        token,
      });
      expect(response.json).toEqual({ message: "record_not_found", data: {} });
    }
    expect(await apiCallsOf(setup.cache)).toBe(before + 1);
    expect(await apiCallsOf(setup.cache, OTHER_ORG)).toBe(0);
    const principals = setup.fake.state.principals;
    expect(principals.at(-1)).toEqual({
      kind: "user",
      userId: MEMBER,
      sessionId: `session-${MEMBER}`,
    });
  });

  it("serve the bytes with the stored type, length, ETag and the security headers", async () => {
    const content = Buffer.concat([PNG, randomBytes(1000)]);
    await upload(setup, content, { name: 'my "photo".png' });
    const response = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(response.status).toBe(200);
    expect(response.bytes.equals(content)).toBe(true);
    expect(Object.fromEntries(response.headers)).toMatchObject({
      "content-type": "image/png",
      "content-length": String(content.length),
      etag: `"${sha256(content)}"`,
      "accept-ranges": "bytes",
      "content-disposition": `inline; filename="my _photo_.png"; filename*=UTF-8''my%20%22photo%22.png`,
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; sandbox",
      "cache-control": "private, no-cache",
    });
  });

  it("serve HTML as an attachment, whatever the upload claimed", async () => {
    await send(setup.harness, "POST", `/file/upload?row_id=7&field_id=3`, {
      token: READ_WRITE_TOKEN,
      body: form([{ name: "file", content: HTML, filename: "cat.png" }]),
    });
    const response = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(response.headers.get("content-type")).toBe("text/html");
    expect(response.headers.get("content-disposition")).toMatch(/^attachment; /);
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("answer one range with 206, and the whole file for several or a malformed one", async () => {
    const content = Buffer.from("0123456789abcdefghijklmnopqrstuvwxyz");
    await upload(setup, content, { name: "digits.txt" });
    const get = (range: string) =>
      send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
        token: READ_WRITE_TOKEN,
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
    }
    const unsatisfiable = await get("bytes=36-");
    expect(unsatisfiable.status).toBe(416);
    expect(unsatisfiable.headers.get("content-range")).toBe(`bytes */${size}`);
    expect(unsatisfiable.json).toEqual({ message: "range_not_satisfiable", data: {} });
  });

  it("answer 304 to a matching If-None-Match, and ignore Range for a stale If-Range", async () => {
    const content = Buffer.concat([PNG, Buffer.from("more bytes")]);
    await upload(setup, content);
    const etag = `"${sha256(content)}"`;
    const transferBefore = await transferOf(setup.cache);
    for (const header of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
      const response = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
        token: READ_WRITE_TOKEN,
        headers: { "if-none-match": header },
      });
      expect({ header, status: response.status, length: response.bytes.length }).toEqual({
        header,
        status: 304,
        length: 0,
      });
      expect(response.headers.get("etag")).toBe(etag);
    }
    expect(await transferOf(setup.cache)).toBe(transferBefore);
    const stale = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
      headers: { range: "bytes=0-3", "if-range": '"stale"' },
    });
    expect(stale.status).toBe(200);
    expect(stale.bytes.equals(content)).toBe(true);
    const fresh = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
      headers: { range: "bytes=0-3", "if-range": etag },
    });
    expect(fresh.status).toBe(206);
  });

  it("answer HEAD with the headers and no bytes, counting no transfer", async () => {
    await upload(setup, PNG);
    const before = await transferOf(setup.cache);
    const response = await send(setup.harness, "HEAD", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-length")).toBe(String(PNG.length));
    expect(response.bytes.length).toBe(0);
    expect(await transferOf(setup.cache)).toBe(before);
  });

  it("hand out a signed URL that serves without a bearer token, as an attachment on request", async () => {
    await upload(setup, PNG);
    const inline = await send(setup.harness, "GET", "/file/url?row_id=7&field_id=3", {
      token: READ_TOKEN,
    });
    expect(inline.json).toEqual({
      message: "success",
      data: {
        url: expect.stringMatching(
          /^https:\/\/files\.example\.com\/file\/signed\/[A-Za-z0-9_.-]+$/,
        ),
        expires_at: expect.stringMatching(/Z$/),
      },
    });
    const url = (inline.json as { data: { url: string } }).data.url;
    const callsBefore = await apiCallsOf(setup.cache);
    const served = await send(setup.harness, "GET", url.slice(PUBLIC_BASE.length));
    expect(served.status).toBe(200);
    expect(served.bytes.equals(PNG)).toBe(true);
    expect(served.headers.get("content-disposition")).toMatch(/^inline; /);
    expect(served.headers.get("x-content-type-options")).toBe("nosniff");
    // A signed download is not an API call of anyone, but its bytes are transfer.
    expect(await apiCallsOf(setup.cache)).toBe(callsBefore);

    const download = await send(
      setup.harness,
      "GET",
      "/file/url?row_id=7&field_id=3&download=true",
      {
        token: READ_TOKEN,
      },
    );
    const downloadUrl = (download.json as { data: { url: string } }).data.url;
    const attachment = await send(setup.harness, "GET", downloadUrl.slice(PUBLIC_BASE.length), {
      headers: { range: "bytes=0-3" },
    });
    expect(attachment.status).toBe(206);
    expect(attachment.headers.get("content-disposition")).toMatch(/^attachment; /);

    const tampered = await send(setup.harness, "GET", `${url.slice(PUBLIC_BASE.length)}x`);
    expect(tampered.status).toBe(404);
    expect(tampered.json).toEqual({ message: "file_not_found", data: {} });
  });

  it("rename, delete and restore, answering the FileInfo", async () => {
    await upload(setup, PNG);
    const rename = await send(setup.harness, "POST", "/file/rename?row_id=7&field_id=3", {
      token: member,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ file_name: "  renamed.png  " }),
    });
    expect(rename.json).toMatchObject({
      message: "success",
      data: { file: { file_name: "renamed.png", deleted_at: null } },
    });
    const deleted = await send(setup.harness, "POST", "/file/delete?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(deleted.json).toMatchObject({
      data: { file: { file_name: "renamed.png", deleted_at: expect.stringMatching(/Z$/) } },
    });
    const gone = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(gone.json).toEqual({ message: "file_not_found", data: {} });
    const restored = await send(setup.harness, "POST", "/file/restore?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(restored.json).toMatchObject({ data: { file: { deleted_at: null } } });
    // INTERFACE.md: rename's ids default to 0, which names no file.
    for (const token of [READ_WRITE_TOKEN, member]) {
      const unnamed = await send(setup.harness, "POST", "/file/rename", {
        token,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ file_name: "x.png" }),
      });
      expect(unnamed.json).toEqual({ message: "file_not_found", data: {} });
    }
    const check = await send(setup.harness, "POST", "/file/storage_check?row_id=7&file_size=10", {
      token: READ_WRITE_TOKEN,
    });
    expect(check.json).toEqual({ message: "success", data: {} });
    const checkRead = await send(
      setup.harness,
      "POST",
      "/file/storage_check?row_id=7&file_size=10",
      {
        token: READ_TOKEN,
      },
    );
    expect(checkRead.json).toEqual({ message: "token_read_only", data: {} });
  });

  it("count every call as an API call, up to the plan's allowance", async () => {
    await warm(setup.cache, { apiCalls: 3n });
    await upload(setup, PNG);
    await send(setup.harness, "GET", "/file/url?row_id=7&field_id=3", { token: READ_TOKEN });
    await send(setup.harness, "POST", "/file/delete?row_id=7&field_id=3", { token: member });
    const refused = await send(setup.harness, "POST", "/file/restore?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({ message: "api_call_limit_exceeded", data: {} });
    expect(await apiCallsOf(setup.cache)).toBe(3);
    await settle();
    expect(setup.apiCalls.map((event) => [event.organizationId, event.tokenId])).toEqual([
      [ORG, 11n],
      [ORG, 12n],
      [ORG, 0n],
    ]);
  });

  it("count uploaded and served bytes as the organization's transfer, and publish them", async () => {
    const content = Buffer.concat([PNG, randomBytes(3000)]);
    await upload(setup, content);
    expect(await transferOf(setup.cache)).toBe(content.length);
    await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: member,
      headers: { range: "bytes=0-99" },
    });
    expect(await transferOf(setup.cache)).toBe(content.length + 100);
    await settle();
    expect(
      setup.transfers.map((event) => [event.organizationId, event.tokenId, event.transferBytes]),
    ).toEqual([
      [ORG, 11n, BigInt(content.length)],
      [ORG, 0n, 100n],
    ]);
  });

  it("refuse transfer past the plan with 403, before a byte moves, and give the room back", async () => {
    const content = Buffer.concat([PNG, randomBytes(2000)]);
    await upload(setup, content);
    const used = await transferOf(setup.cache);
    await warm(setup.cache, { transfer: BigInt(used + 1000) });
    const serve = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
    });
    expect(serve.status).toBe(403);
    expect(serve.json).toEqual({ message: "transfer_limit_exceeded", data: {} });
    const small = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: READ_WRITE_TOKEN,
      headers: { range: "bytes=0-999" },
    });
    expect(small.status).toBe(206);
    expect(await transferOf(setup.cache)).toBe(used + 1000);
    await warm(setup.cache, { transfer: BigInt(used + 1000 + 50_000) });
    const big = await upload(setup, randomBytes(120_000));
    expect(big.status).toBe(403);
    expect(big.json).toEqual({ message: "transfer_limit_exceeded", data: {} });
    await settle();
    expect(await transferOf(setup.cache)).toBe(used + 1000);
    expect(setup.fake.state.uploads.committed).toBe(1);
  });

  it("answer 503 when the records service cannot say whose record it is", async () => {
    await setup.cache.del(recordOrganizationKey(ROW));
    const response = await send(setup.harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: member,
    });
    expect(response.status).toBe(503);
    expect(response.json).toEqual({ message: "service_unavailable", data: {} });
  });
});
