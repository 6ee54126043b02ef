import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ApiTokenSchema as ApiTokenMessage,
  TokenAccess,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import { presentApiToken } from "./api-token-presenters.js";
import {
  ApiTokenCreateSchema,
  ApiTokenIdQuery,
  ApiTokenOrganizationQuery,
  ApiTokenSchema,
} from "./api-token-schemas.js";

function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

describe("API-token schemas", () => {
  it("take a name and an access level, nothing else", () => {
    expect(parse(ApiTokenCreateSchema, { name: " Zapier ", access: "read_write" }, "body")).toEqual(
      { ok: true, value: { name: "Zapier", access: "read_write" } },
    );
    expect(
      parse(ApiTokenCreateSchema, { name: "x", access: "admin", scope: "all" }, "body"),
    ).toEqual({
      ok: false,
      items: [
        {
          key: "access",
          message: "must be one of read, read_write",
          source: "body",
          code: "invalid_value",
        },
        { key: "scope", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
    expect(parse(ApiTokenCreateSchema, { name: "" }, "body")).toEqual({
      ok: false,
      items: [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
        { key: "access", message: "is required", source: "body", code: "invalid_value" },
      ],
    });
  });

  it("take the organization and the token as integer query parameters", () => {
    expect(parse(ApiTokenIdQuery, { organization_id: "1", token_id: "2" }, "query")).toEqual({
      ok: true,
      value: { organization_id: 1n, token_id: 2n },
    });
    expect(parse(ApiTokenIdQuery, { organization_id: "1", token_id: "x" }, "query")).toEqual({
      ok: false,
      items: [
        {
          key: "token_id",
          message: "must be an integer between 1 and 9007199254740991",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    expect(parse(ApiTokenOrganizationQuery, {}, "query")).toEqual({
      ok: false,
      items: [
        { key: "organization_id", message: "is required", source: "query", code: "required" },
      ],
    });
  });
});

describe("presentApiToken", () => {
  const token = {
    tokenId: 8n,
    name: "Zapier",
    access: TokenAccess.READ,
    tokenPrefix: "rb_AbC12",
    createdAt: timestampFromDate(new Date("2026-11-21T10:15:00Z")),
  };

  it("writes a never-used token with last_used_at null, and never a secret", () => {
    const presented = presentApiToken(create(ApiTokenMessage, token));
    expect(presented).toEqual({
      token_id: 8,
      name: "Zapier",
      access: "read",
      token_prefix: "rb_AbC12",
      created_at: "2026-11-21T10:15:00.000Z",
      last_used_at: null,
    });
    expect(ApiTokenSchema.parse(presented)).toEqual(presented);
  });

  it("writes the last use when there was one", () => {
    const used = presentApiToken(
      create(ApiTokenMessage, {
        ...token,
        access: TokenAccess.READ_WRITE,
        lastUsedAt: timestampFromDate(new Date("2026-11-22T00:00:00.5Z")),
      }),
    );
    expect(used).toMatchObject({ access: "read_write", last_used_at: "2026-11-22T00:00:00.500Z" });
  });
});
