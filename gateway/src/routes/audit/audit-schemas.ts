import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { AUDIT_ACTION_FILTER, AUDIT_LIMIT_DEFAULT, AUDIT_LIMIT_MAX } from "@rowbase/kit";
import { z } from "zod";
import { responseData } from "../../routing/api-schemas.js";
import { queryId } from "../../validation/fields.js";
import { queryInteger, queryText, queryTimestamp } from "../../validation/query-values.js";

/** ListAuditEventsRequest.offset is an int32. */
export const AUDIT_OFFSET_MAX = 2_147_483_647;
/** Actions are `<target type>.<verb>`; anything longer cannot be one. */
export const AUDIT_ACTION_MAX_LENGTH = 100;

export const AUDIT_ACTOR_TYPES = ["user", "api_token", "system", "form"] as const;
export type AuditActorTypeName = (typeof AUDIT_ACTOR_TYPES)[number];

/** The query parameters that each name a scope; exactly one is given. */
const SCOPES = {
  organization_id: "organizationId",
  database_id: "databaseId",
  table_id: "tableId",
} as const;
type ScopeKey = keyof typeof SCOPES;
const SCOPE_KEYS = Object.keys(SCOPES) as ScopeKey[];
const SCOPE_LIST = "organization_id, database_id and table_id";

/** The oneof of ListAuditEventsRequest. */
export type AuditScope = {
  [K in ScopeKey]: { case: (typeof SCOPES)[K]; value: bigint };
}[ScopeKey];

function isAfter(a: Timestamp, b: Timestamp): boolean {
  return a.seconds > b.seconds || (a.seconds === b.seconds && a.nanos > b.nanos);
}

/**
 * `/audit/list`: the output is ListAuditEventsRequest's fields. The scope oneof carries one id,
 * so more than one (or none) is refused here, naming the keys; since is inclusive, until
 * exclusive, and until must come after since.
 */
export const AuditListQuery = z
  .strictObject({
    organization_id: queryId
      .optional()
      .describe("The organization: its whole log. Give exactly one of the three scopes"),
    database_id: queryId
      .optional()
      .describe("A database: its events and those of its tables, fields, records and files"),
    table_id: queryId
      .optional()
      .describe("A table: its events and those of its fields, records and files"),
    limit: queryInteger(1, AUDIT_LIMIT_MAX, AUDIT_LIMIT_DEFAULT).describe(
      `Events per page, 1-${AUDIT_LIMIT_MAX}`,
    ),
    offset: queryInteger(0, AUDIT_OFFSET_MAX, 0).describe("Events to skip, newest first"),
    since: queryTimestamp
      .optional()
      .describe("Only events at or after this instant (RFC 3339, e.g. 2026-11-21T10:15:00Z)"),
    until: queryTimestamp.optional().describe("Only events before this instant (RFC 3339)"),
    action: queryText(AUDIT_ACTION_MAX_LENGTH, {
      pattern: AUDIT_ACTION_FILTER,
      message: "must be an action such as record.updated",
    })
      .optional()
      .describe("Only events of this action, e.g. `record.updated`; empty or absent: every one"),
  })
  .transform((query, ctx) => {
    const given = SCOPE_KEYS.filter((key) => query[key] !== undefined);
    if (given.length !== 1) {
      for (const key of given.length === 0 ? SCOPE_KEYS : given) {
        ctx.addIssue({
          code: "custom",
          path: [key],
          message:
            given.length === 0
              ? `one of ${SCOPE_LIST} is required`
              : `give only one of ${SCOPE_LIST}`,
          input: query[key],
        });
      }
      return z.NEVER;
    }
    if (query.since && query.until && !isAfter(query.until, query.since)) {
      ctx.addIssue({
        code: "custom",
        path: ["until"],
        message: "must be after since",
        input: query.until,
      });
      return z.NEVER;
    }
    const key = given[0] as ScopeKey;
    return {
      scope: { case: SCOPES[key], value: query[key] as bigint } as AuditScope,
      limit: query.limit,
      offset: query.offset,
      since: query.since,
      until: query.until,
      action: query.action ?? "",
    };
  });

/** Response `data` of `/audit/list`. */

const id = z.number().int();

export const AuditChangeSchema = responseData(
  "AuditChange",
  z.object({
    key: z
      .string()
      .describe("The property name; for a record value, the field id as a decimal string"),
    label: z
      .string()
      .optional()
      .describe("For a record value: the field's name at the time of the change"),
    old: z.unknown().describe("The value before; null when there was none"),
    new: z.unknown().describe("The value after; null when there is none"),
  }),
);

export const AuditEventSchema = responseData(
  "AuditEvent",
  z.object({
    event_id: z.string(),
    at: z.iso.datetime(),
    organization_id: id,
    database_id: id.optional().describe("Present when the target is inside a database"),
    table_id: id.optional().describe("Present when the target is inside a table"),
    actor: z
      .object({
        type: z.enum(AUDIT_ACTOR_TYPES),
        id: id.describe("The user or API token; 0 for the system (a deletion carried out)"),
      })
      .describe("Who made the change"),
    action: z.string().describe('"<target type>.<verb>", e.g. "record.updated"'),
    target: z.object({
      type: z
        .string()
        .describe(
          "organization, member, invite, api_token, database, table, field, form, record or file",
        ),
      id: id.describe("The target's id; for a file, its record's row_id"),
      field_id: id.optional().describe("For a file: its field"),
    }),
    changes: z
      .array(AuditChangeSchema)
      .describe(
        "For updates, each changed key; for creates and deletes, the values set or removed",
      ),
    via: z
      .literal("mcp")
      .optional()
      .describe("Present when the change came in through the MCP endpoint (`/mcp`)"),
  }),
);

export const AuditListSchema = responseData(
  "AuditList",
  z.object({
    events: z.array(AuditEventSchema).describe("Newest first"),
    total: z.number().int().min(0).describe("Every event that matches, ignoring limit and offset"),
  }),
);
