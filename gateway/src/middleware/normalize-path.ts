import type { Middleware } from "koa";
import type { GatewayState } from "../gateway-context.js";

/** A percent-encoded octet; the ones that stand for an unreserved character are decoded. */
const ENCODED_OCTET = /%([0-9A-Fa-f]{2})/g;

/** RFC 3986 section 2.3: letters, digits, `-`, `.`, `_`, `~`. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * The path with every percent-encoded unreserved character decoded: RFC 3986 section 6.2.2.2
 * makes `/organization/%6Cist` and `/organization/list` the same URI, and the router matches
 * the path as sent. Reserved octets (`%2F`) and the rest (`%00`) stay encoded: decoding them
 * would change which segments the path has or bring bytes the routes must not see in their
 * path; the router decodes them into the parameter's value, which its schema then refuses
 * (400), or, outside a parameter, no route takes them (404).
 */
export function normalizedPath(path: string): string {
  return path.replace(ENCODED_OCTET, (octet, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : octet;
  });
}

/**
 * Rewrites the request's path to `normalizedPath` before anything reads it, so that the
 * routes, the logs and the traces (which hide a signed file link's token by its path) all see
 * one spelling.
 */
export function normalizePath(): Middleware<GatewayState> {
  return async (ctx, next) => {
    if (ctx.path.includes("%")) ctx.path = normalizedPath(ctx.path);
    await next();
  };
}
