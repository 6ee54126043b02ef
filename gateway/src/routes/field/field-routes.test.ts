import type { CallOptions, Client } from "@connectrpc/connect";
import { createServiceClient } from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import { describe, expect, it } from "vitest";
import { FIELD_TYPES } from "../../presentation/field-types.js";
import type { Route } from "../../routing/route.js";
import { closedPortUrl } from "../../testing/closed-port.js";
import {
  ID_MESSAGE,
  routeSuite,
  type ValidRequest,
  validation,
} from "../../testing/route-checks.js";
import { MAX_JSON_DEPTH } from "../../validation/json-object.js";
import { fieldRoutes } from "./field-routes.js";

/**
 * The field routes through the real pipeline, with the catalog client pointed at a closed port
 * (a request that passes validation shows up as 503: the call was made). Whether options fit a
 * type is the service's call, so options of any content pass here.
 */

async function routesAtClosedPort(): Promise<Route[]> {
  const catalog = createServiceClient(CatalogService, await closedPortUrl());
  return fieldRoutes({ catalog, schemaChangeMs: SCHEMA_CHANGE_MS });
}

const SCHEMA_CHANGE_MS = 602_000;

/** Each route with a request that passes validation. */
const VALID: ValidRequest[] = [
  ["POST", "/field/create?table_id=1", { name: "Email", type: "email" }],
  [
    "POST",
    "/field/create?table_id=1",
    {
      name: "Stage",
      type: "multi_select",
      options: { choices: [{ name: "New", color: "blue" }, { name: "Won" }] },
      required: true,
      description: "Where the deal is",
    },
  ],
  // Unknown option keys are the service's to refuse (invalid_field_options).
  ["POST", "/field/create?table_id=1", { name: "N", type: "number", options: { digits: 2 } }],
  ["GET", "/field/list?table_id=1"],
  ["POST", "/field/update?field_id=3", {}],
  ["POST", "/field/update?field_id=3", { position: 0 }],
  ["POST", "/field/update?field_id=3", { position: 1_000_000_000_000 }],
  [
    "POST",
    "/field/update?field_id=3",
    { name: "Phone", type: "phone", options: {}, required: false, description: "" },
  ],
  ["POST", "/field/delete?field_id=3"],
];

const TYPE_MESSAGE = `must be one of ${FIELD_TYPES.join(", ")}`;

/** The schema reads an API token may make too. */
const TOKEN_READS = ["GET /field/list"];

describe("field routes", () => {
  const suite = routeSuite(routesAtClosedPort, VALID);

  it("serve exactly the field routes, for a session (the reads for an API token too)", async () => {
    const routes = await routesAtClosedPort();
    suite.expectSessionRoutes(routes, TOKEN_READS);
  });

  it("answer 401 without a session, and to an API token except the reads, before reading the request", async () => {
    await suite.expectUnauthorized({ type: "nope" }, TOKEN_READS);
  });

  it("call the catalog service once the request is valid (503: it is not running)", async () => {
    await suite.expectServiceCalled();
  });

  it("refuse unknown type names, options that are not an object, and bad ids", async () => {
    // One object more than allowed: the innermost sits under MAX_JSON_DEPTH keys.
    let deep: unknown = {};
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = { a: deep };
    await suite.expectRefused([
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "string" },
        [{ key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" }],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "TEXT" },
        [{ key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" }],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F" },
        [{ key: "type", message: "is required", source: "body", code: "invalid_value" }],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "number", options: "decimals=2" },
        [
          {
            key: "options",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "number", options: null },
        [
          {
            key: "options",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "json", options: deep },
        [
          {
            key: ["options", ...Array(MAX_JSON_DEPTH).fill("a")].join("."),
            message: `must not nest more than ${MAX_JSON_DEPTH} levels deep`,
            source: "body",
            code: "invalid_value",
          },
        ],
      ],
      [
        "POST",
        "/field/create?table_id=1",
        { name: "F", type: "text", table_id: 1, id: 5 },
        [
          { key: "table_id", message: "is not allowed", source: "body", code: "unknown_key" },
          { key: "id", message: "is not allowed", source: "body", code: "unknown_key" },
        ],
      ],
      [
        "POST",
        "/field/create?table_id=abc",
        { name: "F", type: "text" },
        [{ key: "table_id", message: ID_MESSAGE, source: "query", code: "invalid_value" }],
      ],
      [
        "GET",
        "/field/list",
        undefined,
        [{ key: "table_id", message: "is required", source: "query", code: "required" }],
      ],
      [
        "POST",
        "/field/update?field_id=3",
        { type: "rich_text", options: [], position: -1 },
        [
          { key: "type", message: TYPE_MESSAGE, source: "body", code: "invalid_value" },
          {
            key: "options",
            message: "must be a JSON object",
            source: "body",
            code: "invalid_value",
          },
          {
            key: "position",
            message: "must be an integer of at least 0",
            source: "body",
            code: "out_of_range",
          },
        ],
      ],
      [
        "POST",
        "/field/update?field_id=3",
        { position: 1.5, table_id: 2 },
        [
          {
            key: "position",
            message: "must be an integer of at least 0",
            source: "body",
            code: "invalid_value",
          },
          { key: "table_id", message: "is not allowed", source: "body", code: "unknown_key" },
        ],
      ],
      [
        "POST",
        "/field/update?table_id=1",
        { name: "F" },
        [
          { key: "field_id", message: "is required", source: "query", code: "required" },
          { key: "table_id", message: "is not allowed", source: "query", code: "unknown_key" },
        ],
      ],
      [
        "POST",
        "/field/delete?field_id=9007199254740992",
        undefined,
        [{ key: "field_id", message: ID_MESSAGE, source: "query", code: "out_of_range" }],
      ],
    ]);
  });

  it("refuse an option number a Struct cannot carry as sent (JSON.parse makes it Infinity)", async () => {
    const response = await suite.harness.request("POST", "/field/create?table_id=1", {
      token: suite.session,
      rawJson: '{"name": "F", "type": "number", "options": {"min": 0, "max": 1e999}}',
    });
    expect({ status: response.status, body: response.body }).toEqual({
      status: 400,
      body: validation("POST", "/field/create", [
        {
          key: "options.max",
          message: "must be a finite number",
          source: "body",
          code: "invalid_value",
        },
      ]),
    });
  });

  it("give an update that may convert stored values the schema change's deadline, any other the request's", async () => {
    const deadlines: (number | undefined)[] = [];
    const catalog = {
      async updateField(_request: unknown, options: CallOptions) {
        deadlines.push(options.timeoutMs);
        throw new Error("not answered");
      },
    } as unknown as Client<typeof CatalogService>;
    const update = fieldRoutes({ catalog, schemaChangeMs: SCHEMA_CHANGE_MS }).find(
      (route) => route.path === "/field/update",
    )!;
    const bodies = [
      { type: "number" },
      { options: { decimals: 2 } },
      { required: true },
      { name: "Renamed" },
      { position: 2, description: "moved" },
    ];
    for (const body of bodies) {
      await expect(
        update.handle({
          ctx: undefined as never,
          query: { field_id: 3n },
          body,
          params: undefined,
          caller: undefined,
          call: { timeoutMs: 10_000 },
        }),
      ).rejects.toThrow("not answered");
    }
    expect(deadlines).toEqual([
      SCHEMA_CHANGE_MS,
      SCHEMA_CHANGE_MS,
      SCHEMA_CHANGE_MS,
      10_000,
      10_000,
    ]);
  });
});
