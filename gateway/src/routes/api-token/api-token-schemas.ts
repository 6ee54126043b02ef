import { z } from "zod";
import { TOKEN_ACCESS } from "../../presentation/organization-enums.js";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { name, oneOf, queryId } from "../../validation/fields.js";

/** Query parameters of the API-token routes. */

const organizationId = queryId.describe("The organization the tokens belong to");

export const ApiTokenOrganizationQuery = z.strictObject({ organization_id: organizationId });

export const ApiTokenIdQuery = z.strictObject({
  organization_id: organizationId,
  token_id: queryId.describe("The token"),
});

/** Request body, under its published schema name. */

export const ApiTokenCreateSchema = requestBody(
  "ApiTokenCreateSchema",
  z.strictObject({
    name,
    access: oneOf(TOKEN_ACCESS).describe(
      "`read`: list, get, serve files, ask for file URLs; `read_write`: also write",
    ),
  }),
);

/** Response `data` of the API-token routes. */

export const ApiTokenSchema = responseData(
  "ApiToken",
  z.object({
    token_id: z.number().int(),
    name: z.string(),
    access: z.enum(TOKEN_ACCESS),
    token_prefix: z.string().describe("The first 8 characters of the secret, `rb_` included"),
    created_at: z.iso.datetime(),
    last_used_at: z.iso.datetime().nullable().describe("null when the token was never used"),
  }),
);

export const ApiTokenCreateDataSchema = responseData(
  "ApiTokenCreate",
  z.object({
    api_token: ApiTokenSchema,
    token: z
      .string()
      .describe(
        "The secret for `Authorization: Bearer`: `rb_` and 40 base62 characters; shown only this once",
      ),
  }),
);

export const ApiTokenListSchema = responseData(
  "ApiTokenList",
  z.object({ api_tokens: z.array(ApiTokenSchema).describe("Never with the secret") }),
);
