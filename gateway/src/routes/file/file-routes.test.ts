import { create } from "@bufbuild/protobuf";
import {
  createLogger,
  createServiceClient,
  encodeCachedPlan,
  MemoryBus,
  MemoryCache,
  membershipCacheKey,
  planCacheKey,
  versionedEntry,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { FilesService } from "@rowbase/proto/rowbase/files/v1/files_service_pb";
import { PlanLimitsSchema } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ApiTokenLookup, apiTokenSha256 } from "../../auth/api-token-authenticator.js";
import type { ApiTokenCaller } from "../../auth/authenticate.js";
import { apiCallCounterKey, utcMonthOf } from "../../quota/api-call-counter.js";
import { createApiCallQuota } from "../../quota/api-call-quota.js";
import { ApiCallTally } from "../../quota/api-call-tally.js";
import { recordOrganizationKey } from "../../quota/record-organizations.js";
import { transferCounterKey } from "../../quota/transfer-quota.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { validation } from "../../testing/route-checks.js";
import {
  HARNESS_INTERNAL_SECRET,
  type RouteHarness,
  startRouteHarness,
} from "../../testing/route-harness.js";
import { fileRoutes } from "./file-routes.js";

/**
 * The file routes through the real pipeline and quotas, with no service running: files, records,
 * organization and catalog point at closed ports, so a request the gateway lets through shows up
 * as 503 (the call was made). What the quotas read from other services (a plan, a record's
 * organization, a membership) is put in the shared cache as a warm cache would hold it. What
 * needs the files service (uploads, serving, ranges, conditional requests, quotas and transfer)
 * is tested against the whole system in test/e2e/files*.e2e.test.ts.
 */

const ORG = 5n;
const ROW = 7n;
const FIELD = 3n;
const MEMBER = 42n;

const READ_WRITE_TOKEN = `rb_${"W".repeat(40)}`;

const callers: Record<string, ApiTokenCaller> = {
  [READ_WRITE_TOKEN]: {
    kind: "api_token",
    tokenId: 11n,
    organizationId: ORG,
    access: "read_write",
  },
};

const tokenLookup: ApiTokenLookup = async (sha256) =>
  Object.entries(callers).find(
    ([token]) => apiTokenSha256(token).toString("hex") === Buffer.from(sha256).toString("hex"),
  )?.[1];

async function routesAtClosedPorts(cache: MemoryCache, bus: MemoryBus): Promise<Route[]> {
  const organization = createServiceClient(OrganizationService, await closedPortUrl());
  const filesUrl = await closedPortUrl();
  return fileRoutes({
    files: createServiceClient(FilesService, filesUrl),
    filesUrl,
    records: createServiceClient(RecordsService, await closedPortUrl()),
    organization,
    cache,
    bus,
    quota: createApiCallQuota({
      cache,
      tally: new ApiCallTally(bus, createLogger("usage", "silent"), 0),
      organization,
      catalog: createServiceClient(CatalogService, await closedPortUrl()),
      internalSecret: HARNESS_INTERNAL_SECRET,
    }),
    internalSecret: HARNESS_INTERNAL_SECRET,
    publicBaseUrl: "https://files.example.com",
    uploadMaxBytes: 200_000,
  });
}

/** What a warm cache holds of this month's counters of organization 5. */
const COUNTED = 100;

const month = () => utcMonthOf(new Date());

/**
 * A warm shared cache for organization 5: its plan, this month's counters, its record 7 and its
 * member 42.
 */
async function warm(cache: MemoryCache) {
  const plan = create(PlanLimitsSchema, {
    records: 1_000n,
    apiCallsPerMonth: 1_000n,
    transferBytesPerMonth: 10_000_000n,
    maxFileBytes: 1_000_000n,
    fileStorageBytes: 100_000_000n,
  });
  await cache.set(planCacheKey(ORG), versionedEntry(0n, encodeCachedPlan(plan)), 3600);
  await cache.set(apiCallCounterKey(ORG, month()), String(COUNTED), 3600);
  await cache.set(transferCounterKey(ORG, month()), String(COUNTED), 3600);
  await cache.set(recordOrganizationKey(ROW), ORG.toString(), 3600);
  await cache.set(membershipCacheKey(ORG, MEMBER), "editor", 3600);
}

async function apiCalls(cache: MemoryCache): Promise<number> {
  return Number((await cache.get(apiCallCounterKey(ORG, month()))) ?? 0);
}

interface Response {
  status: number;
  json: unknown;
}

async function send(
  harness: RouteHarness,
  method: string,
  path: string,
  init: { token?: string; headers?: Record<string, string>; body?: FormData | string } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const response = await fetch(harness.baseUrl + path, { method, headers, body: init.body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: response.status, json };
}

function filePart(content: string, fileName: string): FormData {
  const form = new FormData();
  form.append("file", new Blob([content]), fileName);
  return form;
}

const unavailable = { message: "service_unavailable", data: {} };

describe("file routes", () => {
  let harness: RouteHarness;
  let cache: MemoryCache;
  let bus: MemoryBus;
  let member: string;

  beforeAll(async () => {
    cache = new MemoryCache();
    bus = new MemoryBus(createLogger("bus", "silent"));
    harness = await startRouteHarness(await routesAtClosedPorts(cache, bus), {
      cache,
      apiTokenLookup: tokenLookup,
    });
    member = await harness.sessionToken(MEMBER);
  });

  beforeEach(async () => {
    await cache.close();
    await warm(cache);
  });

  afterAll(async () => {
    await harness.close();
    await bus.close();
  });

  it("register the file routes, all but the signed link for a token or a session", async () => {
    const routes = await routesAtClosedPorts(
      new MemoryCache(),
      new MemoryBus(createLogger("b", "silent")),
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
        const response = await send(harness, method, path, { token });
        expect({ path, token, status: response.status, body: response.json }).toEqual({
          path,
          token,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
      }
    }
    expect(await apiCalls(cache)).toBe(COUNTED);
  });

  it("call the files service once a request is valid (503: it is not running)", async () => {
    const pair = `row_id=${ROW}&field_id=${FIELD}`;
    const cases: [string, string, { body?: FormData | string }][] = [
      ["POST", `/file/storage_check?row_id=${ROW}&file_size=10`, {}],
      ["POST", `/file/upload?${pair}`, { body: filePart("hello", "hello.txt") }],
      ["GET", `/file/serve?${pair}`, {}],
      ["GET", `/file/url?${pair}&download=true`, {}],
      ["POST", `/file/rename?${pair}`, { body: JSON.stringify({ file_name: "x.png" }) }],
      ["POST", `/file/delete?${pair}`, {}],
      ["POST", `/file/restore?${pair}`, {}],
    ];
    for (const token of [READ_WRITE_TOKEN, member]) {
      for (const [method, path, { body }] of cases) {
        const response = await send(harness, method, path, {
          token,
          body,
          headers: typeof body === "string" ? { "content-type": "application/json" } : {},
        });
        expect({ path, token, status: response.status, body: response.json }).toEqual({
          path,
          token,
          status: 503,
          body: unavailable,
        });
      }
    }
    const signed = await send(harness, "GET", "/file/signed/abc.def");
    expect({ status: signed.status, body: signed.json }).toEqual({
      status: 503,
      body: unavailable,
    });
  });

  it("refuse bad parameters with the 400 validation shape", async () => {
    const cases: [string, string, unknown[]][] = [
      [
        "GET",
        "/file/serve?row_id=7",
        [{ key: "field_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "GET",
        "/file/serve?row_id=x&field_id=3",
        [
          {
            key: "row_id",
            message: expect.stringMatching(/^must be an integer/),
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "GET",
        "/file/url?row_id=7&field_id=3&download=maybe",
        [
          {
            key: "download",
            message: "must be true or false",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/file/storage_check?row_id=7&file_size=-1",
        [
          {
            key: "file_size",
            message: expect.stringMatching(/^must be an integer between 0/),
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/file/delete?row_id=7&field_id=3&extra=1",
        [{ key: "extra", message: "is not allowed", source: "query", code: "unknown_key" }],
      ],
      [
        "GET",
        "/file/signed/abc?x=1",
        [{ key: "x", message: "is not allowed", source: "query", code: "unknown_key" }],
      ],
    ];
    for (const [method, path, extra] of cases) {
      const response = await send(harness, method, path, { token: READ_WRITE_TOKEN });
      expect({ path, status: response.status, body: response.json }).toEqual({
        path,
        status: 400,
        body: validation(method, path.split("?")[0]!, extra),
      });
    }
    const json = await send(harness, "POST", `/file/upload?row_id=${ROW}&field_id=${FIELD}`, {
      token: READ_WRITE_TOKEN,
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(json.json).toEqual(
      validation("POST", "/file/upload", [
        {
          key: "content-type",
          message: "must be multipart/form-data",
          source: "header",
          code: "invalid_value",
        },
      ]),
    );
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
      const response = await send(harness, "POST", `/file/rename?row_id=7&field_id=3`, {
        token: READ_WRITE_TOKEN,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ file_name: name }),
      });
      expect({ name, status: response.status }).toEqual({ name, status: 400 });
      expect(response.json).toMatchObject({ extra: [{ key: "file_name", source: "body" }] });
    }
  });

  it("refuse a new name that shows nothing, by the rule for names", async () => {
    for (const name of ["\u200b", " \u2060\ufeff ", "\u200c\u200d"]) {
      const response = await send(harness, "POST", `/file/rename?row_id=7&field_id=3`, {
        token: READ_WRITE_TOKEN,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ file_name: name }),
      });
      expect({ name, status: response.status, body: response.json }).toEqual({
        name,
        status: 400,
        body: validation("POST", "/file/rename", [
          {
            key: "file_name",
            message: "must contain a visible character",
            source: "body",
            code: "invalid_value",
          },
        ]),
      });
    }
  });

  it("answer 503 when the records service cannot say whose record it is", async () => {
    await cache.del(recordOrganizationKey(ROW));
    const response = await send(harness, "GET", "/file/serve?row_id=7&field_id=3", {
      token: member,
    });
    expect(response.status).toBe(503);
    expect(response.json).toEqual(unavailable);
    expect(await apiCalls(cache)).toBe(COUNTED);
  });
});
