import { MAX_FIELDS_PER_TABLE } from "@rowbase/kit/field-types";
import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { description, name, queryId } from "../../validation/fields.js";
import { FieldCreateSchema, FieldSchema } from "../field/field-schemas.js";

/** Query parameters of the table routes. */

export const TableDatabaseQuery = z.strictObject({
  database_id: queryId.describe("The database that holds the tables"),
});

export const TableIdQuery = z.strictObject({ table_id: queryId.describe("The table") });

/** Request bodies, named after the other resources' (`<Resource><Verb>Schema`). */

/** The most fields one /table/create may bring: as many as a table may have. */
export const MAX_FIELDS_ON_CREATE = MAX_FIELDS_PER_TABLE;

export const TableCreateSchema = requestBody(
  "TableCreateSchema",
  z.strictObject({
    name: name.describe("Unique within the database"),
    description: description.optional(),
    fields: z
      .array(FieldCreateSchema)
      .max(MAX_FIELDS_ON_CREATE, `must have at most ${MAX_FIELDS_ON_CREATE} items`)
      .optional()
      .describe(
        "The table's first fields, created in this order; their names must be unique among " +
          "them. Option problems are reported under `fields.<index>.options...`.",
      ),
  }),
  "The table and its first fields are created in one step.",
);

export const TableUpdateSchema = requestBody(
  "TableUpdateSchema",
  z.strictObject({ name: name.optional(), description: description.optional() }),
  "Keys left out keep their value. Fields change through the /field routes.",
);

/** Response `data` of the table routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const TableSchema = responseData(
  "Table",
  z.object({
    table_id: id,
    database_id: id,
    name: z.string(),
    description: z.string().describe("Empty when none was given"),
    created_at: time,
    updated_at: time,
  }),
);

/** `{"table", "fields"}`: what /table/create and /table/get answer. */
export const TableGetSchema = responseData(
  "TableGet",
  z.object({
    table: TableSchema,
    fields: z.array(FieldSchema).describe("In position order"),
  }),
);

/** `{"table"}`: what /table/update answers, without the fields. */
export const TableUpdateDataSchema = responseData("TableUpdate", z.object({ table: TableSchema }));

export const TableListSchema = responseData(
  "TableList",
  z.object({ tables: z.array(TableSchema) }),
);
