import type { Middleware } from "koa";
import { ValidationFailed } from "../errors/validation-failed.js";
import type { GatewayState } from "../gateway-context.js";

/**
 * An HTTP/1.1 request without a `Host` header is a 400 (RFC 9112 section 3.2). Node would
 * answer it itself with a bare status line and no `X-Request-Id`, so the server is created with
 * `requireHostHeader: false` and the refusal is made here, in the validation envelope naming
 * the header. HTTP/1.0 has no such header and needs none.
 */
export function requireHost(): Middleware<GatewayState> {
  return async (ctx, next) => {
    const { httpVersionMajor, httpVersionMinor, headers } = ctx.req;
    const http11 = httpVersionMajor > 1 || (httpVersionMajor === 1 && httpVersionMinor >= 1);
    if (http11 && headers.host === undefined) {
      throw ValidationFailed.of("header", "host", "is required");
    }
    await next();
  };
}
