import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  auditChangesJson,
  type Cache,
  type Logger,
  markTableSchemaChanged,
  type Orm,
  type OutboxRelay,
  type Principal,
  publishEvent,
  query,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";

/**
 * Who is calling and for which request; events carry both. The principal is absent when
 * catalog acts on its own (the organization deletion saga): events then name the system.
 */
export interface CallContext {
  principal: Principal | undefined;
  requestId: string;
}

/** A call with a verified principal. */
export interface Call extends CallContext {
  principal: Principal;
}

export type AuditTargetType = "database" | "table" | "field";

/** Where an audited target lives; `tableId` is absent for a database. */
export interface AuditScope {
  organizationId: bigint;
  databaseId: bigint;
  tableId?: bigint;
}

/**
 * What one transaction changes besides its rows: events written to the outbox, published if
 * and only if the transaction commits, the tables whose cached schemas go once it commits, and
 * what another service did for it that must be undone when it does not.
 */
export class ChangeSet {
  /** Tables whose schema (the table or its fields) this transaction changes. */
  readonly changedTables = new Set<bigint>();
  /** Undos of steps other services took for this change (`onAbandon`). */
  readonly undos: (() => Promise<void>)[] = [];
  private events = 0;

  constructor(
    readonly em: EntityManager,
    private readonly context: CallContext,
  ) {}

  get enqueuedEvents(): number {
    return this.events;
  }

  /**
   * Runs `undo` when the work fails after this point and its transaction rolls back
   * (`Transactions.run`), best effort: for a step another service took that holds something
   * for the change until its event arrives.
   */
  onAbandon(undo: () => Promise<void>): void {
    this.undos.push(undo);
  }

  async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<void> {
    await publishEvent(this.em, subject, schema, init, {
      ...(this.context.principal ? { principal: this.context.principal } : {}),
      requestId: this.context.requestId,
    });
    this.events += 1;
    // Every catalog event that names tables announces a change of them: their cached schemas
    // (records, files) must go once this commits.
    const named = init as { tableId?: unknown; tableIds?: unknown };
    if (typeof named.tableId === "bigint" && named.tableId !== 0n) {
      this.changedTables.add(named.tableId);
    }
    if (Array.isArray(named.tableIds)) {
      for (const id of named.tableIds) if (typeof id === "bigint") this.changedTables.add(id);
    }
  }

  /** An audit event `audit.<type>.<verb>` on the AUDIT stream. */
  async audit(
    scope: AuditScope,
    action: `${AuditTargetType}.${string}`,
    target: { type: AuditTargetType; id: bigint },
    changes: AuditChange[] = [],
  ): Promise<void> {
    await this.publish(SUBJECTS.audit(action), AuditEventSchema, {
      organizationId: scope.organizationId,
      databaseId: scope.databaseId,
      tableId: scope.tableId ?? 0n,
      action,
      target: create(AuditEvent_TargetSchema, { type: target.type, id: target.id }),
      changesJson: auditChangesJson(changes),
    });
  }
}

/** Cache entries marked at once after a commit. */
const EVICTION_CHUNK = 1_000;

/**
 * The version a deleted table's schema entry is marked with: above any a table reaches, so
 * that no schema read before the deletion is cached after it.
 */
const DELETED_TABLE_VERSION = 2n ** 63n - 1n;

/**
 * Runs write transactions: before the commit it raises the schema version of the tables it
 * changed, after the commit it wakes the outbox relay and marks their cached schemas with the
 * new versions (kit `markTableSchemaChanged`); after a rollback it does neither, and runs the
 * undos of a failed work (`ChangeSet.onAbandon`).
 */
export class Transactions {
  constructor(
    private readonly orm: Orm,
    private readonly relay: Pick<OutboxRelay, "kick">,
    private readonly cache: Cache,
    readonly logger: Logger,
  ) {}

  /** A fresh EntityManager for reads outside a transaction. */
  em(): EntityManager {
    return this.orm.em.fork();
  }

  async run<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    let done: (() => Promise<void>) | undefined;
    let failed: ChangeSet | undefined;
    try {
      const result = await this.orm.em.fork().transactional(async (em) => {
        const within = await this.within(em, context, async (changes) => {
          try {
            return await work(changes);
          } catch (error) {
            failed = changes;
            throw error;
          }
        });
        done = within.afterCommit;
        return within.result;
      });
      await done?.();
      return result;
    } catch (error) {
      // Only a failed work surely rolled back: a failed commit may have committed, and its
      // event then needs what the undos would remove.
      if (failed) await this.abandoned(failed);
      throw error;
    }
  }

  private async abandoned(changes: ChangeSet): Promise<void> {
    for (const undo of changes.undos) {
      try {
        await undo();
      } catch (error) {
        this.logger.warn({ err: error }, "undo of an abandoned change failed");
      }
    }
  }

  /**
   * Runs `work` in a transaction another owner commits (a `consumeOnce` handler's): returns its
   * result and what to do once that transaction has committed (the same as `run` does).
   */
  async within<T>(
    em: EntityManager,
    context: CallContext,
    work: (changes: ChangeSet) => Promise<T>,
  ): Promise<{ result: T; afterCommit: () => Promise<void> }> {
    const changes = new ChangeSet(em, context);
    const result = await work(changes);
    const versions = await raiseSchemaVersions(em, changes.changedTables);
    return { result, afterCommit: () => this.committed(changes, versions) };
  }

  private async committed(changes: ChangeSet, versions: Map<bigint, bigint>): Promise<void> {
    if (changes.enqueuedEvents > 0) this.relay.kick();
    // The change is committed: a cache that cannot be reached must not fail the call. The
    // entries live a minute at most, and records and files evict them again on the events.
    // In chunks: an organization's deletion can name many thousands of tables.
    const tables = [...changes.changedTables];
    try {
      for (let i = 0; i < tables.length; i += EVICTION_CHUNK) {
        await Promise.all(
          tables
            .slice(i, i + EVICTION_CHUNK)
            .map((id) =>
              markTableSchemaChanged(this.cache, id, versions.get(id) ?? DELETED_TABLE_VERSION),
            ),
        );
      }
    } catch (error) {
      this.logger.warn({ err: error }, "cache eviction failed");
    }
  }
}

/**
 * Raises the schema version of the tables a transaction changed, in it (the row lock orders
 * concurrent changes of a table as they commit); returns the new versions. A table deleted by
 * the transaction has none.
 */
async function raiseSchemaVersions(
  em: EntityManager,
  tables: Set<bigint>,
): Promise<Map<bigint, bigint>> {
  if (tables.size === 0) return new Map();
  const rows = await query<{ id: string; schema_version: string }>(
    em,
    `update tables set schema_version = schema_version + 1 where id = any($1::bigint[])
      returning id::text, schema_version::text`,
    [[...tables]],
  );
  return new Map(rows.map((row) => [BigInt(row.id), BigInt(row.schema_version)]));
}
