import { counterOn, histogramOn, LATENCY_BUCKETS, type MetricsRegistry } from "@rowbase/kit";
import type { Middleware } from "koa";
import type { GatewayContext, GatewayState } from "../gateway-context.js";

/** Requests no route matched (404, 405, OPTIONS): one label, whatever the path. */
export const UNMATCHED_ROUTE = "unmatched";

/**
 * The route template the router matched (`/database/:id`), never the path itself, so that ids
 * in paths cannot make a time series per record.
 */
export function routeTemplateOf(ctx: GatewayContext): string | undefined {
  const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  return typeof route === "string" ? route : undefined;
}

export function httpServerMetrics(registry: MetricsRegistry) {
  const labelNames = ["method", "route", "status"] as const;
  return {
    requests: counterOn(registry, {
      name: "rowbase_http_requests_total",
      help: "HTTP requests the gateway answered, by method, route template and status.",
      labelNames,
    }),
    duration: histogramOn(registry, {
      name: "rowbase_http_request_duration_seconds",
      help: "Time from a request's arrival to its answer, by method, route template and status.",
      labelNames,
      buckets: LATENCY_BUCKETS,
    }),
  };
}

/** Counts and times every request with its final status (it sits above the error middleware). */
export function httpMetrics(registry: MetricsRegistry): Middleware<GatewayState> {
  const { requests, duration } = httpServerMetrics(registry);
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const labels = {
        method: ctx.method,
        route: routeTemplateOf(ctx) ?? UNMATCHED_ROUTE,
        status: String(ctx.status),
      };
      requests.inc(labels);
      duration.observe(labels, (performance.now() - started) / 1000);
    }
  };
}
