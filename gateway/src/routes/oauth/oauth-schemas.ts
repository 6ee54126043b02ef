import { z } from "zod";
import { requestBody } from "../../routing/api-schemas.js";

/** Codes and states are opaque to Rowbase; this only keeps them to a sane size. */
const opaque = z.string().min(1, "is required").max(2048, "must be at most 2048 characters");

/**
 * GET /oauth/idp. The service decides whether a named `redirect_uri` is allowed (it holds the
 * list); the gateway only insists on an absolute URL.
 */
export const OAuthIdpQuery = z.strictObject({
  redirect_uri: z
    .url({ error: "must be an absolute URL" })
    .max(2048, "must be at most 2048 characters")
    .optional()
    .describe(
      "Where the provider sends the browser back with `code` and `state`: the configured " +
        "`OIDC_REDIRECT_URI` when left out, else one of `OIDC_ALLOWED_REDIRECT_URIS`",
    ),
});

/** The body of POST /oauth/exchange, under its published schema name. */
export const OAuthExchangeCodeSchema = requestBody(
  "OAuthExchangeCodeSchema",
  z.strictObject({
    code: opaque.describe("The `code` the provider appended to the redirect URI"),
    state: opaque.describe("The `state` the provider appended to the redirect URI"),
  }),
);
