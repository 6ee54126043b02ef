import { z } from "zod";
import { FIELD_TYPES } from "../../presentation/field-types.js";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { description, name, oneOf, queryId } from "../../validation/fields.js";
import { jsonObject } from "../../validation/json-object.js";

/** Query parameters of the field routes. */

export const FieldTableQuery = z.strictObject({ table_id: queryId.describe("The table") });

export const FieldIdQuery = z.strictObject({ field_id: queryId.describe("The field") });

/** Request bodies, under their published schema names. */

const fieldType = oneOf(FIELD_TYPES).describe(
  "Decides the values the field stores and the options it takes",
);

/**
 * Only the shape is checked here; whether the options fit the type is the catalog service's
 * call (400 `invalid_field_options` with `data.errors`).
 */
const fieldOptions = jsonObject.describe(
  'Options of the type, e.g. `{"decimals": 2}` for a number, `{"choices": [{"name": ' +
    '"Open"}]}` for a select, `{"table_id": 12, "multiple": true}` for a link (to a table of ' +
    'the same database; the server adds `inverse_field_id`), `{"link_field_id": 40, ' +
    '"field_id": 41}` for a lookup and the same with `"function"` (`count`, `count_values`, ' +
    "`sum`, `avg`, `min`, `max`) for a rollup. Options that do not fit the type answer 400 " +
    "`invalid_field_options` with `data.errors` naming each problem.",
);

/** What UpdateFieldRequest.position (int32) can carry; any place past the end means last. */
const MAX_POSITION = 2_147_483_647;

const POSITION_MESSAGE = "must be an integer of at least 0";

// Whole numbers past 2^53 too (zod's .int() takes safe integers only): any place past the end.
const position = z
  .number()
  .min(0, POSITION_MESSAGE)
  .refine((value) => Number.isInteger(value), POSITION_MESSAGE)
  // What OpenAPI says of it, as `.int()` would have.
  .meta({ type: "integer" })
  .transform((value) => Math.min(value, MAX_POSITION))
  .describe(
    "New 0-based place in the table's field order; the other fields shift, and a place past " +
      "the end puts the field last",
  );

export const FieldCreateSchema = requestBody(
  "FieldCreateSchema",
  z.strictObject({
    name: name.describe("Unique within the table, case-insensitively"),
    type: fieldType,
    options: fieldOptions.optional(),
    required: z
      .boolean()
      .optional()
      .describe("Must be present and non-empty on record create, and cannot be cleared"),
    description: description.optional(),
  }),
  "The field goes last in the table's field order. Without options, the type's defaults " +
    "apply. A link also creates its inverse, a link back in the target table named after this " +
    "table.",
);

export const FieldUpdateSchema = requestBody(
  "FieldUpdateSchema",
  z.strictObject({
    name: name.optional(),
    type: fieldType.optional(),
    options: fieldOptions.optional(),
    required: z.boolean().optional(),
    description: description.optional(),
    position: position.optional(),
  }),
  "Keys left out keep their value; `options` replaces the options as a whole. A type change " +
    "converts stored values where a conversion exists, else answers 400 " +
    "`field_type_change_invalid`.",
);

/** Response `data` of the field routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const FieldSchema = responseData(
  "Field",
  z.object({
    field_id: id,
    table_id: id,
    name: z.string(),
    type: z.enum(FIELD_TYPES),
    options: z
      .record(z.string(), z.unknown())
      .describe("Options of the type; select choices carry their server-given string `id`"),
    required: z.boolean(),
    description: z.string().describe("Empty when none was given"),
    position: z.number().int().min(0).describe("0-based place in the table's field order"),
    created_at: time,
    updated_at: time,
  }),
);

/** `{"field"}`, whose envelope is FieldGetResponse. */
export const FieldGetSchema = responseData("FieldGet", z.object({ field: FieldSchema }));

export const FieldListSchema = responseData(
  "FieldList",
  z.object({ fields: z.array(FieldSchema).describe("In position order") }),
);
