import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  auditChangesJson,
  type Logger,
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

/**
 * Who is calling and for which request; events carry both. The principal is absent when files
 * acts on its own (deletion sagas, the purge job): events then name the system.
 */
export interface CallContext {
  principal: Principal | undefined;
  requestId: string;
}

/** A call with a verified principal. */
export interface Call extends CallContext {
  principal: Principal;
}

/** Where an audited file lives. */
export interface AuditScope {
  organizationId: bigint;
  databaseId: bigint;
  tableId: bigint;
}

/**
 * What one transaction changes besides its rows: events written to the outbox, published if
 * and only if the transaction commits; storage keys whose bytes can go once it has committed.
 */
export class ChangeSet {
  private events = 0;
  /** Bytes no row refers to any more once this commits (queued in blob_gc too). */
  readonly releasedKeys: string[] = [];

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
    await publishEvent(this.em, subject, schema, init, {
      ...(this.context.principal ? { principal: this.context.principal } : {}),
      requestId: this.context.requestId,
    });
    this.events += 1;
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

  /** Queues bytes for deletion in this transaction; they go after the commit. */
  async releaseBlobs(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.em.execute(
      `insert into blob_gc (storage_key, due_at) select unnest(array[?]::text[]), now()
       on conflict (storage_key) do update set due_at = now()`,
      [keys],
    );
    this.releasedKeys.push(...keys);
  }
}

/**
 * Runs write transactions; after a commit it wakes the outbox relay when events were enqueued
 * and hands released storage keys to `onReleased` (the blob collector).
 */
export class Transactions {
  constructor(
    private readonly orm: Orm,
    private readonly relay: Pick<OutboxRelay, "kick">,
    readonly logger: Logger,
    private readonly onReleased: (keys: string[]) => void = () => {},
  ) {}

  /** A fresh EntityManager for reads outside a transaction. */
  em(): EntityManager {
    return this.orm.em.fork();
  }

  async run<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    let done: (() => void) | undefined;
    const result = await this.orm.em.fork().transactional(async (em) => {
      const within = await this.within(em, context, work);
      done = within.afterCommit;
      return within.result;
    });
    done?.();
    return result;
  }

  /**
   * Runs `work` in a transaction another owner commits (a `consumeOnce` handler's): returns its
   * result and what to do once that transaction has committed (the same as `run` does).
   */
  async within<T>(
    em: EntityManager,
    context: CallContext,
    work: (changes: ChangeSet) => Promise<T>,
  ): Promise<Within<T>> {
    const changes = new ChangeSet(em, context);
    const result = await work(changes);
    return {
      result,
      afterCommit: () => {
        if (changes.enqueuedEvents > 0) this.relay.kick();
        if (changes.releasedKeys.length > 0) this.onReleased(changes.releasedKeys);
      },
    };
  }
}

/** What `work` returned in another owner's transaction, and what to do once it committed. */
export interface Within<T> {
  result: T;
  afterCommit: () => void;
}
