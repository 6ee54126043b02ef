import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";
import { loggablePath } from "./loggable-path.js";

/**
 * One line per request with its final status (it sits above the error middleware). Health
 * probes log at debug so that a probe every few seconds does not drown the rest.
 */
export function accessLog(): Middleware<GatewayState> {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const line = {
        method: ctx.method,
        path: loggablePath(ctx.path),
        route: (ctx as { _matchedRoute?: unknown })._matchedRoute,
        status: ctx.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
      };
      if (ctx.path.startsWith("/health")) ctx.state.log.debug(line, "request");
      else ctx.state.log.info(line, "request");
    }
  };
}
