import { create, fromBinary } from "@bufbuild/protobuf";
import {
  Code,
  createLogger,
  createServiceClient,
  domainError,
  encodeCachedPlan,
  MemoryBus,
  MemoryCache,
  membershipCacheKey,
  planCacheKey,
  type ValidationItem,
  validationFailed,
  versionedEntry,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import {
  type ApiCallsCounted,
  ApiCallsCountedSchema,
} from "@rowbase/proto/rowbase/events/v1/usage_events_pb";
import { PlanLimitsSchema } from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ApiTokenLookup, apiTokenSha256 } from "../../auth/api-token-authenticator.js";
import type { ApiTokenCaller } from "../../auth/authenticate.js";
import { httpErrorOf } from "../../errors/error-table.js";
import { apiCallCounterKey, secondsToNextMonth, utcMonthOf } from "../../quota/api-call-counter.js";
import { createApiCallQuota } from "../../quota/api-call-quota.js";
import { ApiCallTally } from "../../quota/api-call-tally.js";
import { tableOrganizationKey } from "../../quota/table-organizations.js";
import { parseRateLimits } from "../../rate-limit/rate-limit-settings.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { ID_MESSAGE, validation } from "../../testing/route-checks.js";
import {
  HARNESS_INTERNAL_SECRET,
  type RouteHarness,
  startRouteHarness,
} from "../../testing/route-harness.js";
import { recordRoutes } from "./record-routes.js";

/**
 * The record routes through the real pipeline and the real quota. No service runs: records,
 * organization and catalog point at closed ports, so a request the gateway lets through shows
 * up as 503 (the records call was made). What the quota reads from other services (the plan,
 * a table's organization, a membership) is put in the shared cache under the keys and in the
 * forms the services and the gateway write, as a warm cache would hold it.
 */

const ORG = 5n;
const OTHER_ORG = 6n;
const TABLE = 2n;
const MEMBER = 42n;
const STRANGER = 43n;
const ALLOWANCE = 1_000n;

const READ_WRITE_TOKEN = `rb_${"W".repeat(40)}`;
const READ_TOKEN = `rb_${"R".repeat(40)}`;
const OTHER_ORG_TOKEN = `rb_${"O".repeat(40)}`;

const callers: Record<string, ApiTokenCaller> = {
  [READ_WRITE_TOKEN]: {
    kind: "api_token",
    tokenId: 11n,
    organizationId: ORG,
    access: "read_write",
  },
  [READ_TOKEN]: { kind: "api_token", tokenId: 12n, organizationId: ORG, access: "read" },
  [OTHER_ORG_TOKEN]: {
    kind: "api_token",
    tokenId: 13n,
    organizationId: OTHER_ORG,
    access: "read_write",
  },
};

const tokenLookup: ApiTokenLookup = async (sha256) =>
  Object.entries(callers).find(
    ([token]) => apiTokenSha256(token).toString("hex") === Buffer.from(sha256).toString("hex"),
  )?.[1];

const V1 = `/public/v1/databases/1/tables/${TABLE}`;

/** Each route with a request that passes the gateway's validation. */
const VALID: [string, string, unknown?][] = [
  ["GET", `${V1}/records`],
  [
    "GET",
    `${V1}/records?limit=10&offset=5&response_format=names&rich_text=html&where=(A,eq,1)&fields=A,B&sort=-A`,
  ],
  ["GET", `${V1}/records/7`],
  ["GET", `${V1}/records/7?response_format=names&rich_text=plain&fields=A`],
  ["POST", `${V1}/records`, { data: { Name: "Ann" } }],
  ["PATCH", `${V1}/records/7`, { data: { Name: "Bob" } }],
  ["DELETE", `${V1}/records/7`],
  ["POST", `${V1}/records/batch`, { records: [{ data: { Name: "A" } }, { data: {} }] }],
  ["PATCH", `${V1}/records/batch`, { records: [{ row_id: 7, data: { Name: "C" } }] }],
  ["POST", `${V1}/records/batch_delete`, { row_ids: [7, 8] }],
  ["GET", `${V1}/openapi.json`],
  ["POST", `/public/record/create?table_id=${TABLE}`, { data: { Name: "Ann" } }],
  ["GET", `/public/record/get?table_id=${TABLE}&row_id=7`],
  ["GET", `/public/record/get?table_id=${TABLE}&row_id=7&database_id=1&fields=A`],
  ["GET", `/public/record/list?database_id=1&table_id=${TABLE}`],
  ["GET", `/public/record/list?database_id=1&table_id=${TABLE}&limit=1000&sort=A&where=`],
  ["PUT", `/public/record/update?table_id=${TABLE}&row_id=7`, { data: { Name: "Bob" } }],
  ["POST", `/public/record/delete?table_id=${TABLE}&row_id=7`],
  ["DELETE", `/public/record/delete?table_id=${TABLE}&row_id=7`],
];

const unavailable = { message: "service_unavailable", data: {} };

interface Setup {
  harness: RouteHarness;
  cache: MemoryCache;
  events: ApiCallsCounted[];
  close(): Promise<void>;
}

async function setUp(rateLimits = "off"): Promise<Setup> {
  const cache = new MemoryCache();
  const bus = new MemoryBus(createLogger("bus", "silent"));
  const events: ApiCallsCounted[] = [];
  await bus.consume(
    { stream: "USAGE", durable: "test", subject: "usage.api_calls" },
    async (message) => {
      events.push(fromBinary(ApiCallsCountedSchema, message.data));
    },
  );
  const routes = await routesAtClosedPorts(cache, bus);
  const limits = parseRateLimits(rateLimits);
  if (!limits.ok) throw new Error(limits.problems.join("; "));
  const harness = await startRouteHarness(routes, {
    cache,
    apiTokenLookup: tokenLookup,
    rateLimits: limits.settings,
  });
  return {
    harness,
    cache,
    events,
    async close() {
      await harness.close();
      await bus.close();
    },
  };
}

async function routesAtClosedPorts(cache: MemoryCache, bus: MemoryBus): Promise<Route[]> {
  const quota = createApiCallQuota({
    cache,
    tally: new ApiCallTally(bus, createLogger("usage", "silent"), 0),
    organization: createServiceClient(OrganizationService, await closedPortUrl()),
    catalog: createServiceClient(CatalogService, await closedPortUrl()),
    internalSecret: HARNESS_INTERNAL_SECRET,
  });
  return recordRoutes({
    records: createServiceClient(RecordsService, await closedPortUrl()),
    quota,
    publicBaseUrl: "https://api.example.com",
  });
}

/** What a warm shared cache holds for organization 5, its table 2 and its member 42. */
async function warm(cache: MemoryCache) {
  const limits = create(PlanLimitsSchema, { records: 1_000n, apiCallsPerMonth: ALLOWANCE });
  for (const organizationId of [ORG, OTHER_ORG]) {
    const entry = versionedEntry(0n, encodeCachedPlan(limits));
    await cache.set(planCacheKey(organizationId), entry, 3600);
  }
  await cache.set(tableOrganizationKey(TABLE), ORG.toString(), 3600);
  await cache.set(membershipCacheKey(ORG, MEMBER), "viewer", 3600);
  await cache.set(membershipCacheKey(ORG, STRANGER), "-", 3600);
  // The month's counters exist (a missing one is rebuilt from the organization service, which
  // does not run here; monthly-usage-rebuild.e2e.test.ts tests that).
  for (const organizationId of [ORG, OTHER_ORG]) {
    await cache.setIfAbsent(apiCallCounterKey(organizationId, month()), "0", 3600);
  }
}

const month = () => utcMonthOf(new Date());

async function used(cache: MemoryCache, organizationId: bigint): Promise<number> {
  return Number((await cache.get(apiCallCounterKey(organizationId, month()))) ?? 0);
}

/** Lets fire-and-forget publishing run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

describe("record routes", () => {
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
    setup.events.length = 0;
  });

  afterAll(async () => {
    await setup.close();
  });

  it("serve every record route of both families, for a token or a session, rate limited", async () => {
    const routes = await routesAtClosedPorts(
      new MemoryCache(),
      new MemoryBus(createLogger("b", "silent")),
    );
    expect(routes.map((route) => `${route.method} ${route.path}`).sort()).toEqual(
      [
        "GET /public/v1/databases/:database_id/tables/:table_id/records",
        "GET /public/v1/databases/:database_id/tables/:table_id/records/:row_id",
        "POST /public/v1/databases/:database_id/tables/:table_id/records",
        "PATCH /public/v1/databases/:database_id/tables/:table_id/records/:row_id",
        "DELETE /public/v1/databases/:database_id/tables/:table_id/records/:row_id",
        "POST /public/v1/databases/:database_id/tables/:table_id/records/batch",
        "PATCH /public/v1/databases/:database_id/tables/:table_id/records/batch",
        "POST /public/v1/databases/:database_id/tables/:table_id/records/batch_delete",
        "GET /public/v1/databases/:database_id/tables/:table_id/openapi.json",
        "POST /public/record/create",
        "GET /public/record/get",
        "GET /public/record/list",
        "PUT /public/record/update",
        "POST /public/record/delete",
        "DELETE /public/record/delete",
      ].sort(),
    );
    for (const route of routes) {
      expect({ route: route.operationId, auth: route.auth, limits: route.rateLimits }).toEqual({
        route: route.operationId,
        auth: "session_or_token",
        limits: ["records_token", "records_user"],
      });
    }
    const set = new Set([...VALID.map(([method, path]) => `${method} ${path.split("?")[0]}`)]);
    expect(set.size).toBe(routes.length);
  });

  it("answer 401 without a valid credential, before reading the request", async () => {
    for (const [method, path] of VALID) {
      for (const token of [undefined, `rb_${"x".repeat(40)}`, "not-a-jwt"]) {
        const json = method === "GET" ? undefined : { bad: 1 };
        const response = await setup.harness.request(method, path, { token, json });
        expect({ method, path, token, status: response.status, body: response.body }).toEqual({
          method,
          path,
          token,
          status: 401,
          body: { message: "unauthorized", data: {} },
        });
      }
    }
    expect(await used(setup.cache, ORG)).toBe(0);
  });

  it("call the records service for a valid request, counting one call each", async () => {
    for (const [method, path, json] of VALID) {
      const response = await setup.harness.request(method, path, { token: READ_WRITE_TOKEN, json });
      expect({ method, path, status: response.status, body: response.body }).toEqual({
        method,
        path,
        status: 503,
        body: unavailable,
      });
    }
    expect(await used(setup.cache, ORG)).toBe(VALID.length);
    await settle();
    // Published as sums per organization, caller and day, each sum under its own event id.
    expect(setup.events.reduce((sum, event) => sum + event.apiCalls, 0n)).toBe(
      BigInt(VALID.length),
    );
    for (const event of setup.events) {
      expect(event).toMatchObject({
        organizationId: ORG,
        tokenId: 11n,
        meta: { actor: { id: 11n } },
      });
    }
    const ids = setup.events.map((event) => event.meta?.eventId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  describe("route matching", () => {
    it("keeps /records/batch and /records/batch_delete apart from a record id", async () => {
      const batch = await setup.harness.request("PATCH", `${V1}/records/batch`, {
        token: READ_WRITE_TOKEN,
        json: { data: { Name: "x" } },
      });
      expect(batch.body).toEqual(
        validation("PATCH", `${V1}/records/batch`, [
          { key: "records", message: "is required", source: "body", code: "required" },
          { key: "data", message: "is not allowed", source: "body", code: "unknown_key" },
        ]),
      );
      for (const [method, path, allow] of [
        ["GET", `${V1}/records/batch`, "POST, PATCH, OPTIONS"],
        ["DELETE", `${V1}/records/batch`, "POST, PATCH, OPTIONS"],
        ["GET", `${V1}/records/batch_delete`, "POST, OPTIONS"],
        ["PATCH", `${V1}/records/batch_delete`, "POST, OPTIONS"],
      ] as const) {
        const response = await setup.harness.request(method, path, { token: READ_WRITE_TOKEN });
        expect({
          method,
          path,
          status: response.status,
          allow: response.headers.get("allow"),
        }).toEqual({ method, path, status: 405, allow });
      }
    });

    it("refuse any record id but a plain positive integer on row_id, as a bad query id", async () => {
      for (const rowId of ["abc", "-1", "1e3", "7x", "batches", "0", "07", "7%2F8"]) {
        const response = await setup.harness.request("GET", `${V1}/records/${rowId}`, {
          token: READ_WRITE_TOKEN,
        });
        expect(response.status).toBe(400);
        expect(response.body).toEqual(
          validation("GET", `${V1}/records/${rowId}`, [
            {
              key: "row_id",
              message: ID_MESSAGE,
              source: "path",
              // Plain digits below 1 are out of range; anything else is no id at all.
              code: rowId === "0" ? "out_of_range" : "invalid_value",
            },
          ]),
        );
      }
    });

    it("answer PUT on the v1 paths 405 method_not_allowed: no full replacement", async () => {
      for (const [path, allow] of [
        [`${V1}/records`, "HEAD, GET, POST, OPTIONS"],
        [`${V1}/records/7`, "HEAD, GET, PATCH, DELETE, OPTIONS"],
        [`${V1}/records/batch`, "POST, PATCH, OPTIONS"],
      ] as const) {
        const response = await setup.harness.request("PUT", path, {
          token: READ_WRITE_TOKEN,
          json: { data: {} },
        });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 405,
          body: { message: "method_not_allowed", data: {} },
        });
        expect(response.headers.get("allow")).toBe(allow);
      }
    });

    it("take the query-form delete by POST and by DELETE, update by PUT only", async () => {
      const query = `?table_id=${TABLE}&row_id=7`;
      for (const method of ["POST", "DELETE"]) {
        const response = await setup.harness.request(method, `/public/record/delete${query}`, {
          token: READ_WRITE_TOKEN,
        });
        expect({ method, status: response.status }).toEqual({ method, status: 503 });
      }
      const get = await setup.harness.request("GET", `/public/record/delete${query}`, {
        token: READ_WRITE_TOKEN,
      });
      expect(get.status).toBe(405);
      expect(get.headers.get("allow")).toBe("POST, DELETE, OPTIONS");
      const patch = await setup.harness.request("PATCH", `/public/record/update${query}`, {
        token: READ_WRITE_TOKEN,
        json: { data: {} },
      });
      expect(patch.status).toBe(405);
      expect(patch.headers.get("allow")).toBe("PUT, OPTIONS");
    });
  });

  it("refuse bad parameters and bodies with the validation envelope, uncounted", async () => {
    const cases: [string, string, unknown, unknown[]][] = [
      [
        "GET",
        "/public/v1/databases/x/tables/0/records?limit=0&offset=-1&sort=",
        undefined,
        [
          {
            key: "limit",
            message: "must be an integer between 1 and 1000",
            source: "query",
            code: "out_of_range",
          },
          {
            key: "offset",
            message: "must be an integer between 0 and 10000000",
            source: "query",
            code: "invalid_value",
          },
          {
            key: "database_id",
            message: ID_MESSAGE,
            source: "path",
            code: "invalid_value",
          },
          {
            key: "table_id",
            message: ID_MESSAGE,
            source: "path",
            code: "out_of_range",
          },
        ],
      ],
      [
        "GET",
        `/public/record/list?table_id=${TABLE}&response_format=json&where=${"x".repeat(4097)}`,
        undefined,
        [
          { key: "database_id", message: "is required", source: "query", code: "required" },
          {
            key: "response_format",
            message: "must be one of ids, names",
            source: "query",
            code: "invalid_value",
          },
          {
            key: "where",
            message: "must be at most 4096 characters",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "GET",
        `/public/record/get?table_id=${TABLE}&row_id=7&limit=5`,
        undefined,
        [{ key: "limit", message: "is not allowed", source: "query", code: "unknown_key" }],
      ],
      [
        "POST",
        `/public/record/create?table_id=${TABLE}`,
        { data: [], extra: true },
        [
          { key: "data", message: "must be a JSON object", source: "body", code: "invalid_value" },
          { key: "extra", message: "is not allowed", source: "body", code: "unknown_key" },
        ],
      ],
      [
        "POST",
        `${V1}/records/batch`,
        { records: [] },
        [
          {
            key: "records",
            message: "must have 1-1000 items",
            source: "body",
            code: "too_short",
          },
        ],
      ],
      [
        "POST",
        `${V1}/records/batch_delete`,
        { row_ids: [1, 0] },
        [
          {
            key: "row_ids.1",
            message: ID_MESSAGE,
            source: "body",
            code: "out_of_range",
          },
        ],
      ],
      [
        "PUT",
        `/public/record/update?table_id=${TABLE}`,
        {},
        [
          { key: "row_id", message: "is required", source: "query", code: "required" },
          { key: "data", message: "is required", source: "body", code: "invalid_value" },
        ],
      ],
    ];
    for (const [method, path, json, extra] of cases) {
      const response = await setup.harness.request(method, path, { token: READ_WRITE_TOKEN, json });
      expect({ path, status: response.status, body: response.body }).toEqual({
        path,
        status: 400,
        body: validation(method, path.split("?")[0] ?? path, extra),
      });
    }
    expect(await used(setup.cache, ORG)).toBe(0);
  });

  it("list every value JSON cannot carry, with the body's other bad keys, in one 400", async () => {
    const finite = "must be a finite number";
    const response = await setup.harness.request("POST", `${V1}/records`, {
      token: READ_WRITE_TOKEN,
      rawJson: '{"data": {"Price": 1e400, "Name": "ok", "Cost": -1e999}, "row_id": 7}',
    });
    expect({ status: response.status, body: response.body }).toEqual({
      status: 400,
      body: validation("POST", `${V1}/records`, [
        { key: "Price", message: finite, source: "body", code: "invalid_value" },
        { key: "Cost", message: finite, source: "body", code: "invalid_value" },
        { key: "row_id", message: "is not allowed", source: "body", code: "unknown_key" },
      ]),
    });
    expect(await used(setup.cache, ORG)).toBe(0);
  });

  describe("the monthly API-call quota", () => {
    it("answers 429 api_call_limit_exceeded past the allowance, until the next month", async () => {
      await setup.cache.set(apiCallCounterKey(ORG, month()), String(Number(ALLOWANCE) - 1), 3600);
      const last = await setup.harness.request("GET", `${V1}/records`, { token: READ_TOKEN });
      expect(last.status).toBe(503);
      expect(await used(setup.cache, ORG)).toBe(Number(ALLOWANCE));
      const refused = await setup.harness.request("GET", `${V1}/records`, { token: READ_TOKEN });
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ message: "api_call_limit_exceeded", data: {} });
      const retryAfter = Number(refused.headers.get("retry-after"));
      const expected = secondsToNextMonth(new Date());
      expect(retryAfter).toBeGreaterThan(expected - 5);
      expect(retryAfter).toBeLessThanOrEqual(expected);
      // Refused calls are not counted, and not published.
      expect(await used(setup.cache, ORG)).toBe(Number(ALLOWANCE));
      await settle();
      expect(setup.events).toHaveLength(1);
      // Every token and member of the organization shares the allowance.
      const write = await setup.harness.request("POST", `/public/record/create?table_id=${TABLE}`, {
        token: READ_WRITE_TOKEN,
        json: { data: {} },
      });
      expect(write.status).toBe(429);
      const session = await setup.harness.request("GET", `${V1}/records/7`, { token: member });
      expect(session.status).toBe(429);
      // Another organization's token has its own.
      const other = await setup.harness.request("GET", `${V1}/records`, {
        token: OTHER_ORG_TOKEN,
      });
      expect(other.status).toBe(503);
    });

    it("charges a token's call to the token's organization, whatever table it names", async () => {
      const response = await setup.harness.request("GET", `${V1}/records`, {
        token: OTHER_ORG_TOKEN,
      });
      expect(response.status).toBe(503);
      expect(await used(setup.cache, OTHER_ORG)).toBe(1);
      expect(await used(setup.cache, ORG)).toBe(0);
    });

    it("charges a member's session call to the table's organization", async () => {
      const response = await setup.harness.request("GET", `${V1}/records/7`, { token: member });
      expect(response.status).toBe(503);
      expect(await used(setup.cache, ORG)).toBe(1);
      await settle();
      expect(setup.events).toEqual([
        expect.objectContaining({ organizationId: ORG, tokenId: 0n, apiCalls: 1n }),
      ]);
      expect(setup.events[0]?.meta?.actor?.id).toBe(MEMBER);
    });

    it("answers a non-member 404 table_not_found without charging anyone", async () => {
      for (const [method, path, json] of VALID) {
        const response = await setup.harness.request(method, path, { token: stranger, json });
        expect({ path, status: response.status, body: response.body }).toEqual({
          path,
          status: 404,
          body: { message: "table_not_found", data: {} },
        });
      }
      expect(await used(setup.cache, ORG)).toBe(0);
      await settle();
      expect(setup.events).toEqual([]);
    });

    it("fails closed (503) when the table's owner or the plan cannot be learnt", async () => {
      // A gateway that has not learnt them yet (a running one keeps them in memory a while).
      const fresh = await setUp();
      try {
        await warm(fresh.cache);
        await fresh.cache.del(tableOrganizationKey(TABLE), planCacheKey(OTHER_ORG));
        const session = await fresh.harness.request("GET", `${V1}/records`, {
          token: await fresh.harness.sessionToken(MEMBER),
        });
        expect(session.status).toBe(503);
        const token = await fresh.harness.request("GET", `${V1}/records`, {
          token: OTHER_ORG_TOKEN,
        });
        expect(token.status).toBe(503);
        expect(await used(fresh.cache, ORG)).toBe(0);
        expect(await used(fresh.cache, OTHER_ORG)).toBe(0);
      } finally {
        await fresh.close();
      }
    });
  });
});

describe("record route rate limits", () => {
  it("count per token and per user; a refused call is not charged", async () => {
    const setup = await setUp("records_token=1/60,records_user=1/60");
    try {
      await warm(setup.cache);
      const member = await setup.harness.sessionToken(MEMBER);
      const statuses = async (token: string) => [
        (await setup.harness.request("GET", `${V1}/records`, { token })).status,
        (await setup.harness.request("GET", `${V1}/records`, { token })).status,
      ];
      expect(await statuses(READ_TOKEN)).toEqual([503, 429]);
      expect(await statuses(READ_WRITE_TOKEN)).toEqual([503, 429]);
      expect(await statuses(member)).toEqual([503, 429]);
      const refused = await setup.harness.request("GET", `${V1}/records`, { token: member });
      expect(refused.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(await used(setup.cache, ORG)).toBe(3);
    } finally {
      await setup.close();
    }
  });
});

describe("errors of the records service", () => {
  it("a refused where, sort or fields is the 400 validation shape with source query", () => {
    const items: ValidationItem[] = [
      {
        key: "where",
        message: "unknown operator 'eqq' at 9",
        source: "query",
        code: "invalid_syntax",
      },
      { key: "sort", message: "unknown field 'Nope' at 1", source: "query", code: "not_found" },
    ];
    const response = httpErrorOf(validationFailed(items), {
      method: "GET",
      path: "/public/record/list",
      requestId: "r",
    });
    expect(response.status).toBe(400);
    expect(response.body).toEqual(validation("GET", "/public/record/list", items));
  });

  it("record codes keep their statuses", () => {
    const status = (reason: string, code: Code) =>
      httpErrorOf(domainError(code, reason), { method: "GET", path: "/", requestId: "r" }).status;
    expect(status("record_not_found", Code.NotFound)).toBe(404);
    expect(status("table_not_found", Code.NotFound)).toBe(404);
    expect(status("token_read_only", Code.PermissionDenied)).toBe(403);
    expect(status("record_limit_exceeded", Code.ResourceExhausted)).toBe(403);
    expect(status("api_call_limit_exceeded", Code.ResourceExhausted)).toBe(429);
  });
});
