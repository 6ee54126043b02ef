import { fromBinary } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type Cache,
  Code,
  ConnectError,
  cachedPlan,
  callAs,
  type EventBus,
  errorInfoOf,
  LocalCache,
  type Logger,
  planCacheKey,
  SUBJECTS,
} from "@rowbase/kit";
import { PlanChangedSchema } from "@rowbase/proto/rowbase/events/v1/org_events_pb";
import type {
  GetPlanResponse,
  OrganizationService,
} from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { tableNotFound } from "./errors.js";

/**
 * How long a records process keeps a record limit in its own memory: the replica that takes
 * `org.plan.changed` forgets it at once, the others apply the change at most this much later.
 */
export const PLAN_LOCAL_TTL_MS = 1000;

/** The part of a plan records enforces. */
export interface RecordQuota {
  /** How many records the organization may hold. */
  records: bigint;
}

/**
 * Organizations' record limits from OrganizationService.GetPlan (asked as the records service),
 * through the plan entry shared with the gateway and files (kit `cachedPlan`), whose value this
 * service also drops on `org.plan.changed`.
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
    const limits = await cachedPlan(
      this.cache,
      organizationId,
      () => this.fetch(organizationId, requestId),
      { logger: this.logger },
    ).catch(planFailure);
    this.local.set(key, limits.records);
    return { records: limits.records };
  }

  private async fetch(organizationId: bigint, requestId: string): Promise<GetPlanResponse> {
    return this.organizations.getPlan(
      { organizationId },
      await callAs(this.internalSecret, { kind: "service", service: "records" }, requestId),
    );
  }

  /**
   * Evicts a cached plan on every `org.plan.changed` (durable `records_plan`), keeping the
   * entry's version (`dropVersionedValues`): for a change whose commit could not write the entry.
   */
  listen(bus: EventBus): Promise<{ stop(): Promise<void> }> {
    return bus.consume(
      { stream: "ORG", durable: "records_plan", subject: SUBJECTS.planChanged },
      async (message) => {
        const event = fromBinary(PlanChangedSchema, message.data);
        this.local.delete(planCacheKey(event.organizationId));
        await this.cache.dropVersionedValues(planCacheKey(event.organizationId));
      },
    );
  }
}

/** What a failed plan lookup answers (GetPlan's failure, or the entry's deletion mark). */
function planFailure(error: unknown): never {
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
