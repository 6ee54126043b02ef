import { createServiceClient } from "@rowbase/kit";
import { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { describe, expect, it } from "vitest";
import { parseRateLimits } from "../../rate-limit/rate-limit-settings.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { ID_MESSAGE, routeSuite, type ValidRequest } from "../../testing/route-checks.js";
import { startRouteHarness } from "../../testing/route-harness.js";
import { apiTokenRoutes } from "../api-token/api-token-routes.js";
import { organizationRoutes } from "./organization-routes.js";

/**
 * The organization and API-token routes through the real pipeline, with the organization client
 * pointed at a closed port: everything decided before the service call is checked here, and a
 * request that passes shows up as 503 (the call was made). Answers of the running service are
 * the e2e tests' job.
 */

async function routesAtClosedPort(): Promise<Route[]> {
  const organization = createServiceClient(OrganizationService, await closedPortUrl());
  return [...organizationRoutes({ organization }), ...apiTokenRoutes({ organization })];
}

/** Each route with a request that passes validation. */
const VALID: ValidRequest[] = [
  ["POST", "/organization/create", { name: "Acme" }],
  ["GET", "/organization/get?organization_id=1"],
  ["GET", "/organization/get?organization_slug=acme"],
  ["GET", "/organization/list"],
  ["POST", "/organization/update?organization_id=1", { name: "Acme 2" }],
  ["POST", "/organization/delete?organization_id=1"],
  ["GET", "/organization/limits?organization_id=1"],
  ["POST", "/organization/invite/create?organization_id=1", { email: "a@b.co", role: "admin" }],
  ["POST", "/organization/invite/cancel?organization_id=1&invite_id=2"],
  ["GET", "/organization/invite/list?organization_id=1"],
  ["GET", "/organization/my_invite/list"],
  ["POST", "/organization/my_invite/accept?invite_id=2"],
  ["POST", "/organization/my_invite/decline?invite_id=2"],
  ["GET", "/organization/member/list?organization_id=1"],
  ["POST", "/organization/member/update?organization_id=1&member_id=3", { role: "viewer" }],
  ["POST", "/organization/member/remove?organization_id=1&member_id=3"],
  ["POST", "/organization/transfer/send_code?organization_id=1", { member_id: 3 }],
  ["POST", "/organization/transfer/confirm?organization_id=1", { member_id: 3, code: "123456" }],
  ["POST", "/api_token/create?organization_id=1", { name: "Zapier", access: "read" }],
  ["GET", "/api_token/list?organization_id=1"],
  ["POST", "/api_token/revoke?organization_id=1&token_id=4"],
];

describe("organization and API-token routes", () => {
  const suite = routeSuite(routesAtClosedPort, VALID);

  it("serves exactly the organization routes but api_stats", async () => {
    const routes = await routesAtClosedPort();
    suite.expectSessionRoutes(routes);
  });

  it("answer 401 without a session, and to an API token, before reading the request", async () => {
    await suite.expectUnauthorized({ unknown: true });
  });

  it("call the organization service once the request is valid (503: it is not running)", async () => {
    await suite.expectServiceCalled();
  });

  it("refuse bad ids, missing parameters and unknown ones with the validation envelope", async () => {
    await suite.expectRefused([
      [
        "GET",
        "/organization/limits?organization_id=-1",
        undefined,
        [{ key: "organization_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
      [
        "GET",
        "/organization/member/list",
        undefined,
        [{ key: "organization_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "POST",
        "/organization/invite/cancel?organization_id=1&invite_id=1.5",
        undefined,
        [{ key: "invite_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
      [
        "POST",
        "/organization/member/remove?organization_id=1&member_id=9007199254740992",
        undefined,
        [{ key: "member_id", message: ID_MESSAGE, source: "query", code: "out_of_range" }],
      ],
      [
        "POST",
        "/organization/my_invite/accept?invite_id=1&invite_id=2",
        undefined,
        [
          {
            key: "invite_id",
            message: "must be given once",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "GET",
        "/organization/list?organization_id=1",
        undefined,
        [
          {
            key: "organization_id",
            message: "is not allowed",
            source: "query",
            code: "unknown_key",
          },
        ],
      ],
      [
        "GET",
        "/organization/get",
        undefined,
        [
          {
            key: "organization_id",
            message: "organization_id or organization_slug is required",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "GET",
        "/organization/get?organization_id=1&organization_slug=acme",
        undefined,
        [
          {
            key: "organization_slug",
            message: "must not be given together with organization_id",
            source: "query",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/organization/create",
        { name: "A", plan: "business" },
        [{ key: "plan", message: "is not allowed", source: "body", code: "unknown_key" }],
      ],
      [
        "POST",
        "/organization/update?organization_id=x",
        { organization_slug: "A B" },
        [
          { key: "organization_id", message: ID_MESSAGE, source: "query", code: "invalid_value" },
          {
            key: "organization_slug",
            message: "must be 3-48 characters of a-z, 0-9 and -",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/organization/invite/create?organization_id=1",
        { email: "a@b.co", role: "owner" },
        [
          {
            key: "role",
            message: "must be one of admin, editor, viewer",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/organization/member/update?organization_id=1&member_id=2",
        { role: "owner" },
        [
          {
            key: "role",
            message: "must be one of admin, editor, viewer",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/organization/transfer/send_code?organization_id=1",
        { member_id: "3" },
        [{ key: "member_id", message: "must be a number", source: "body", code: "invalid_type" }],
      ],
      [
        "POST",
        "/organization/transfer/confirm?organization_id=1",
        { member_id: 3, code: "abc" },
        [{ key: "code", message: "must be 6 digits", source: "body", code: "invalid_value" }],
      ],
      [
        "POST",
        "/api_token/create?organization_id=1",
        { name: "x", access: "admin" },
        [
          {
            key: "access",
            message: "must be one of read, read_write",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/api_token/revoke?organization_id=1",
        undefined,
        [{ key: "token_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "POST",
        "/organization/create",
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
    ]);
  });
});

describe("org_write_user over HTTP", () => {
  it("shares one per-user allowance among the creating and deleting routes, counted before validation", async () => {
    const settings = parseRateLimits("org_write_user=6/60");
    if (!settings.ok) throw new Error(settings.problems.join("; "));
    const harness = await startRouteHarness(await routesAtClosedPort(), {
      rateLimits: settings.settings,
    });
    try {
      const ann = await harness.sessionToken(1n);
      const statuses: number[] = [];
      for (const [path, json] of [
        ["/organization/create", { name: "Acme" }],
        ["/organization/invite/create?organization_id=1", { email: "a@b.co", role: "viewer" }],
        ["/api_token/create?organization_id=1", { name: "t", access: "read" }],
        ["/organization/transfer/send_code?organization_id=1", {}],
        ["/organization/transfer/confirm?organization_id=1", { member_id: 2, code: "123456" }],
        ["/organization/delete?organization_id=1", undefined],
        ["/organization/create", { name: "Acme" }],
        ["/organization/delete?organization_id=1", undefined],
      ] as const) {
        const response = await harness.request("POST", path, {
          token: ann,
          ...(json ? { json } : {}),
        });
        statuses.push(response.status);
      }
      expect(statuses).toEqual([503, 503, 503, 400, 503, 503, 429, 429]);

      // Not limited: reading.
      expect((await harness.request("GET", "/organization/list", { token: ann })).status).toBe(503);

      // Another user has an allowance of their own.
      const bob = await harness.sessionToken(2n);
      const other = await harness.request("POST", "/organization/create", {
        token: bob,
        json: { name: "Bob's" },
      });
      expect(other.status).toBe(503);
    } finally {
      await harness.close();
    }
  });
});
