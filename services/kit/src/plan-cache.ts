import { create, toJsonString } from "@bufbuild/protobuf";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import { type Cache, cachedJsonObject } from "./cache.js";
import type { Logger } from "./logger.js";

/**
 * Where the gateway, records and files cache an organization's plan limits (organization's
 * GetPlan), one entry for all three: a plan change marks it changed when it commits
 * (PLAN_CHANGED), so every reader follows the change as soon as it is answered.
 */
export function planCacheKey(organizationId: bigint): string {
  return `plan:${organizationId}`;
}

/** How long a plan stays in the shared cache; a change replaces it by PLAN_CHANGED at once. */
export const PLAN_CACHE_TTL_SECONDS = 60;

/**
 * What a plan's cache entry holds for PLAN_CHANGED_SECONDS after a plan change (marked when it
 * commits and again on `org.plan.changed`): "ask the organization service". Plans are cached
 * only where no entry is (`setIfAbsent`), so a lookup that read the old plan just before the
 * change cannot put it back after the eviction.
 */
export const PLAN_CHANGED = "?";
export const PLAN_CHANGED_SECONDS = 10;

/** Evicts a cached plan, leaving PLAN_CHANGED (see there) in its place. */
export async function markPlanChanged(cache: Cache, key: string): Promise<void> {
  await cache.set(key, PLAN_CHANGED, PLAN_CHANGED_SECONDS);
}

/**
 * A plan's cache entry: PlanLimits in protobuf JSON with every key present (a zero limit an
 * enterprise plan may set included) and int64s as decimal strings,
 * `{"records": "1000", "apiCallsPerMonth": "3000", ...}`.
 */
export function encodeCachedPlan(limits: PlanLimits): string {
  return toJsonString(PlanLimitsSchema, limits, { alwaysEmitImplicit: true });
}

/**
 * The limits in a plan's cache entry; undefined for no entry, PLAN_CHANGED, or one that lacks a
 * limit or holds anything but a decimal string for it (never read as a limit of 0).
 */
export function decodeCachedPlan(value: string | null): PlanLimits | undefined {
  const entry = cachedJsonObject(value);
  if (entry === undefined) return undefined;
  const limits: Record<string, bigint> = {};
  for (const field of PlanLimitsSchema.fields) {
    const limit = entry[field.jsonName];
    if (typeof limit !== "string" || !/^[0-9]{1,19}$/.test(limit)) return undefined;
    limits[field.localName] = BigInt(limit);
  }
  return create(PlanLimitsSchema, limits);
}

/**
 * An organization's plan limits through the shared entry (planCacheKey): what the entry holds,
 * else `fetch` (organization's GetPlan), then cached only where no entry is, since a plan
 * changed meanwhile has left PLAN_CHANGED there. `fresh` skips the entry (the answer is still
 * cached). With a `logger`, a cache that cannot be reached is logged and costs only the fetch;
 * without one its failure is the caller's (the gateway's quotas answer 503 then).
 */
export async function cachedPlan(
  cache: Cache,
  organizationId: bigint,
  fetch: () => Promise<PlanLimits>,
  options: { fresh?: boolean; logger?: Logger } = {},
): Promise<PlanLimits> {
  const key = planCacheKey(organizationId);
  const { logger } = options;
  const tolerated = (what: string) => (error: unknown) => {
    if (!logger) throw error;
    logger.warn({ err: error, key }, `plan cache ${what} failed`);
    return null;
  };
  if (!options.fresh) {
    const cached = decodeCachedPlan(await cache.get(key).catch(tolerated("read")));
    if (cached) return cached;
  }
  const limits = await fetch();
  await cache
    .setIfAbsent(key, encodeCachedPlan(limits), PLAN_CACHE_TTL_SECONDS)
    .catch(tolerated("write"));
  return limits;
}
