import koaCors from "@koa/cors";
import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";

/** The methods the routes answer, which a preflight allows. */
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/**
 * What a browser page may send: the credential, a JSON body, its own request id, and the MCP
 * protocol version an MCP client sends to /mcp after it initialized.
 */
const REQUEST_HEADERS = ["Authorization", "Content-Type", "X-Request-Id", "Mcp-Protocol-Version"];
/** What a browser page may read besides the simple headers: for support, retries and pacing. */
export const EXPOSED_HEADERS = ["X-Request-Id", "Retry-After", "RateLimit", "RateLimit-Policy"];
/** How long a browser may keep a preflight's answer (10 minutes, Chromium's ceiling is 2 hours). */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * CORS for the origins CORS_ALLOWED_ORIGINS lists, with @koa/cors: a preflight from one is
 * answered 204 with the methods and headers above, and every other answer to one exposes the
 * headers above. A request from any other origin (or without `Origin`) gets no CORS header at
 * all, so its browser keeps the answer from the page; a preflight of one goes on to the routes,
 * which answer OPTIONS 405. `Access-Control-Allow-Credentials` is never sent: no route reads
 * cookies, the credential is the bearer token a page sets itself. Mounted outside the error
 * middleware, so errors carry the headers too (a page can read a 401 or a 429).
 */
export function cors(allowedOrigins: readonly string[]): Middleware<GatewayState> {
  const allowed = new Set(allowedOrigins);
  return koaCors({
    origin: (ctx) => (allowed.has(ctx.get("origin")) ? ctx.get("origin") : ""),
    allowMethods: METHODS,
    allowHeaders: REQUEST_HEADERS,
    exposeHeaders: EXPOSED_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
    credentials: false,
  });
}
