import { CHANGE_TYPES, type ChangeTypeName } from "@rowbase/kit";
import { z } from "zod";
import { responseData } from "../../routing/api-schemas.js";
import { once, queryInteger, queryText } from "../../validation/query-values.js";
import { changeReadOptions, RecordSchema } from "../record/record-schemas.js";

/** Parameters and answers of a table's change feed and stream (docs/changes.md). */

export const CHANGES_LIMIT_DEFAULT = 100;
export const CHANGES_LIMIT_MAX = 1000;

/** The longest cursor text taken; the ones handed out are far shorter. */
const CURSOR_MAX_LENGTH = 100;

const after = queryText(CURSOR_MAX_LENGTH)
  .optional()
  .transform((text) => text ?? "")
  .describe(
    "Read the changes after this one: a `change_id`, a page's `next`, or `now` (no changes, and " +
      "the cursor of the present end). Absent: from the oldest change kept. A cursor older " +
      "than the retention answers 410 `cursor_expired`",
  );

const types = z
  .preprocess(once, z.string().optional())
  .transform((text, ctx) => {
    if (text === undefined || text === "") return [] as ChangeTypeName[];
    const names = text.split(",").map((name) => name.trim());
    const unknown = names.filter((name) => !(CHANGE_TYPES as readonly string[]).includes(name));
    if (unknown.length > 0) {
      ctx.addIssue({
        code: "custom",
        message: `must be a comma list of ${CHANGE_TYPES.join(", ")}`,
        input: text,
      });
      return z.NEVER;
    }
    return [...new Set(names)] as ChangeTypeName[];
  })
  .describe(
    "Only these types, comma-separated: `record.created`, `record.updated`, `record.deleted`",
  );

const limit = queryInteger(1, CHANGES_LIMIT_MAX, CHANGES_LIMIT_DEFAULT).describe(
  `Changes per page, 1-${CHANGES_LIMIT_MAX}`,
);

export const ChangesQuery = z.strictObject({ after, limit, types, ...changeReadOptions });
export const ChangeStreamQuery = z.strictObject({ after, types, ...changeReadOptions });

const id = z.number().int();

export const ChangeSchema = responseData(
  "Change",
  z.object({
    change_id: z.string().describe("Opaque; the cursor that reads on after this change"),
    type: z.enum(CHANGE_TYPES),
    at: z.iso.datetime().describe("When the write was made: the record's `updated_at`"),
    organization_id: id,
    database_id: id,
    table_id: id,
    row_id: id,
    actor: z.object({
      type: z.enum(["user", "api_token", "form", "system"]),
      id: id.describe("The user's or token's id; 0 for the system"),
    }),
    record: RecordSchema.nullable().describe("The record after the change; null for a deletion"),
    previous: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        "Updated: the old values of the changed fields; deleted: every field. Absent on creation",
      ),
    changed_fields: z
      .array(z.string())
      .optional()
      .describe("Updated only: the changed fields, keyed as `data` is"),
  }),
);

export const ChangesPageSchema = responseData(
  "ChangesPage",
  z.object({
    changes: z.array(ChangeSchema).describe("Oldest first, in the order the changes committed"),
    next: z.string().describe("The cursor to read on from (`after`)"),
    has_more: z.boolean().describe("Whether more changes follow right away"),
  }),
);
