import { create, toJsonString } from "@bufbuild/protobuf";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { GetPlanResponse } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { type Cache, cachedJsonObject, versionedEntryOf } from "./cache.js";
import { Code, domainError } from "./errors.js";
import type { Logger } from "./logger.js";

/**
 * Where the gateway, records and files cache an organization's plan limits (organization's
 * GetPlan), one entry for all three, versioned (kit `setVersioned`) by the organization's plan
 * version: a plan change writes the new limits there when it commits, and a lookup that read
 * the old plan before the change can never put it back.
 */
export function planCacheKey(organizationId: bigint): string {
  return `plan:${organizationId}`;
}

/** How long a plan stays in the shared cache; a change replaces it at once. */
export const PLAN_CACHE_TTL_SECONDS = 60;

/**
 * The version an organization's deletion marks its plan entry with: above any plan version, so
 * that no plan read before the deletion is cached after it. Readers take the mark for the
 * organization's absence (`cachedPlan`), without asking organization.
 */
const DELETED_ORGANIZATION_PLAN_VERSION = 2n ** 63n - 1n;

/**
 * Marks a deleted organization's plan entry (organization when the deletion commits, records
 * and files again when they apply its event, for a commit that could not write it).
 */
export async function markOrganizationDeleted(cache: Cache, organizationId: bigint): Promise<void> {
  await cache.setVersioned(
    planCacheKey(organizationId),
    DELETED_ORGANIZATION_PLAN_VERSION,
    undefined,
    PLAN_CACHE_TTL_SECONDS,
  );
}

/**
 * Caches an organization's plan at its version, unless the entry holds a newer one (or this
 * one already): by the organization service when a change commits, and by every lookup that
 * had to ask it.
 */
export async function cachePlan(
  cache: Cache,
  organizationId: bigint,
  version: bigint,
  limits: PlanLimits,
): Promise<void> {
  await cache.setVersioned(
    planCacheKey(organizationId),
    version,
    encodeCachedPlan(limits),
    PLAN_CACHE_TTL_SECONDS,
  );
}

/**
 * The value of a plan's cache entry (after its version): PlanLimits in protobuf JSON with every key present (a zero limit an
 * enterprise plan may set included) and int64s as decimal strings,
 * `{"records": "1000", "apiCallsPerMonth": "3000", ...}`.
 */
export function encodeCachedPlan(limits: PlanLimits): string {
  return toJsonString(PlanLimitsSchema, limits, { alwaysEmitImplicit: true });
}

/**
 * The limits in a plan's cache entry; undefined for no entry, a mark, or one that lacks a limit
 * or holds anything but a decimal string for it (never read as a limit of 0).
 */
export function decodeCachedPlan(held: string | null): PlanLimits | undefined {
  const entry = cachedJsonObject(versionedEntryOf(held)?.value ?? null);
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
 * else `fetch` (organization's GetPlan), then cached at its version (`cachePlan`). An entry
 * marked by the organization's deletion (`markOrganizationDeleted`) answers what GetPlan
 * answers for it: NotFound organization_not_found. With a `logger`, a cache that cannot be
 * reached is logged and costs only the fetch; without one its failure is the caller's (the
 * gateway's quotas answer 503 then).
 */
export async function cachedPlan(
  cache: Cache,
  organizationId: bigint,
  fetch: () => Promise<GetPlanResponse>,
  options: { logger?: Logger } = {},
): Promise<PlanLimits> {
  const key = planCacheKey(organizationId);
  const { logger } = options;
  const tolerated = (what: string) => (error: unknown) => {
    if (!logger) throw error;
    logger.warn({ err: error, key }, `plan cache ${what} failed`);
    return null;
  };
  const held = await cache.get(key).catch(tolerated("read"));
  if (versionedEntryOf(held)?.version === DELETED_ORGANIZATION_PLAN_VERSION) {
    throw domainError(Code.NotFound, "organization_not_found");
  }
  const cached = decodeCachedPlan(held);
  if (cached) return cached;
  const { limits, planVersion } = await fetch();
  if (!limits) throw new Error("GetPlan answered without limits");
  await cachePlan(cache, organizationId, planVersion, limits).catch(tolerated("write"));
  return limits;
}
