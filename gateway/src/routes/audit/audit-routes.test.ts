import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { Code, createServiceClient, domainError } from "@rowbase/kit";
import {
  AuditLogEntry_Actor_Type,
  AuditLogEntrySchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import {
  type ListAuditEventsRequest,
  OrganizationService,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { closedPortUrl } from "../../testing/closed-port.js";
import { type RouteHarness, startRouteHarness } from "../../testing/route-harness.js";
import { auditRoutes } from "./audit-routes.js";

/**
 * `/audit/list` through the real pipeline, with an in-memory organization service that records
 * what it was asked and answers what the test says.
 */

const asked: ListAuditEventsRequest[] = [];
let answer: () => unknown = () => ({ events: [], total: 0n });

const organization = createClient(
  OrganizationService,
  createRouterTransport(({ service }) => {
    service(OrganizationService, {
      async listAuditEvents(request) {
        asked.push(request);
        return answer() as never;
      },
    });
  }),
);

const validation = (path: string, extra: unknown[]) => ({
  status_code: 400,
  detail: `Validation failed for GET ${path}`,
  extra,
});

describe("/audit/list", () => {
  let harness: RouteHarness;
  let session: string;

  beforeAll(async () => {
    harness = await startRouteHarness(auditRoutes({ organization }));
    session = await harness.sessionToken(42n);
  });

  afterAll(async () => {
    await harness.close();
  });

  beforeEach(() => {
    asked.length = 0;
    answer = () => ({ events: [], total: 0n });
  });

  it("answers 401 without a session and to an API token, before reading the query", async () => {
    for (const token of [undefined, `rb_${"a".repeat(40)}`]) {
      const response = await harness.request("GET", "/audit/list?limit=x", { token });
      expect(response.status).toBe(401);
      expect(response.body).toEqual({ message: "unauthorized", data: {} });
    }
    expect(asked).toEqual([]);
  });

  it("asks for the one scope with the page and filters, and presents the events", async () => {
    answer = () => ({
      events: [
        create(AuditLogEntrySchema, {
          eventId: "e2",
          at: timestampFromDate(new Date("2026-11-21T10:15:00.500Z")),
          organizationId: 1n,
          databaseId: 2n,
          tableId: 3n,
          actor: { type: AuditLogEntry_Actor_Type.API_TOKEN, id: 8n },
          action: "record.updated",
          target: { type: "record", id: 4n },
          changes: [
            {
              key: "5",
              label: "Name",
              oldValue: { kind: { case: "stringValue", value: "Ada" } },
            },
          ],
        }),
      ],
      total: 7n,
    });
    const response = await harness.request(
      "GET",
      "/audit/list?table_id=3&limit=1&offset=2&since=2026-11-21T00:00:00Z&until=2026-11-22T00:00:00%2B01:00&action=record.updated",
      { token: session },
    );
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toEqual({
      message: "success",
      data: {
        events: [
          {
            event_id: "e2",
            at: "2026-11-21T10:15:00.500Z",
            organization_id: 1,
            database_id: 2,
            table_id: 3,
            actor: { type: "api_token", id: 8 },
            action: "record.updated",
            target: { type: "record", id: 4 },
            changes: [{ key: "5", label: "Name", old: "Ada", new: null }],
          },
        ],
        total: 7,
      },
    });
    expect(asked).toHaveLength(1);
    const request = asked[0]!;
    expect(request.scope).toEqual({ case: "tableId", value: 3n });
    expect([request.limit, request.offset, request.action]).toEqual([1, 2, "record.updated"]);
    expect(request.since && timestampDate(request.since).toISOString()).toBe(
      "2026-11-21T00:00:00.000Z",
    );
    expect(request.until && timestampDate(request.until).toISOString()).toBe(
      "2026-11-21T23:00:00.000Z",
    );
  });

  it("sends the defaults: 50 events from the newest, no bounds, every action", async () => {
    const response = await harness.request("GET", "/audit/list?organization_id=9", {
      token: session,
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ message: "success", data: { events: [], total: 0 } });
    expect(asked[0]).toMatchObject({
      scope: { case: "organizationId", value: 9n },
      limit: 50,
      offset: 0,
      action: "",
    });
    expect(asked[0]?.since).toBeUndefined();
    expect(asked[0]?.until).toBeUndefined();
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
        })),
      ],
      [
        "/audit/list?organization_id=1&database_id=2",
        ["organization_id", "database_id"].map((key) => ({
          key,
          message: "give only one of organization_id, database_id and table_id",
          source: "query",
        })),
      ],
      [
        "/audit/list?database_id=1&limit=0&offset=-3",
        [
          { key: "limit", message: "must be an integer between 1 and 1000", source: "query" },
          {
            key: "offset",
            message: "must be an integer between 0 and 2147483647",
            source: "query",
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
          },
        ],
      ],
      [
        "/audit/list?database_id=1&since=2026-11-21T10:00:00Z&until=2026-11-21T09:00:00Z",
        [{ key: "until", message: "must be after since", source: "query" }],
      ],
      [
        `/audit/list?table_id=1&action=${"a".repeat(101)}`,
        [{ key: "action", message: "must be at most 100 characters", source: "query" }],
      ],
      [
        "/audit/list?table_id=1&api_key=x",
        [{ key: "api_key", message: expect.any(String), source: "query" }],
      ],
    ];
    for (const [path, extra] of cases) {
      const response = await harness.request("GET", path, { token: session });
      expect({ path, status: response.status, body: response.body }).toEqual({
        path,
        status: 400,
        body: validation("/audit/list", extra),
      });
    }
    expect(asked).toEqual([]);
  });

  it("answers the service's 404 and its validation failures in the contract's shapes", async () => {
    for (const reason of ["organization_not_found", "database_not_found", "table_not_found"]) {
      answer = () => {
        throw domainError(Code.NotFound, reason);
      };
      const response = await harness.request("GET", "/audit/list?table_id=1", {
        token: session,
      });
      expect({ status: response.status, body: response.body }).toEqual({
        status: 404,
        body: { message: reason, data: {} },
      });
    }
    const items = [
      { key: "action", message: "must be an action such as record.updated", source: "query" },
    ];
    answer = () => {
      throw domainError(Code.InvalidArgument, "validation_failed", {
        extra: JSON.stringify(items),
      });
    };
    const response = await harness.request("GET", "/audit/list?table_id=1&action=drop", {
      token: session,
    });
    expect(response.status).toBe(400);
    expect(response.body).toEqual(validation("/audit/list", items));
  });

  it("answers 503 when the organization service cannot be reached", async () => {
    const down = await startRouteHarness(
      auditRoutes({
        organization: createServiceClient(OrganizationService, await closedPortUrl()),
      }),
    );
    try {
      const response = await down.request("GET", "/audit/list?organization_id=1", {
        token: await down.sessionToken(1n),
      });
      expect(response.status).toBe(503);
      expect(response.body).toEqual({ message: "service_unavailable", data: {} });
    } finally {
      await down.close();
    }
  });
});
