import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";

/**
 * What every answer says unless its route says otherwise: no cache may keep it (answers are per
 * caller, and some carry credentials: session tokens, a new API token's secret, signed file
 * links), and no browser may read it as anything but its declared type. File bytes and the API
 * documents set their own caching.
 */
export function responseHeaders(): Middleware<GatewayState> {
  return async (ctx, next) => {
    ctx.set({ "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" });
    await next();
  };
}
