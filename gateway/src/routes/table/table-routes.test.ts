import { createServiceClient } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { describe, expect, it } from "vitest";
import { FIELD_TYPES } from "../../presentation/field-types.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import { ID_MESSAGE, routeSuite, type ValidRequest } from "../../testing/route-checks.js";
import { tableRoutes } from "./table-routes.js";

/**
 * The table routes through the real pipeline, with the catalog client pointed at a closed port
 * (a request that passes validation shows up as 503: the call was made).
 */

async function routesAtClosedPort(): Promise<Route[]> {
  const catalog = createServiceClient(CatalogService, await closedPortUrl());
  return tableRoutes({ catalog });
}

const manyFields = (count: number) =>
  Array.from({ length: count }, (_, i) => ({ name: `Field ${i}`, type: "text" }));

/** Each route with a request that passes validation. */
const VALID: ValidRequest[] = [
  ["POST", "/table/create?database_id=1", { name: "Leads" }],
  [
    "POST",
    "/table/create?database_id=1",
    {
      name: "Leads",
      description: "From the web form",
      fields: [
        { name: "Email", type: "email", required: true },
        { name: "Stage", type: "single_select", options: { choices: [{ name: "New" }] } },
        { name: "Score", type: "number", options: { decimals: 1 }, description: "0-10" },
        ...FIELD_TYPES.map((type) => ({ name: `A ${type}`, type })),
      ],
    },
  ],
  ["POST", "/table/create?database_id=1", { name: "Wide", fields: manyFields(500) }],
  ["GET", "/table/get?table_id=2"],
  ["POST", "/table/update?table_id=2", { name: "Deals" }],
  ["POST", "/table/delete?table_id=2"],
  ["GET", "/table/list?database_id=1"],
];

const TYPE_MESSAGE = `must be one of ${FIELD_TYPES.join(", ")}`;

/** The schema reads an API token may make too. */
const TOKEN_READS = ["GET /table/get", "GET /table/list"];

describe("table routes", () => {
  const suite = routeSuite(routesAtClosedPort, VALID);

  it("serve exactly the table routes, for a session (the reads for an API token too)", async () => {
    const routes = await routesAtClosedPort();
    suite.expectSessionRoutes(routes, TOKEN_READS);
    expect(routes.every((route) => route.rateLimits.length === 0)).toBe(true);
  });

  it("answer 401 without a session, and to an API token except the reads, before reading the request", async () => {
    await suite.expectUnauthorized({ unknown: true }, TOKEN_READS);
  });

  it("call the catalog service once the request is valid (503: it is not running)", async () => {
    await suite.expectServiceCalled();
  });

  it("refuse bad ids, bad fields and unknown keys with the validation envelope", async () => {
    await suite.expectRefused([
      [
        "POST",
        "/table/create",
        { name: "T" },
        [{ key: "database_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "POST",
        "/table/create?database_id=1",
        {
          name: "T",
          fields: [
            { name: "ok", type: "text" },
            { name: "bad type", type: "varchar" },
            { name: "bad options", type: "number", options: [{ decimals: 2 }] },
            { name: "", type: "text", position: 0 },
          ],
          primary_key: "ok",
        },
        [
          { key: "fields.1.type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" },
          {
            key: "fields.2.options",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_value",
          },
          {
            key: "fields.3.name",
            message: "must be 1-100 characters",
            source: "body",
            code: "too_short",
          },
          {
            key: "fields.3.position",
            message: "is not allowed",
            source: "body",
            code: "unknown_key",
          },
          { key: "primary_key", message: "is not allowed", source: "body", code: "unknown_key" },
        ],
      ],
      [
        "POST",
        "/table/create?database_id=1",
        { name: "T", fields: manyFields(501) },
        [
          {
            key: "fields",
            message: "must have at most 500 items",
            source: "body",
            code: "too_long",
          },
        ],
      ],
      [
        "POST",
        "/table/create?database_id=1",
        { name: "T", fields: { name: "F", type: "text" } },
        [{ key: "fields", message: "must be an array", source: "body", code: "invalid_type" }],
      ],
      [
        "GET",
        "/table/get?table_id=-3",
        undefined,
        [{ key: "table_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
      [
        "POST",
        "/table/update?table_id=2",
        { name: "Deals", fields: [] },
        [{ key: "fields", message: "is not allowed", source: "body", code: "unknown_key" }],
      ],
      [
        "POST",
        "/table/delete?table_id=2&database_id=1",
        undefined,
        [{ key: "database_id", message: "is not allowed", source: "query", code: "unknown_key" }],
      ],
      [
        "GET",
        "/table/list?database_id=1e3",
        undefined,
        [{ key: "database_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
    ]);
  });
});
