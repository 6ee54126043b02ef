import { createClient, createRouterTransport } from "@connectrpc/connect";
import { Code, domainError } from "@rowbase/kit";
import {
  type GetApiStatsRequest,
  OrganizationService,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type RouteHarness, startRouteHarness } from "../../testing/route-harness.js";
import { apiStatsRoutes } from "./api-stats-routes.js";

/** `/organization/api_stats` through the real pipeline, against an in-memory service. */

const asked: GetApiStatsRequest[] = [];
let answer: () => unknown;

const organization = createClient(
  OrganizationService,
  createRouterTransport(({ service }) => {
    service(OrganizationService, {
      async getApiStats(request) {
        asked.push(request);
        return answer() as never;
      },
    });
  }),
);

const STATS = {
  stats: {
    fromDate: "2026-11-01",
    toDate: "2026-11-01",
    apiCalls: 3n,
    transferBytes: 42n,
    days: [{ date: "2026-11-01", apiCalls: 3n, transferBytes: 42n }],
    tokens: [{ tokenId: 5n, name: "Zapier", apiCalls: 2n }],
  },
};

describe("/organization/api_stats", () => {
  let harness: RouteHarness;
  let session: string;

  beforeAll(async () => {
    harness = await startRouteHarness(apiStatsRoutes({ organization }));
    session = await harness.sessionToken(42n);
  });

  afterAll(async () => {
    await harness.close();
  });

  beforeEach(() => {
    asked.length = 0;
    answer = () => STATS;
  });

  it("asks for the period given, or the default one, and presents the statistics", async () => {
    const response = await harness.request(
      "GET",
      "/organization/api_stats?organization_id=7&from=2026-11-01&to=2026-11-01",
      { token: session },
    );
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toEqual({
      message: "success",
      data: {
        period: { from: "2026-11-01", to: "2026-11-01" },
        api_calls: 3,
        transfer_bytes: 42,
        daily: [{ date: "2026-11-01", api_calls: 3, transfer_bytes: 42 }],
        by_token: [{ token_id: 5, name: "Zapier", api_calls: 2 }],
      },
    });
    const defaults = await harness.request("GET", "/organization/api_stats?organization_id=7", {
      token: session,
    });
    expect(defaults.status).toBe(200);
    expect(asked.map((r) => [r.organizationId, r.fromDate, r.toDate])).toEqual([
      [7n, "2026-11-01", "2026-11-01"],
      [7n, "", ""],
    ]);
  });

  it("answers 401 to an API token and refuses bad parameters before asking", async () => {
    const token = await harness.request("GET", "/organization/api_stats?organization_id=7", {
      token: `rb_${"a".repeat(40)}`,
    });
    expect(token.status).toBe(401);
    const cases: [string, unknown[]][] = [
      ["", [{ key: "organization_id", message: "is required", source: "query" }]],
      [
        "?organization_id=7&from=2026-11-31&to=yesterday",
        [
          { key: "from", message: "must be a date YYYY-MM-DD", source: "query" },
          { key: "to", message: "must be a date YYYY-MM-DD", source: "query" },
        ],
      ],
      [
        "?organization_id=7&from=2026-11-01&from=2026-11-02",
        [{ key: "from", message: "must be given once", source: "query" }],
      ],
      [
        "?organization_id=7&month=11",
        [{ key: "month", message: "is not allowed", source: "query" }],
      ],
    ];
    for (const [query, extra] of cases) {
      const response = await harness.request("GET", `/organization/api_stats${query}`, {
        token: session,
      });
      expect({ query, status: response.status, body: response.body }).toEqual({
        query,
        status: 400,
        body: {
          status_code: 400,
          detail: "Validation failed for GET /organization/api_stats",
          extra,
        },
      });
    }
    expect(asked).toEqual([]);
  });

  it("passes on the service's 404 and its period checks", async () => {
    answer = () => {
      throw domainError(Code.NotFound, "organization_not_found");
    };
    const missing = await harness.request("GET", "/organization/api_stats?organization_id=7", {
      token: session,
    });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ message: "organization_not_found", data: {} });
    const items = [{ key: "to", message: "must be at most 366 days after from", source: "query" }];
    answer = () => {
      throw domainError(Code.InvalidArgument, "validation_failed", {
        extra: JSON.stringify(items),
      });
    };
    const long = await harness.request(
      "GET",
      "/organization/api_stats?organization_id=7&from=2024-01-01&to=2026-01-01",
      { token: session },
    );
    expect(long.status).toBe(400);
    expect((long.body as { extra: unknown }).extra).toEqual(items);
  });
});
