import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  API_TOKEN_NOT_FOUND,
  API_TOKEN_REVOKED_SECONDS,
  apiTokenCacheKey,
  auditChangesJson,
  type Cache,
  cachePlan,
  type Logger,
  markMembershipChanged,
  markOrganizationDeleted,
  type Orm,
  type OutboxRelay,
  type Principal,
  publishEvent,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { PlanLimits } from "@rowbase/proto/rowbase/organization/v1/organization_pb";

/** Who is calling and for which request; events carry both. */
export interface CallContext {
  principal: Principal;
  requestId: string;
}

/** A call by a signed-in user. */
export interface UserCall extends CallContext {
  userId: bigint;
}

export type AuditTargetType = "organization" | "member" | "invite" | "api_token";

/**
 * What one transaction changes besides its rows: events written to the outbox (published if and
 * only if the transaction commits) and cache entries to evict once it has committed.
 */
export class ChangeSet {
  readonly evictions = new Set<string>();
  readonly revokedTokens = new Set<string>();
  /** The new plan version and limits of each organization whose plan changed. */
  readonly changedPlans = new Map<bigint, { version: bigint; limits: PlanLimits }>();
  /** Deleted organizations, whose plan entries are marked so after the commit. */
  readonly deletedOrganizations = new Set<bigint>();
  private events = 0;

  constructor(
    readonly em: EntityManager,
    private readonly context: CallContext,
  ) {}

  get enqueuedEvents(): number {
    return this.events;
  }

  async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<void> {
    await publishEvent(this.em, subject, schema, init, this.context);
    this.events += 1;
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
}

/**
 * Runs write transactions: after a commit it wakes the outbox relay and evicts caches; after a
 * rollback it does neither.
 */
export class Transactions {
  constructor(
    private readonly orm: Orm,
    private readonly relay: Pick<OutboxRelay, "kick">,
    private readonly cache: Cache,
    private readonly logger: Logger,
  ) {}

  /** A fresh EntityManager for reads outside a transaction. */
  em(): EntityManager {
    return this.orm.em.fork();
  }

  async run<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    let changes: ChangeSet | undefined;
    const result = await this.orm.em.fork().transactional(async (em) => {
      changes = new ChangeSet(em, context);
      return work(changes);
    });
    if (changes && changes.enqueuedEvents > 0) this.relay.kick();
    if (
      changes &&
      (changes.evictions.size > 0 ||
        changes.revokedTokens.size > 0 ||
        changes.changedPlans.size > 0 ||
        changes.deletedOrganizations.size > 0)
    ) {
      // The change is committed: a cache that cannot be reached must not turn it into a failed
      // call. Entries live only seconds, and member and plan events evict them again.
      const done = changes;
      await Promise.all([
        markMembershipChanged(this.cache, done.evictions),
        ...[...done.changedPlans].map(([id, { version, limits }]) =>
          cachePlan(this.cache, id, version, limits),
        ),
        ...[...done.deletedOrganizations].map((id) => markOrganizationDeleted(this.cache, id)),
        ...[...done.revokedTokens].map((hash) =>
          this.cache.set(apiTokenCacheKey(hash), API_TOKEN_NOT_FOUND, API_TOKEN_REVOKED_SECONDS),
        ),
      ]).catch((error: unknown) => this.logger.warn({ err: error }, "cache eviction failed"));
    }
    return result;
  }
}
