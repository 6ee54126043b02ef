import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { itemsFromIssues, type ValidationSource } from "../../errors/validation-failed.js";
import {
  InviteCreateSchema,
  InviteIdQuery,
  MemberIdQuery,
  MyInviteIdQuery,
  OrganizationCreateSchema,
  OrganizationGetQuery,
  OrganizationIdQuery,
  OrganizationUpdateSchema,
  OrgMemberUpdateSchema,
  OwnerTransferCodeRequestSchema,
  OwnerTransferConfirmSchema,
} from "./organization-schemas.js";

/** What the pipeline does with a schema: the parsed value, or the envelope's `extra` items. */
function parse(schema: z.ZodType, value: unknown, source: ValidationSource) {
  const result = schema.safeParse(value, { reportInput: true });
  return result.success
    ? { ok: true as const, value: result.data }
    : { ok: false as const, items: itemsFromIssues(result.error.issues, source) };
}

const ID_MESSAGE = "must be an integer between 1 and 9007199254740991";

describe("integer ids in the query string", () => {
  it("are read as the bigint the RPC takes, up to 2^53 - 1", () => {
    expect(parse(OrganizationIdQuery, { organization_id: "42" }, "query")).toEqual({
      ok: true,
      value: { organization_id: 42n },
    });
    expect(parse(OrganizationIdQuery, { organization_id: "9007199254740991" }, "query")).toEqual({
      ok: true,
      value: { organization_id: 9007199254740991n },
    });
  });

  it("refuse anything but one plain positive integer below 2^53", () => {
    for (const bad of [
      "abc",
      "-1",
      "1.5",
      "1e3",
      "0x10",
      " 7",
      "+7",
      "",
      "0",
      "00",
      "042",
      "9007199254740992",
      "99999999999999999999",
    ]) {
      expect({
        bad,
        result: parse(OrganizationIdQuery, { organization_id: bad }, "query"),
      }).toEqual({
        bad,
        result: {
          ok: false,
          items: [
            {
              key: "organization_id",
              message: ID_MESSAGE,
              source: "query",
              code: /^(0|[1-9][0-9]*)$/.test(bad) ? "out_of_range" : "invalid_value",
            },
          ],
        },
      });
    }
    expect(parse(OrganizationIdQuery, { organization_id: ["1", "2"] }, "query")).toEqual({
      ok: false,
      items: [
        {
          key: "organization_id",
          message: "must be given once",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
  });

  it("are required where the route needs them, and unknown parameters are refused", () => {
    expect(parse(InviteIdQuery, { organization_id: "1", page: "2" }, "query")).toEqual({
      ok: false,
      items: [
        { key: "invite_id", message: "is required", source: "query", code: "required" },
        { key: "page", message: "is not allowed", source: "query", code: "unknown_key" },
      ],
    });
    expect(parse(MemberIdQuery, { organization_id: "3", member_id: "4" }, "query")).toEqual({
      ok: true,
      value: { organization_id: 3n, member_id: 4n },
    });
    expect(parse(MyInviteIdQuery, { invite_id: "5" }, "query")).toEqual({
      ok: true,
      value: { invite_id: 5n },
    });
    expect(parse(MyInviteIdQuery, { invite_id: "5", organization_id: "1" }, "query")).toEqual({
      ok: false,
      items: [
        { key: "organization_id", message: "is not allowed", source: "query", code: "unknown_key" },
      ],
    });
  });
});

describe("/organization/get's query", () => {
  it("becomes GetOrganizationRequest's oneof for exactly one of id and slug", () => {
    expect(parse(OrganizationGetQuery, { organization_id: "7" }, "query")).toEqual({
      ok: true,
      value: { case: "organizationId", value: 7n },
    });
    expect(parse(OrganizationGetQuery, { organization_slug: "acme-1" }, "query")).toEqual({
      ok: true,
      value: { case: "organizationSlug", value: "acme-1" },
    });
  });

  it("refuses neither, both, and a malformed value with the validation items", () => {
    expect(parse(OrganizationGetQuery, {}, "query")).toEqual({
      ok: false,
      items: [
        {
          key: "organization_id",
          message: "organization_id or organization_slug is required",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    expect(
      parse(OrganizationGetQuery, { organization_id: "7", organization_slug: "acme" }, "query"),
    ).toEqual({
      ok: false,
      items: [
        {
          key: "organization_slug",
          message: "must not be given together with organization_id",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
    expect(parse(OrganizationGetQuery, { organization_slug: "Acme Corp" }, "query")).toEqual({
      ok: false,
      items: [
        {
          key: "organization_slug",
          message: "must be 3-48 characters of a-z, 0-9 and -",
          source: "query",
          code: "invalid_value",
        },
      ],
    });
  });
});

describe("organization bodies", () => {
  it("create takes a trimmed name and an optional slug, nothing else", () => {
    expect(parse(OrganizationCreateSchema, { name: "  Acme Corp  " }, "body")).toEqual({
      ok: true,
      value: { name: "Acme Corp" },
    });
    expect(
      parse(OrganizationCreateSchema, { name: "Acme", organization_slug: "acme-2" }, "body"),
    ).toEqual({ ok: true, value: { name: "Acme", organization_slug: "acme-2" } });
    expect(parse(OrganizationCreateSchema, { name: "A", plan: "business" }, "body")).toEqual({
      ok: false,
      items: [{ key: "plan", message: "is not allowed", source: "body", code: "unknown_key" }],
    });
  });

  it("checks names and slugs by the rules for names and slugs", () => {
    const slugMessage = "must be 3-48 characters of a-z, 0-9 and -";
    const cases: [unknown, { key: string; message: string }[]][] = [
      [{}, [{ key: "name", message: "is required" }]],
      [{ name: "   " }, [{ key: "name", message: "must be 1-100 characters" }]],
      [{ name: "x".repeat(101) }, [{ key: "name", message: "must be 1-100 characters" }]],
      [{ name: "A\nB" }, [{ key: "name", message: "must not contain control characters" }]],
      [{ name: "\u200b\u2060" }, [{ key: "name", message: "must contain a visible character" }]],
      // One rule, so one message: a lone bidi control is a control, not also an invisible name.
      [{ name: "\u202e" }, [{ key: "name", message: "must not contain control characters" }]],
      [{ name: "A\u0085" }, [{ key: "name", message: "must not contain control characters" }]],
      [{ name: 5 }, [{ key: "name", message: "must be a string" }]],
      [
        { name: "A", organization_slug: "ab" },
        [{ key: "organization_slug", message: slugMessage }],
      ],
      [
        { name: "A", organization_slug: "a".repeat(49) },
        [{ key: "organization_slug", message: slugMessage }],
      ],
      [
        { name: "A", organization_slug: "Acme_1" },
        [{ key: "organization_slug", message: slugMessage }],
      ],
    ];
    for (const [body, items] of cases) {
      expect({ body, result: parse(OrganizationCreateSchema, body, "body") }).toEqual({
        body,
        result: {
          ok: false,
          items: items.map((item) => ({ ...item, source: "body", code: expect.any(String) })),
        },
      });
    }
    expect(parse(OrganizationCreateSchema, { name: "x".repeat(100) }, "body").ok).toBe(true);
    expect(
      parse(OrganizationCreateSchema, { name: "A", organization_slug: "a".repeat(48) }, "body").ok,
    ).toBe(true);
  });

  it("update takes either key or none, and refuses others", () => {
    expect(parse(OrganizationUpdateSchema, {}, "body")).toEqual({ ok: true, value: {} });
    expect(parse(OrganizationUpdateSchema, { organization_slug: "new-slug" }, "body")).toEqual({
      ok: true,
      value: { organization_slug: "new-slug" },
    });
    expect(parse(OrganizationUpdateSchema, { name: "", owner: 1 }, "body")).toEqual({
      ok: false,
      items: [
        { key: "name", message: "must be 1-100 characters", source: "body", code: "too_short" },
        { key: "owner", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});

describe("invite and member bodies", () => {
  const roleMessage = "must be one of admin, editor, viewer";

  it("invite takes a normalised e-mail and a role other than owner", () => {
    expect(
      parse(InviteCreateSchema, { email: " Ann@Example.COM ", role: "editor" }, "body"),
    ).toEqual({ ok: true, value: { email: "ann@example.com", role: "editor" } });
    expect(parse(InviteCreateSchema, { email: "ann@example.com", role: "owner" }, "body")).toEqual({
      ok: false,
      items: [{ key: "role", message: roleMessage, source: "body", code: "invalid_value" }],
    });
    expect(parse(InviteCreateSchema, { email: "nope" }, "body")).toEqual({
      ok: false,
      items: [
        {
          key: "email",
          message: "must be a valid e-mail address",
          source: "body",
          code: "invalid_value",
        },
        { key: "role", message: "is required", source: "body", code: "invalid_value" },
      ],
    });
  });

  it("a member's role change refuses owner and unknown roles", () => {
    for (const role of ["admin", "editor", "viewer"]) {
      expect(parse(OrgMemberUpdateSchema, { role }, "body")).toEqual({ ok: true, value: { role } });
    }
    for (const role of ["owner", "Admin", "", 1]) {
      expect(parse(OrgMemberUpdateSchema, { role }, "body")).toEqual({
        ok: false,
        items: [{ key: "role", message: roleMessage, source: "body", code: "invalid_value" }],
      });
    }
  });
});

describe("owner transfer bodies", () => {
  it("send_code takes a member id as a JSON integer", () => {
    expect(parse(OwnerTransferCodeRequestSchema, { member_id: 12 }, "body")).toEqual({
      ok: true,
      value: { member_id: 12n },
    });
    for (const member_id of [0, -1, 2 ** 53]) {
      expect(parse(OwnerTransferCodeRequestSchema, { member_id }, "body")).toEqual({
        ok: false,
        items: [{ key: "member_id", message: ID_MESSAGE, source: "body", code: "out_of_range" }],
      });
    }
    expect(parse(OwnerTransferCodeRequestSchema, { member_id: 1.5 }, "body")).toEqual({
      ok: false,
      items: [
        { key: "member_id", message: "must be an integer", source: "body", code: "invalid_type" },
      ],
    });
    expect(parse(OwnerTransferCodeRequestSchema, { member_id: "12" }, "body")).toEqual({
      ok: false,
      items: [
        { key: "member_id", message: "must be a number", source: "body", code: "invalid_type" },
      ],
    });
  });

  it("confirm takes the member id and the 6-digit code", () => {
    expect(parse(OwnerTransferConfirmSchema, { member_id: 3, code: "012345" }, "body")).toEqual({
      ok: true,
      value: { member_id: 3n, code: "012345" },
    });
    expect(parse(OwnerTransferConfirmSchema, { member_id: 3, code: "12345" }, "body")).toEqual({
      ok: false,
      items: [{ key: "code", message: "must be 6 digits", source: "body", code: "invalid_value" }],
    });
    expect(parse(OwnerTransferConfirmSchema, { code: "123456", extra: true }, "body")).toEqual({
      ok: false,
      items: [
        { key: "member_id", message: "is required", source: "body", code: "required" },
        { key: "extra", message: "is not allowed", source: "body", code: "unknown_key" },
      ],
    });
  });
});
