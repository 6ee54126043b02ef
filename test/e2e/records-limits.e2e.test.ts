import { PlanAllowances } from "@rowbase/gateway";
import { cachePlan, createServiceClient, planCacheKey } from "@rowbase/kit";
import { holdAnswers } from "@rowbase/kit/testing";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { RELAXED_RATE_LIMITS, startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counted, enterprise as enterpriseLimits } from "./support/files.js";
import type { ApiResponse } from "./support/http.js";
import { client } from "./support/http.js";
import { q } from "./support/organizations.js";
import {
  createApiToken,
  createTable,
  createTenant,
  list,
  RECORD_TEST_RATE_LIMITS,
  seed,
  setPlan,
  type Tenant,
  type TestTable,
  v1,
} from "./support/records.js";

/** Plan limits on the record routes: the record limit, the monthly API calls, rate limits. */

let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function limitsOf(tenant: Tenant) {
  const response = await api("GET", "/organization/limits", {
    token: tenant.owner.token,
    query: q({ organization_id: tenant.orgId }),
  });
  expect(response.status).toBe(200);
  return response.body.data as {
    plan: string;
    limits: Record<string, number>;
    usage: Record<string, number>;
  };
}

/** Waits (up to 10 s) for a usage value that is reported asynchronously. */
async function eventualUsage(tenant: Tenant, key: string, expected: number) {
  let seen: number | undefined;
  for (const started = Date.now(); Date.now() - started < 10_000; await sleep(200)) {
    seen = (await limitsOf(tenant)).usage[key];
    if (seen === expected) break;
  }
  expect(seen, `usage.${key}`).toBe(expected);
}

function statusCounts(responses: ApiResponse[]) {
  const counts: Record<string, number> = {};
  for (const response of responses) {
    const key = `${response.status} ${response.body?.message ?? ""}`.trim();
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

describe("the record limit", () => {
  it("lets exactly the free plan's 1,000 records in under 64 parallel creates", async () => {
    const tenant = await createTenant(sys, api);
    expect((await limitsOf(tenant)).limits.records).toBe(1000);
    const table = await createTable(api, tenant, [{ name: "N", type: "number" }]);
    await seed(
      api,
      tenant.writeToken,
      table,
      Array.from({ length: 990 }, (_, i) => ({ N: i })),
    );
    const p = v1(tenant.databaseId, table.tableId);
    // Both families at once: 32 v1 creates and 32 query-form creates.
    const responses = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        i % 2 === 0
          ? api("POST", p.records, { token: tenant.writeToken, body: { data: { N: 1000 + i } } })
          : api("POST", "/public/record/create", {
              token: tenant.writeToken,
              query: q({ table_id: table.tableId }),
              body: { data: { N: 1000 + i } },
            }),
      ),
    );
    expect(statusCounts(responses)).toEqual({
      "200 success": 10,
      "403 record_limit_exceeded": 54,
    });
    for (const response of responses.filter((r) => r.status === 403)) {
      expect(response.body).toEqual({ message: "record_limit_exceeded", data: {} });
    }
    expect((await list(api, tenant.readToken, table, { limit: 1 })).total).toBe(1000);

    // Full: no route creates anything anywhere in the organization.
    const other = await createTable(api, tenant, [{ name: "N", type: "number" }]);
    for (const [t, method, path, body] of [
      [table, "POST", p.batch, { records: [{ data: {} }] }],
      [other, "POST", v1(tenant.databaseId, other.tableId).records, { data: {} }],
    ] as [TestTable, string, string, unknown][]) {
      const response = await api(method, path, { token: tenant.writeToken, body });
      expect(response.status, JSON.stringify(response.body)).toBe(403);
      expect(response.body).toEqual({ message: "record_limit_exceeded", data: {} });
      expect((await list(api, tenant.readToken, t, { limit: 1 })).total).toBe(
        t === table ? 1000 : 0,
      );
    }

    // Deleting makes room again; a batch that does not fit writes nothing.
    const page = await list(api, tenant.readToken, table, { limit: 2 });
    const removed = await api("POST", p.batchDelete, {
      token: tenant.writeToken,
      body: { row_ids: page.records.map((r) => r.row_id) },
    });
    expect(removed.status).toBe(200);
    const tooMany = await api("POST", p.batch, {
      token: tenant.writeToken,
      body: { records: [{ data: {} }, { data: {} }, { data: {} }] },
    });
    expect(tooMany.body).toEqual({ message: "record_limit_exceeded", data: {} });
    expect((await list(api, tenant.readToken, table, { limit: 1 })).total).toBe(998);
    const fits = await api("POST", p.batch, {
      token: tenant.writeToken,
      body: { records: [{ data: {} }, { data: {} }] },
    });
    expect(fits.status).toBe(200);
    expect((await list(api, tenant.readToken, table, { limit: 1 })).total).toBe(1000);
    await eventualUsage(tenant, "records", 1000);
  });
});

describe("the monthly API-call allowance", () => {
  it("answers 429 api_call_limit_exceeded past it, and does not count refused calls", async () => {
    const tenant = await createTenant(sys, api);
    const enterprise = (calls: number) =>
      setPlan(
        sys,
        tenant.orgId,
        "enterprise",
        "--records=1000",
        `--api-calls-per-month=${calls}`,
        "--file-storage-bytes=100000000",
        "--transfer-bytes-per-month=1000000000",
        "--members=3",
        "--max-file-bytes=10000000",
      );
    await enterprise(20);
    expect((await limitsOf(tenant)).limits.api_calls_per_month).toBe(20);
    const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
    const p = v1(tenant.databaseId, table.tableId);
    const before = (await limitsOf(tenant)).usage.api_calls_this_month;
    expect(before ?? 0).toBe(0);

    // 20 calls of every kind: reads and writes, both families, tokens and a member's session.
    const [row] = await seed(api, tenant.writeToken, table, [{ Name: "first" }]); // 1
    const calls: (() => Promise<ApiResponse>)[] = [
      () => api("GET", p.records, { token: tenant.readToken }),
      () => api("GET", p.record(row!.row_id), { token: tenant.readToken }),
      () => api("POST", p.records, { token: tenant.writeToken, body: { data: { Name: "x" } } }),
      () =>
        api("PATCH", p.record(row!.row_id), {
          token: tenant.writeToken,
          body: { data: { Name: "y" } },
        }),
      () => api("GET", p.openapi, { token: tenant.readToken }),
      () =>
        api("GET", "/public/record/list", {
          token: tenant.owner.token,
          query: q({ database_id: tenant.databaseId, table_id: table.tableId }),
        }),
      () =>
        api("GET", "/public/record/get", {
          token: tenant.writeToken,
          query: q({ table_id: table.tableId, row_id: row!.row_id }),
        }),
    ];
    const admitted: ApiResponse[] = [];
    for (let i = 0; i < 19; i++) admitted.push(await calls[i % calls.length]!());
    expect(admitted.map((r) => r.status)).toEqual(Array(19).fill(200));

    const refused = [
      await api("GET", p.records, { token: tenant.readToken }),
      await api("POST", p.records, { token: tenant.writeToken, body: { data: { Name: "z" } } }),
      await api("GET", "/public/record/get", {
        token: tenant.owner.token,
        query: q({ table_id: table.tableId, row_id: row!.row_id }),
      }),
    ];
    const month = new Date();
    const nextMonth = Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 1);
    for (const response of refused) {
      expect(response.status, JSON.stringify(response.body)).toBe(429);
      expect(response.body).toEqual({ message: "api_call_limit_exceeded", data: {} });
      // Not the throttle: its RateLimit fields still leave requests in the window.
      expect(response.headers.get("ratelimit")).toMatch(
        /^"records_(token|user)";r=[1-9]\d*;t=\d+$/,
      );
      const retryAfter = Number(response.headers.get("retry-after"));
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(Math.ceil((nextMonth - Date.now()) / 1000) + 5);
    }
    await eventualUsage(tenant, "api_calls_this_month", 20);
    await sleep(500);
    expect((await limitsOf(tenant)).usage.api_calls_this_month).toBe(20);

    // Another organization's allowance is its own.
    const neighbour = await createTenant(sys, api);
    const theirs = await createTable(api, neighbour, [{ name: "Name", type: "text" }]);
    expect(
      (
        await api("GET", v1(neighbour.databaseId, theirs.tableId).records, {
          token: neighbour.readToken,
        })
      ).status,
    ).toBe(200);

    // Five more calls a month: had the refused calls counted, fewer than five would pass.
    await enterprise(25);
    const started = Date.now();
    let first = await api("GET", p.records, { token: tenant.readToken });
    while (first.status === 429 && Date.now() - started < 10_000) {
      await sleep(200);
      first = await api("GET", p.records, { token: tenant.readToken });
    }
    expect(first.status, "the new allowance applies within 10 s").toBe(200);
    const more = [first];
    for (let i = 0; i < 6; i++) more.push(await api("GET", p.records, { token: tenant.readToken }));
    expect(more.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429]);
    // The refused create wrote nothing: the first record and the three admitted creates.
    expect(
      first.body.data.records.map(
        (r: { data: Record<string, unknown> }) => Object.values(r.data)[0],
      ),
    ).toEqual(["y", "x", "x", "x"]);
    await eventualUsage(tenant, "api_calls_this_month", 25);
  });
});

describe("the monthly API-call allowance under parallel calls", () => {
  it("admits exactly the calls left, in each organization on its own", async () => {
    const tenants = [await createTenant(sys, api), await createTenant(sys, api)];
    const allowances = [10, 4];
    const setups = [];
    for (const [index, tenant] of tenants.entries()) {
      const table = await createTable(api, tenant, [{ name: "Name", type: "text" }]);
      const used = await counted(sys, "api-calls", tenant.orgId);
      await enterpriseLimits(sys, tenant, { "api-calls-per-month": used + allowances[index]! });
      setups.push({ tenant, table, p: v1(tenant.databaseId, table.tableId) });
    }
    // Creates, reads and a member's session reads of both organizations, all at once.
    const responses = await Promise.all(
      setups.flatMap(({ tenant, table, p }) =>
        Array.from({ length: 24 }, (_, i) =>
          i % 3 === 0
            ? api("POST", p.records, { token: tenant.writeToken, body: { data: { Name: `${i}` } } })
            : i % 3 === 1
              ? api("GET", p.records, { token: tenant.readToken })
              : api("GET", "/public/record/list", {
                  token: tenant.owner.token,
                  query: q({ database_id: tenant.databaseId, table_id: table.tableId }),
                }),
        ),
      ),
    );
    for (const [index, { tenant }] of setups.entries()) {
      const mine = responses.slice(index * 24, index * 24 + 24);
      expect(statusCounts(mine)).toEqual({
        "200 success": allowances[index],
        "429 api_call_limit_exceeded": 24 - allowances[index]!,
      });
      const admittedCreates = mine.filter((r, i) => i % 3 === 0 && r.status === 200).length;
      expect(await counted(sys, "api-calls", tenant.orgId)).toBe(
        (await limitsOf(tenant)).limits.api_calls_per_month,
      );
      // A refused create wrote nothing: the organization holds the admitted ones only.
      await eventualUsage(tenant, "records", admittedCreates);
    }
  });
});

describe("the plan the gateway caches", () => {
  it("is never one a lookup read before a plan change it raced", async () => {
    const tenant = await createTenant(sys, api);
    const organizationId = BigInt(tenant.orgId);
    const key = planCacheKey(organizationId);
    const organization = createServiceClient(OrganizationService, sys.system.grpcUrls.organization);
    // A gateway replica asks for the free plan, and its answer is delayed past a change.
    const slow = holdAnswers(organization, "getPlan");
    await sys.system.cache.del(key);
    const lookup = new PlanAllowances(
      slow.client,
      sys.system.cache,
      sys.internalJwtSecret,
    ).apiCallsPerMonth(organizationId, "e2e-slow");
    const { limits, planVersion } = await slow.answered;
    // Meanwhile another replica cached the old plan too; the change must replace it.
    await cachePlan(sys.system.cache, organizationId, planVersion, limits!);
    const old = await sys.system.cache.get(key);
    await enterpriseLimits(sys, tenant, { "api-calls-per-month": 7 });
    await expect.poll(() => sys.system.cache.get(key), { timeout: 10_000 }).not.toBe(old);
    slow.release();
    expect(await lookup).toBe(3000n);
    // Whatever the late answer did, the next lookup gets the new allowance.
    const fresh = new PlanAllowances(organization, sys.system.cache, sys.internalJwtSecret);
    expect(await fresh.apiCallsPerMonth(organizationId, "e2e-fresh")).toBe(7n);
  });
});

describe("the per-token rate limit", () => {
  it("answers 429 too_many_requests with Retry-After per token", async () => {
    const limited = await startTestSystem({
      RATE_LIMITS: `${RELAXED_RATE_LIMITS},records_token=5/60,records_user=5/60`,
    });
    try {
      const limitedApi = client(limited.baseUrl);
      const tenant = await createTenant(limited, limitedApi);
      const table = await createTable(limitedApi, tenant, [{ name: "Name", type: "text" }]);
      const p = v1(tenant.databaseId, table.tableId);
      const responses: ApiResponse[] = [];
      for (let i = 0; i < 6; i++) {
        responses.push(await limitedApi("GET", p.records, { token: tenant.readToken }));
      }
      expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
      const last = responses[5]!;
      expect(last.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(last.headers.get("retry-after"))).toBeGreaterThan(0);
      // Another token of the same organization has an allowance of its own.
      const second = await createApiToken(limitedApi, tenant.owner, tenant.orgId, "read");
      expect((await limitedApi("GET", p.records, { token: second })).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });
});
