import { fromBinary, toJsonString } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  ConnectError,
  callAs,
  type EventBus,
  errorInfoOf,
  LocalCache,
  type Logger,
  markPlanChanged,
  planCacheKey,
  SUBJECTS,
} from "@rowbase/kit";
import { PlanChangedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import {
  type PlanLimits,
  PlanLimitsSchema,
} from "@rowbase/proto/rowbase/organization/v1/organization_pb";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { tableNotFound } from "./errors.js";

/** How long a plan stays cached; `org.plan.changed` evicts it at once (kit PLAN_CHANGED). */
export const PLAN_TTL_SECONDS = 60;

/**
 * How long a records process keeps a record limit in its own memory: the replica that takes
 * `org.plan.changed` forgets it at once, the others apply the change at most this much later.
 */
export const PLAN_LOCAL_TTL_MS = 1000;

/**
 * The record limit in a cached plan entry; undefined for none, PLAN_CHANGED, or one that lacks it.
 */
function cachedRecords(value: string | null): bigint | undefined {
  if (value === null) return undefined;
  try {
    const records = (JSON.parse(value) as { records?: unknown } | null)?.records;
    if (typeof records === "string" && /^[0-9]{1,19}$/.test(records)) return BigInt(records);
  } catch {}
  return undefined;
}

/** The part of a plan records enforces. */
export interface RecordQuota {
  /** How many records the organization may hold. */
  records: bigint;
}

/**
 * Organizations' record limits from OrganizationService.GetPlan (asked as the records service),
 * cached in the shared cache under `planCacheKey` and evicted on `org.plan.changed`. The entry is
 * shared with the gateway (which reads its monthly allowances from it): PlanLimits in protobuf
 * JSON with every key present and int64s as decimal strings (`{"records": "1000", ...}`).
 */
export class Plans {
  private readonly local = new LocalCache<bigint>(PLAN_LOCAL_TTL_MS);

  constructor(
    private readonly organizations: Client<typeof OrganizationService>,
    private readonly cache: Cache,
    private readonly internalSecret: string,
    private readonly logger: Logger,
  ) {}

  async quotaOf(organizationId: bigint, requestId = ""): Promise<RecordQuota> {
    const key = planCacheKey(organizationId);
    const known = this.local.get(key);
    if (known !== undefined) return { records: known };
    const cached = await this.cache.get(key).catch((error: unknown) => {
      this.logger.warn({ err: error }, "plan cache read failed");
      return null;
    });
    const records = cachedRecords(cached);
    if (records !== undefined) {
      this.local.set(key, records);
      return { records };
    }
    const limits = await this.fetch(organizationId, requestId);
    await this.cache
      .setIfAbsent(
        key,
        toJsonString(PlanLimitsSchema, limits, { alwaysEmitImplicit: true }),
        PLAN_TTL_SECONDS,
      )
      .catch((error: unknown) => this.logger.warn({ err: error }, "plan cache write failed"));
    this.local.set(key, limits.records);
    return { records: limits.records };
  }

  private async fetch(organizationId: bigint, requestId: string): Promise<PlanLimits> {
    try {
      const response = await this.organizations.getPlan(
        { organizationId },
        await callAs(this.internalSecret, { kind: "service", service: "records" }, requestId),
      );
      if (!response.limits) throw new Error("GetPlan answered without limits");
      return response.limits;
    } catch (error) {
      // The organization is gone (its deletion is on the way): so are its tables.
      if (errorInfoOf(error)?.reason === "organization_not_found") throw tableNotFound();
      if (
        error instanceof ConnectError &&
        (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
      ) {
        throw new ConnectError("organization service unavailable", Code.Unavailable);
      }
      throw new Error("OrganizationService.GetPlan failed", { cause: error });
    }
  }

  /** Evicts a cached plan on every `org.plan.changed` (durable `records_plan`). */
  listen(bus: EventBus): Promise<{ stop(): Promise<void> }> {
    return bus.consume(
      { stream: "ORG", durable: "records_plan", subject: SUBJECTS.planChanged },
      async (message) => {
        const event = fromBinary(PlanChangedSchema, message.data);
        this.local.delete(planCacheKey(event.organizationId));
        await markPlanChanged(this.cache, planCacheKey(event.organizationId));
      },
    );
  }
}
