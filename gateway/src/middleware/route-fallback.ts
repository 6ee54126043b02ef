import { Code, domainError } from "@rowbase/kit";
import type { Middleware } from "koa";
import { ALLOW_METADATA } from "../errors/error-table.js";
import type { GatewayState } from "../gateway-context.js";

/**
 * Reached when no route answered: the router has left the layers whose path matched in
 * `ctx.matched`, so a known path with another method is 405 (with `Allow`), anything else 404.
 * OPTIONS on a known path answers 204 with `Allow`, as HTTP expects.
 */
export function routeFallback(): Middleware<GatewayState> {
  return async (ctx) => {
    const matched = (ctx as { matched?: { methods: string[] }[] }).matched ?? [];
    const methods = [...new Set(matched.flatMap((layer) => layer.methods))];
    if (methods.length === 0) throw domainError(Code.NotFound, "not_found");
    const allow = [...methods, "OPTIONS"].join(", ");
    if (ctx.method === "OPTIONS") {
      ctx.set("Allow", allow);
      ctx.status = 204;
      return;
    }
    throw domainError(Code.Unimplemented, "method_not_allowed", { [ALLOW_METADATA]: allow });
  };
}
