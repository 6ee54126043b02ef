import { create } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  auditChangesJson,
  ChangeSet as BaseChangeSet,
  Transactions as BaseTransactions,
  type CallContext,
  type Logger,
  type Orm,
  type OutboxRelay,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";

/** Where an audited file lives. */
export interface AuditScope {
  organizationId: bigint;
  databaseId: bigint;
  tableId: bigint;
}

/**
 * What one files transaction changes besides its rows (kit `ChangeSet`): its audit events, and
 * the storage keys whose bytes can go once it has committed.
 */
export class ChangeSet extends BaseChangeSet {
  constructor(
    em: EntityManager,
    context: CallContext,
    private readonly onReleased: (keys: string[]) => void,
  ) {
    super(em, context);
  }

  /** An audit event `audit.file.<verb>` on the AUDIT stream; the target is the pair. */
  async audit(
    scope: AuditScope,
    action: `file.${string}`,
    target: { rowId: bigint; fieldId: bigint },
    changes: AuditChange[] = [],
  ): Promise<void> {
    await this.publish(SUBJECTS.audit(action), AuditEventSchema, {
      organizationId: scope.organizationId,
      databaseId: scope.databaseId,
      tableId: scope.tableId,
      action,
      target: create(AuditEvent_TargetSchema, {
        type: "file",
        id: target.rowId,
        fieldId: target.fieldId,
      }),
      changesJson: auditChangesJson(changes),
    });
  }

  /**
   * Queues bytes no row refers to any more in `blob_gc`, in this transaction; they are handed to
   * the collector once it has committed.
   */
  async releaseBlobs(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.em.execute(
      `insert into blob_gc (storage_key, due_at) select unnest(array[?]::text[]), now()
       on conflict (storage_key) do update set due_at = now()`,
      [keys],
    );
    this.afterCommit(() => this.onReleased(keys));
  }
}

/**
 * Files' transactions, each with a files `ChangeSet`; released storage keys go to `onReleased`
 * (the blob collector) after the commit.
 */
export class Transactions extends BaseTransactions<ChangeSet> {
  constructor(
    orm: Orm,
    relay: Pick<OutboxRelay, "kick">,
    logger: Logger,
    onReleased: (keys: string[]) => void = () => {},
  ) {
    super(orm, relay, logger, (em, context) => new ChangeSet(em, context, onReleased));
  }
}
