import { create } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  API_TOKEN_NOT_FOUND,
  API_TOKEN_REVOKED_SECONDS,
  apiTokenCacheKey,
  auditChangesJson,
  ChangeSet as BaseChangeSet,
  Transactions as BaseTransactions,
  type Cache,
  type Call,
  type CallContext,
  cachePlan,
  type Logger,
  markMembershipChanged,
  markOrganizationDeleted,
  type Orm,
  type OutboxRelay,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";

/** A call by a signed-in user. */
export interface UserCall extends Call {
  userId: bigint;
}

export type AuditTargetType = "organization" | "member" | "invite" | "api_token";

/**
 * What one organization transaction changes besides its rows (kit `ChangeSet`): its audit events,
 * and the cache entries it changes, marked once it has committed.
 */
export class ChangeSet extends BaseChangeSet {
  private readonly evictions = new Set<string>();
  private readonly revokedTokens = new Set<string>();
  /** The new plan version and limits of each organization whose plan changed. */
  private readonly changedPlans = new Map<bigint, { version: bigint; limits: PlanLimits }>();
  /** Deleted organizations, whose plan entries are marked so after the commit. */
  private readonly deletedOrganizations = new Set<bigint>();

  constructor(
    em: EntityManager,
    context: CallContext,
    private readonly cache: Cache,
  ) {
    super(em, context);
    this.afterCommit(() => this.markCache());
  }

  /** An audit event `audit.<type>.<verb>` on the AUDIT stream. */
  async audit(
    organizationId: bigint,
    action: `${AuditTargetType}.${string}`,
    target: { type: AuditTargetType; id: bigint },
    changes: AuditChange[] = [],
  ): Promise<void> {
    await this.publish(SUBJECTS.audit(action), AuditEventSchema, {
      organizationId,
      databaseId: 0n,
      tableId: 0n,
      action,
      target: create(AuditEvent_TargetSchema, { type: target.type, id: target.id }),
      changesJson: auditChangesJson(changes),
    });
  }

  /** A membership's cache key, marked changed after the commit (kit MEMBERSHIP_CHANGED). */
  evict(...keys: string[]): void {
    for (const key of keys) this.evictions.add(key);
  }

  /**
   * An organization whose plan changed: its shared plan entry gets the new limits at their
   * version after the commit (kit `cachePlan`), so they apply once the change is answered, not
   * only once its event has been taken.
   */
  planChanged(organizationId: bigint, version: bigint, limits: PlanLimits): void {
    this.changedPlans.set(organizationId, { version, limits });
  }

  /**
   * A deleted organization: its shared plan entry is marked after the commit (kit
   * `markOrganizationDeleted`), so every reader takes it for gone once the deletion is
   * answered, not only once records and files have applied its event.
   */
  organizationDeleted(organizationId: bigint): void {
    this.deletedOrganizations.add(organizationId);
  }

  /** A revoked token's cache entry, set to "no such token" after the commit (see kit). */
  revokeCachedToken(tokenHash: string): void {
    this.revokedTokens.add(tokenHash);
  }

  /**
   * Marks the changed cache entries, all at once. Entries live only seconds, and member and plan
   * events evict them again.
   */
  private async markCache(): Promise<void> {
    await Promise.all([
      ...(this.evictions.size > 0 ? [markMembershipChanged(this.cache, this.evictions)] : []),
      ...[...this.changedPlans].map(([id, { version, limits }]) =>
        cachePlan(this.cache, id, version, limits),
      ),
      ...[...this.deletedOrganizations].map((id) => markOrganizationDeleted(this.cache, id)),
      ...[...this.revokedTokens].map((hash) =>
        this.cache.set(apiTokenCacheKey(hash), API_TOKEN_NOT_FOUND, API_TOKEN_REVOKED_SECONDS),
      ),
    ]);
  }
}

/** Organization's transactions, each with an organization `ChangeSet`. */
export class Transactions extends BaseTransactions<ChangeSet> {
  constructor(orm: Orm, relay: Pick<OutboxRelay, "kick">, cache: Cache, logger: Logger) {
    super(orm, relay, logger, (em, context) => new ChangeSet(em, context, cache));
  }
}
