import type { Middleware } from "koa";
import { ValidationFailed, type ValidationItem } from "../errors/validation-failed.js";
import type { GatewayState } from "../gateway-context.js";

/**
 * Headers that mean one value, of which Node keeps the first and silently drops the rest. Two
 * of them make the request ambiguous: a proxy before the gateway may have read the other one
 * (RFC 9112 section 3.2 refuses two Host lines; RFC 6750 section 3.1 answers a repeated
 * credential 400). Content-Length, the other one that matters, Node's parser refuses itself.
 */
const ONCE = ["host", "authorization", "content-type"];

/**
 * The request's headers as the gateway reads them, checked before any route: an HTTP/1.1
 * request without `Host` is a 400 (RFC 9112 section 3.2), and so is one with a header of ONCE
 * more than once, in the validation envelope naming the header. Node would answer a missing
 * Host itself with a bare status line and no `X-Request-Id`, so the server is created with
 * `requireHostHeader: false` and the refusal is made here. HTTP/1.0 has no such header and
 * needs none.
 */
export function checkRequestHeaders(): Middleware<GatewayState> {
  return async (ctx, next) => {
    const { httpVersionMajor, httpVersionMinor, headers, headersDistinct } = ctx.req;
    const http11 = httpVersionMajor > 1 || (httpVersionMajor === 1 && httpVersionMinor >= 1);
    if (http11 && headers.host === undefined) {
      throw ValidationFailed.of("header", "host", "is required", "required");
    }
    const repeated = ONCE.filter((name) => (headersDistinct[name]?.length ?? 0) > 1);
    if (repeated.length > 0) {
      throw new ValidationFailed(
        repeated.map(
          (key): ValidationItem => ({
            key,
            message: "must be sent once",
            source: "header",
            code: "invalid_value",
          }),
        ),
      );
    }
    await next();
  };
}
