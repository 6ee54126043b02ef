import { startTestSystem, type TestSystem } from "@rowbase/standalone/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signUp } from "./support/accounts.js";
import { client } from "./support/http.js";
import { expectError, q } from "./support/organizations.js";
import {
  createTable,
  createTenant,
  RECORD_TEST_RATE_LIMITS,
  type Tenant,
  v1,
} from "./support/records.js";

/**
 * GET /organization/api_stats against the running system: the period the gateway asks
 * the organization service for, given or left to its default, the usage counted from real calls
 * and transfer presented per day and token, and the service's own 404 and period checks in the
 * contract's shapes. (Test/e2e/events.e2e.test.ts counts calls against the monthly allowance.)
 */

let sys: TestSystem;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sys = await startTestSystem({ RATE_LIMITS: RECORD_TEST_RATE_LIMITS });
  api = client(sys.baseUrl);
});

afterAll(async () => {
  await sys?.stop();
});

const EVENTUALLY = { timeout: 10_000, interval: 100 };

async function apiStats(tenant: Tenant, params: Record<string, string> = {}) {
  const response = await api("GET", "/organization/api_stats", {
    token: tenant.owner.token,
    query: q({ organization_id: tenant.orgId, ...params }),
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  expect(response.body.message).toBe("success");
  return response.body.data;
}

describe("/organization/api_stats", () => {
  it("asks for the period given, or the default one, and presents the statistics", async () => {
    const tenant = await createTenant(sys, api);
    const tokenResponse = await api("POST", "/api_token/create", {
      token: tenant.owner.token,
      query: q({ organization_id: tenant.orgId }),
      body: { name: "Zapier", access: "read_write" },
    });
    expect(tokenResponse.status).toBe(200);
    const zapier = {
      id: tokenResponse.body.data.api_token.token_id as number,
      secret: tokenResponse.body.data.token as string,
    };
    const table = await createTable(api, tenant, [
      { name: "Name", type: "text" },
      { name: "Doc", type: "file" },
    ]);
    const p = v1(tenant.databaseId, table.tableId);
    // One call with the owner's session, two with Zapier's token, one of them moving 42 bytes.
    const created = await api("POST", p.records, {
      token: tenant.owner.token,
      body: { data: { Name: "one" } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const rowId = created.body.data.record.row_id as number;
    expect((await api("GET", p.records, { token: zapier.secret })).status).toBe(200);
    const form = new FormData();
    form.append("file", new Blob([Buffer.alloc(42, 7)]), "answer.bin");
    const uploaded = await fetch(
      new URL(`/file/upload?row_id=${rowId}&field_id=${table.f.Doc!.field_id}`, sys.baseUrl),
      { method: "POST", headers: { authorization: `Bearer ${zapier.secret}` }, body: form },
    );
    expect(uploaded.status, await uploaded.clone().text()).toBe(200);

    const today = new Date().toISOString().slice(0, 10);
    await expect
      .poll(async () => {
        const stats = await apiStats(tenant, { from: today, to: today });
        return [stats.api_calls, stats.transfer_bytes];
      }, EVENTUALLY)
      .toEqual([3, 42]);
    expect(await apiStats(tenant, { from: today, to: today })).toEqual({
      period: { from: today, to: today },
      api_calls: 3,
      transfer_bytes: 42,
      daily: [{ date: today, api_calls: 3, transfer_bytes: 42 }],
      by_token: [{ token_id: zapier.id, name: "Zapier", api_calls: 2 }],
    });

    // Without a period: the first of this month to today.
    const first = `${today.slice(0, 8)}01`;
    const defaults = await apiStats(tenant);
    expect(defaults).toMatchObject({
      period: { from: first, to: today },
      api_calls: 3,
      transfer_bytes: 42,
      by_token: [{ token_id: zapier.id, name: "Zapier", api_calls: 2 }],
    });
    expect(defaults.daily).toHaveLength(Number(today.slice(8)));
    expect(defaults.daily[0].date).toBe(first);
    expect(defaults.daily.at(-1)).toEqual({ date: today, api_calls: 3, transfer_bytes: 42 });
    // Only `to`: `from` is still the first of this month, not of to's month.
    const later = new Date(Date.parse(`${today}T00:00:00Z`) + 40 * 24 * 3600 * 1000);
    const until = later.toISOString().slice(0, 10);
    expect((await apiStats(tenant, { to: until })).period).toEqual({ from: first, to: until });
  });

  it("passes on the service's 404 and its period checks", async () => {
    const tenant = await createTenant(sys, api);
    const outsider = await signUp(sys, api);
    for (const [token, organizationId] of [
      [tenant.owner.token, 9_000_000_000],
      [outsider.token, tenant.orgId],
    ] as const) {
      expectError(
        await api("GET", "/organization/api_stats", {
          token,
          query: q({ organization_id: organizationId }),
        }),
        404,
        "organization_not_found",
      );
    }
    const now = new Date();
    const lastOfPreviousMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 0))
      .toISOString()
      .slice(0, 10);
    const cases: [Record<string, string>, unknown[]][] = [
      [
        { from: "2024-01-01", to: "2026-01-01" },
        [
          {
            key: "from",
            message: "period must be at most 366 days",
            source: "query",
            code: "out_of_range",
          },
        ],
      ],
      [
        { from: "2026-01-02", to: "2026-01-01" },
        [{ key: "from", message: "must not be after to", source: "query", code: "out_of_range" }],
      ],
      [
        // Before this month, with `from` left to its default (this month's first day).
        { to: lastOfPreviousMonth },
        [
          {
            key: "to",
            message: "must not be before from (default: the first of this month)",
            source: "query",
            code: "out_of_range",
          },
        ],
      ],
    ];
    for (const [period, extra] of cases) {
      const response = await api("GET", "/organization/api_stats", {
        token: tenant.owner.token,
        query: q({ organization_id: tenant.orgId, ...period }),
      });
      expect({ period, status: response.status, body: response.body }).toEqual({
        period,
        status: 400,
        body: {
          status_code: 400,
          detail: "Validation failed for GET /organization/api_stats",
          extra,
        },
      });
    }
  });
});
