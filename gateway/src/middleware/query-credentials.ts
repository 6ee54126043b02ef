import type { Middleware } from "koa";
import { ValidationFailed } from "../errors/validation-failed.js";
import type { GatewayState } from "../gateway-context.js";

/** Query parameters that would carry a credential into access logs and browser history. */
export const CREDENTIAL_QUERY_PARAMETERS = ["token", "access_token", "api_key"];

/**
 * A credential in the query string is refused before anything else runs, on every path, with
 * the validation envelope naming the parameter: such a URL ends up in access logs, proxies and
 * browser history.
 */
export function refuseQueryCredentials(): Middleware<GatewayState> {
  return async (ctx, next) => {
    const offending = Object.keys(ctx.query).filter((name) =>
      CREDENTIAL_QUERY_PARAMETERS.includes(name.toLowerCase()),
    );
    if (offending.length > 0) {
      throw new ValidationFailed(
        offending.map((key) => ({
          key,
          message: "credentials are not accepted in the query string; use the Authorization header",
          source: "query",
          code: "invalid_value",
        })),
      );
    }
    await next();
  };
}
