import { z } from "zod";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { description, name, queryId } from "../../validation/fields.js";

/** Query parameters of the database routes. */

export const DatabaseOrganizationQuery = z.strictObject({
  organization_id: queryId.describe("The organization that owns the databases"),
});

export const DatabaseIdQuery = z.strictObject({ database_id: queryId.describe("The database") });

/** Request bodies, under their published schema names. */

export const DatabaseCreateSchema = requestBody(
  "DatabaseCreateSchema",
  z.strictObject({ name, description: description.optional() }),
  "Without description, the database has an empty one.",
);

export const DatabaseUpdateSchema = requestBody(
  "DatabaseUpdateSchema",
  z.strictObject({ name: name.optional(), description: description.optional() }),
  "Keys left out keep their value.",
);

/** Response `data` of the database routes. */

const id = z.number().int();
const time = z.iso.datetime();

export const DatabaseSchema = responseData(
  "Database",
  z.object({
    database_id: id,
    organization_id: id,
    name: z.string(),
    description: z.string().describe("Empty when none was given"),
    created_at: time,
    updated_at: time,
  }),
);

/** `{"database"}`, whose envelope is DatabaseGetResponse. */
export const DatabaseGetSchema = responseData(
  "DatabaseGet",
  z.object({ database: DatabaseSchema }),
);

export const DatabaseListSchema = responseData(
  "DatabaseList",
  z.object({ databases: z.array(DatabaseSchema) }),
);

/**
 * `{"deleted_id"}`, DeleteResponse: what /database/delete and /table/delete
 * answer.
 */
export const DeleteSchema = responseData(
  "Delete",
  z.object({ deleted_id: id.describe("The id of the deleted database or table") }),
);
