import { timestampDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues } from "../../errors/validation-failed.js";
import { AuditListQuery } from "./audit-schemas.js";

/** What the pipeline does with the query: the parsed value, or the envelope's `extra` items. */
function parse(value: Record<string, unknown>) {
  const result = AuditListQuery.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, "query") };
}

function parsed(value: Record<string, unknown>): z.output<typeof AuditListQuery> {
  const result = parse(value);
  if (!result.ok) throw new Error(JSON.stringify(result.items));
  return result.value;
}

const SCOPE_REQUIRED = "one of organization_id, database_id and table_id is required";
const ONLY_ONE = "give only one of organization_id, database_id and table_id";

describe("/audit/list parameters", () => {
  it("take exactly one scope, as the oneof the RPC carries, with the defaults", () => {
    expect(parsed({ organization_id: "7" })).toEqual({
      scope: { case: "organizationId", value: 7n },
      limit: 50,
      offset: 0,
      since: undefined,
      until: undefined,
      action: "",
    });
    expect(parsed({ database_id: "8" }).scope).toEqual({ case: "databaseId", value: 8n });
    expect(parsed({ table_id: "9" }).scope).toEqual({ case: "tableId", value: 9n });
  });

  it("refuse none or several scopes, naming the keys", () => {
    expect(parse({})).toEqual({
      ok: false,
      items: [
        { key: "organization_id", message: SCOPE_REQUIRED, source: "query", code: "invalid_value" },
        { key: "database_id", message: SCOPE_REQUIRED, source: "query", code: "invalid_value" },
        { key: "table_id", message: SCOPE_REQUIRED, source: "query", code: "invalid_value" },
      ],
    });
    expect(parse({ organization_id: "1", table_id: "2" })).toEqual({
      ok: false,
      items: [
        { key: "organization_id", message: ONLY_ONE, source: "query", code: "invalid_value" },
        { key: "table_id", message: ONLY_ONE, source: "query", code: "invalid_value" },
      ],
    });
    expect(parse({ organization_id: "1", database_id: "2", table_id: "3" })).toMatchObject({
      ok: false,
      items: [{ key: "organization_id" }, { key: "database_id" }, { key: "table_id" }],
    });
    expect(parse({ table_id: "0" })).toEqual({
      ok: false,
      items: [
        {
          key: "table_id",
          message: "must be an integer between 1 and 9007199254740991",
          source: "query",
          code: "out_of_range",
        },
      ],
    });
  });

  it("page with limit 1-1000 and offset from 0", () => {
    expect(parsed({ table_id: "1", limit: "1000", offset: "2147483647" })).toMatchObject({
      limit: 1000,
      offset: 2147483647,
    });
    expect(parsed({ table_id: "1", limit: "1" }).limit).toBe(1);
    const limitMessage = "must be an integer between 1 and 1000";
    for (const limit of ["0", "1001", "-1", "1.5", "ten", ""]) {
      expect(parse({ table_id: "1", limit })).toEqual({
        ok: false,
        items: [
          {
            key: "limit",
            message: limitMessage,
            source: "query",
            code: /^\d+$/.test(limit) ? "out_of_range" : "invalid_value",
          },
        ],
      });
    }
    expect(parse({ table_id: "1", offset: "-1" })).toEqual({
      ok: false,
      items: [
        {
          key: "offset",
          message: "must be an integer between 0 and 2147483647",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    expect(parse({ table_id: "1", offset: "2147483648" })).toMatchObject({
      ok: false,
      items: [{ key: "offset" }],
    });
    expect(parse({ table_id: "1", limit: ["5", "6"] })).toEqual({
      ok: false,
      items: [
        { key: "limit", message: "must be given once", source: "query", code: "invalid_value" },
      ],
    });
  });

  it("bound the time with RFC 3339 instants, until after since", () => {
    const query = parsed({
      organization_id: "1",
      since: "2026-11-21T10:15:00.000Z",
      until: "2026-11-21T12:00:00+01:00",
    });
    expect(query.since && timestampDate(query.since).toISOString()).toBe(
      "2026-11-21T10:15:00.000Z",
    );
    expect(query.until && timestampDate(query.until).toISOString()).toBe(
      "2026-11-21T11:00:00.000Z",
    );
    const timeMessage = "must be an RFC 3339 date-time such as 2026-11-21T10:15:00.000Z";
    expect(parse({ organization_id: "1", since: "yesterday", until: "2026-11-21" })).toEqual({
      ok: false,
      items: [
        { key: "since", message: timeMessage, source: "query", code: "invalid_value" },
        { key: "until", message: timeMessage, source: "query", code: "invalid_value" },
      ],
    });
    for (const until of ["2026-11-21T10:15:00Z", "2026-11-21T10:00:00Z"]) {
      expect(parse({ organization_id: "1", since: "2026-11-21T10:15:00Z", until })).toEqual({
        ok: false,
        items: [
          { key: "until", message: "must be after since", source: "query", code: "invalid_value" },
        ],
      });
    }
    expect(
      parsed({
        organization_id: "1",
        since: "2026-11-21T10:15:00.000000001Z",
        until: "2026-11-21T10:15:00.000000002Z",
      }).until?.nanos,
    ).toBe(2);
  });

  it("filter by an action such as record.updated, and refuse unknown parameters", () => {
    expect(parsed({ table_id: "1", action: "record.updated" }).action).toBe("record.updated");
    expect(parsed({ table_id: "1", action: "" }).action).toBe("");
    for (const action of ["x".repeat(100), "record", "Record.Updated", "record.updated.x"]) {
      expect(parse({ table_id: "1", action })).toEqual({
        ok: false,
        items: [
          {
            key: "action",
            message: "must be an action such as record.updated",
            source: "query",
            code: "invalid_value",
          },
        ],
      });
    }
    expect(parse({ table_id: "1", action: "x".repeat(101) })).toEqual({
      ok: false,
      items: [
        {
          key: "action",
          message: "must be at most 100 characters",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    expect(parse({ table_id: "1", page: "2" })).toEqual({
      ok: false,
      items: [{ key: "page", message: "is not allowed", source: "query", code: "unknown_key" }],
    });
  });
});
