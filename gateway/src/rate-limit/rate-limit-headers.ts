import type { Context } from "koa";
import type { RateLimitState } from "./rate-limits.js";

/**
 * The IETF HTTP API RateLimit fields (draft-ietf-httpapi-ratelimit-headers) of the limits a
 * request was counted under, one list member per limit, named as `RATE_LIMITS` names them:
 * `RateLimit-Policy: "records_token";q=40;w=2` (the quota per window of `w` seconds) and
 * `RateLimit: "records_token";r=39;t=2` (requests left, seconds until the window starts
 * again). A client that keeps `r` above 0, or waits `t` seconds once it is 0, never sees a
 * 429 `too_many_requests`.
 */
export function rateLimitHeaders(states: readonly RateLimitState[]): Record<string, string> {
  return {
    "RateLimit-Policy": states
      .map((state) => `"${state.name}";q=${state.quota};w=${state.windowSeconds}`)
      .join(", "),
    RateLimit: states
      .map((state) => `"${state.name}";r=${state.remaining};t=${state.resetSeconds}`)
      .join(", "),
  };
}

/**
 * A `report` for RateLimits.consume that keeps the answer's RateLimit headers up to date with
 * every limit the request was counted under so far; set before the answer (a 429 included),
 * which keeps them.
 */
export function reportRateLimits(ctx: Pick<Context, "set">): (state: RateLimitState) => void {
  const states: RateLimitState[] = [];
  return (state) => {
    states.push(state);
    ctx.set(rateLimitHeaders(states));
  };
}
