import { createServiceClient } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { parseRateLimits } from "../../rate-limit/rate-limit-settings.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { ID_MESSAGE, routeSuite, type ValidRequest } from "../../testing/route-checks.js";
import { startRouteHarness } from "../../testing/route-harness.js";
import { fieldRoutes } from "../field/field-routes.js";
import { organizationRoutes } from "../organization/organization-routes.js";
import { tableRoutes } from "../table/table-routes.js";
import { databaseRoutes } from "./database-routes.js";

/**
 * The database routes through the real pipeline, with the catalog client pointed at a closed
 * port: everything decided before the service call is checked here, and a request that passes
 * shows up as 503 (the call was made). Answers of the running service are the e2e tests' job.
 */

async function routesAtClosedPort(): Promise<Route[]> {
  const catalog = createServiceClient(CatalogService, await closedPortUrl());
  return databaseRoutes({ catalog });
}

/** Each route with a request that passes validation. */
const VALID: ValidRequest[] = [
  ["POST", "/database/create?organization_id=1", { name: "CRM" }],
  ["POST", "/database/create?organization_id=1", { name: " CRM ", description: "Leads\nDeals" }],
  ["GET", "/database/get?database_id=2"],
  ["POST", "/database/update?database_id=2", {}],
  ["POST", "/database/update?database_id=2", { name: "Sales", description: "" }],
  ["POST", "/database/delete?database_id=2"],
  ["GET", "/database/list?organization_id=1"],
];

/** The schema reads an API token may make too. */
const TOKEN_READS = ["GET /database/get", "GET /database/list"];

describe("database routes", () => {
  const suite = routeSuite(routesAtClosedPort, VALID);

  it("serve exactly the database routes, for a session (the reads for an API token too)", async () => {
    const routes = await routesAtClosedPort();
    suite.expectSessionRoutes(routes, TOKEN_READS);
  });

  it("answer 401 without a session, and to an API token except the reads, before reading the request", async () => {
    await suite.expectUnauthorized({ unknown: true }, TOKEN_READS);
  });

  it("call the catalog service once the request is valid (503: it is not running)", async () => {
    await suite.expectServiceCalled();
  });

  it("refuse bad ids, bad bodies and unknown keys with the validation envelope", async () => {
    await suite.expectRefused([
      [
        "POST",
        "/database/create",
        { name: "CRM" },
        [{ key: "organization_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "POST",
        "/database/create?organization_id=1",
        undefined,
        [
          {
            key: "body",
            message: "a JSON object body is required",
            source: "body",
            code: "required",
          },
        ],
      ],
      [
        "POST",
        "/database/create?organization_id=x",
        { name: "", description: 5, color: "red" },
        [
          { key: "organization_id", message: ID_MESSAGE, source: "query", code: "invalid_value" },
          { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
          { key: "description", message: "must be a string", source: "body", code: "invalid_type" },
          { key: "color", message: "is not allowed", source: "body", code: "unknown_key" },
        ],
      ],
      [
        "GET",
        "/database/get?database_id=1.0",
        undefined,
        [{ key: "database_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
      [
        "GET",
        "/database/get?organization_id=1",
        undefined,
        [
          { key: "database_id", message: "is required", source: "query", code: "required" },
          {
            key: "organization_id",
            message: "is not allowed",
            source: "query",
            code: "unknown_key",
          },
        ],
      ],
      [
        "POST",
        "/database/update?database_id=2",
        { name: "a\u0007b", organization_id: 3 },
        [
          {
            key: "name",
            message: "must not contain control characters",
            source: "body",
            code: "invalid_value",
          },
          {
            key: "organization_id",
            message: "is not allowed",
            source: "body",
            code: "unknown_key",
          },
        ],
      ],
      [
        "POST",
        "/database/delete?database_id=0",
        undefined,
        [{ key: "database_id", message: ID_MESSAGE, source: "query", code: "out_of_range" }],
      ],
      [
        "GET",
        "/database/list?organization_id=1&organization_id=2",
        undefined,
        [
          {
            key: "organization_id",
            message: "must be given once",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
    ]);
  });
});

describe("org_write_user on the database routes", () => {
  it("counts creating and deleting databases per user, with the organization routes' allowance", async () => {
    const settings = parseRateLimits("org_write_user=3/60");
    if (!settings.ok) throw new Error(settings.problems.join("; "));
    const catalog = createServiceClient(CatalogService, await closedPortUrl());
    const organization = createServiceClient(OrganizationService, await closedPortUrl());
    const harness = await startRouteHarness(
      [
        ...organizationRoutes({ organization }),
        ...databaseRoutes({ catalog }),
        ...tableRoutes({ catalog }),
        ...fieldRoutes({ catalog, schemaChangeMs: 60_000 }),
      ],
      { rateLimits: settings.settings },
    );
    try {
      const ann = await harness.sessionToken(1n);
      const statuses: number[] = [];
      for (const [path, json] of [
        ["/database/create?organization_id=1", { name: "A" }],
        ["/organization/create", { name: "Acme" }],
        // Counted before validation, like every limit.
        ["/database/create?organization_id=1", {}],
        ["/database/delete?database_id=5", undefined],
        ["/organization/create", { name: "Acme" }],
      ] as const) {
        statuses.push((await harness.request("POST", path, { token: ann, json })).status);
      }
      expect(statuses).toEqual([503, 503, 400, 429, 429]);
      const limited = await harness.request("POST", "/database/create?organization_id=1", {
        token: ann,
        json: { name: "C" },
      });
      expect(limited.body).toEqual({ message: "too_many_requests", data: {} });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);

      // Not limited: reading, updating, and the table and field routes.
      for (const [method, path, json] of [
        ["GET", "/database/list?organization_id=1", undefined],
        ["GET", "/database/get?database_id=5", undefined],
        ["POST", "/database/update?database_id=5", { name: "D" }],
        ["POST", "/table/create?database_id=5", { name: "T" }],
        ["POST", "/table/delete?table_id=6", undefined],
        ["POST", "/field/create?table_id=6", { name: "F", type: "text" }],
      ] as const) {
        const response = await harness.request(method, path, { token: ann, json });
        expect({ path, status: response.status }).toEqual({ path, status: 503 });
      }

      // Another user has an allowance of their own.
      const bob = await harness.sessionToken(2n);
      const other = await harness.request("POST", "/database/create?organization_id=1", {
        token: bob,
        json: { name: "Bob's" },
      });
      expect(other.status).toBe(503);
    } finally {
      await harness.close();
    }
  });
});
