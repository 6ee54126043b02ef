import { counterOn, type MetricsRegistry } from "@rowbase/kit";

/** Requests refused with 429 by a rate limit, by the limit's name (`auth_login_ip`, ...). */
export function rateLimitRefusals(registry: MetricsRegistry) {
  return counterOn(registry, {
    name: "rowbase_rate_limit_refusals_total",
    help: "Requests refused (429) by a rate limit, by limit name.",
    labelNames: ["limit"] as const,
  });
}
