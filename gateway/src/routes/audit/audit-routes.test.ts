import { createServiceClient } from "@rowbase/kit";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { closedPortUrl } from "../../testing/closed-port.js";
import { routeSuite, validation } from "../../testing/route-checks.js";
import { auditRoutes } from "./audit-routes.js";

/**
 * `/audit/list` through the real pipeline with the organization service unreachable: whatever is
 * answered without it (401, 400) was decided before asking it, and asking it answers 503. What
 * the service answers is tested against the running system in test/e2e/audit-routes.e2e.test.ts.
 */

describe("/audit/list", () => {
  const suite = routeSuite(async () =>
    auditRoutes({ organization: createServiceClient(OrganizationService, await closedPortUrl()) }),
  );

  it("answers 401 without a session and to an API token, before reading the query", async () => {
    for (const token of [undefined, `rb_${"a".repeat(40)}`]) {
      const response = await suite.harness.request("GET", "/audit/list?limit=x", { token });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: "unauthorized", data: {} });
    }
  });

  it("refuses no scope, two scopes and bad values before asking the service", async () => {
    const required = "one of organization_id, database_id and table_id is required";
    const cases: [string, unknown[]][] = [
      [
        "/audit/list",
        ["organization_id", "database_id", "table_id"].map((key) => ({
          key,
          message: required,
          source: "query",
          code: "invalid_value",
        })),
      ],
      [
        "/audit/list?organization_id=1&database_id=2",
        ["organization_id", "database_id"].map((key) => ({
          key,
          message: "give only one of organization_id, database_id and table_id",
          source: "query",
          code: "invalid_value",
        })),
      ],
      [
        "/audit/list?database_id=1&limit=0&offset=-3",
        [
          {
            key: "limit",
            message: "must be an integer between 1 and 1000",
            source: "query",
            code: "out_of_range",
          },
          {
            key: "offset",
            message: "must be an integer between 0 and 2147483647",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "/audit/list?database_id=1&since=2026-11-21",
        [
          {
            key: "since",
            message: "must be an RFC 3339 date-time such as 2026-11-21T10:15:00.000Z",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "/audit/list?database_id=1&since=2026-11-21T10:00:00Z&until=2026-11-21T09:00:00Z",
        [{ key: "until", message: "must be after since", source: "query", code: "invalid_value" }],
      ],
      [
        `/audit/list?table_id=1&action=${"a".repeat(101)}`,
        [
          {
            key: "action",
            message: "must be at most 100 characters",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "/audit/list?table_id=1&api_key=x",
        [{ key: "api_key", message: expect.any(String), source: "query", code: "invalid_value" }],
      ],
    ];
    for (const [path, extra] of cases) {
      const response = await suite.harness.request("GET", path, { token: suite.session });
      expect({ path, status: response.status, body: response.body }).toEqual({
        path,
        status: 400,
        body: validation("GET", "/audit/list", extra),
      });
    }
  });

  it("answers 503 when the organization service cannot be reached", async () => {
    const response = await suite.harness.request("GET", "/audit/list?organization_id=1", {
      token: suite.session,
    });
    expect(response.status).toBe(503);
    expect(response.body).toEqual({ message: "service_unavailable", data: {} });
  });
});
