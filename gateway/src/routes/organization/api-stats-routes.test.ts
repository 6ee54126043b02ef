import { createServiceClient } from "@rowbase/kit";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { closedPortUrl } from "../../testing/closed-port.js";
import { routeSuite } from "../../testing/route-checks.js";
import { apiStatsRoutes } from "./api-stats-routes.js";

/**
 * `/organization/api_stats` through the real pipeline with the organization service
 * unreachable: whatever is answered without it (401, 400) was decided before asking it, and
 * asking it answers 503. What the service answers is tested against the running system in
 * test/e2e/api-stats-routes.e2e.test.ts.
 */

describe("/organization/api_stats", () => {
  const suite = routeSuite(async () =>
    apiStatsRoutes({
      organization: createServiceClient(OrganizationService, await closedPortUrl()),
    }),
  );

  it("answers 401 to an API token and refuses bad parameters before asking", async () => {
    const token = await suite.harness.request("GET", "/organization/api_stats?organization_id=7", {
      token: `rb_${"a".repeat(40)}`,
    });
    expect(token.status).toBe(401);
    const cases: [string, unknown[]][] = [
      ["", [{ key: "organization_id", message: "is required", source: "query", code: "required" }]],
      [
        "?organization_id=7&from=2026-11-31&to=yesterday",
        [
          {
            key: "from",
            message: "must be a date YYYY-MM-DD",
            source: "query",
            code: "invalid_value",
          },
          {
            key: "to",
            message: "must be a date YYYY-MM-DD",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "?organization_id=7&from=0000-01-01&to=0000-12-31",
        [
          {
            key: "from",
            message: "must be a date YYYY-MM-DD",
            source: "query",
            code: "invalid_value",
          },
          {
            key: "to",
            message: "must be a date YYYY-MM-DD",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "?organization_id=7&from=2026-11-01&from=2026-11-02",
        [{ key: "from", message: "must be given once", source: "query", code: "invalid_value" }],
      ],
      [
        "?organization_id=7&month=11",
        [{ key: "month", message: "is not allowed", source: "query", code: "unknown_key" }],
      ],
    ];
    for (const [query, extra] of cases) {
      const response = await suite.harness.request("GET", `/organization/api_stats${query}`, {
        token: suite.session,
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
  });

  it("answers 503 when the organization service cannot be reached", async () => {
    const response = await suite.harness.request(
      "GET",
      "/organization/api_stats?organization_id=7",
      {
        token: suite.session,
      },
    );
    expect(response.status).toBe(503);
    expect(response.body).toEqual({ message: "service_unavailable", data: {} });
  });
});
