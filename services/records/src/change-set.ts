import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  auditChangesJson,
  batchAuditEvents,
  buildAuditEvent,
  buildEvent,
  type EventContext,
  enqueueEvents,
  type Logger,
  type Orm,
  type OutboxEntry,
  type OutboxRelay,
  type Principal,
} from "@rowbase/kit";
import {
  type AuditEvent,
  AuditEvent_TargetSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { ValueChange } from "./domain/audit.js";

/**
 * Who is calling and for which request; events carry both. The principal is absent when records
 * acts on its own (catalog and organization events): events then name the system.
 */
export interface CallContext {
  principal: Principal | undefined;
  requestId: string;
}

/** A call with a verified principal. */
export interface Call extends CallContext {
  principal: Principal;
}

/** Where a record lives, for its events and audit entries. */
export interface RecordScope {
  organizationId: bigint;
  databaseId: bigint;
  tableId: bigint;
}

/** How a record's actor columns (`created_by`, `updated_by`) name a principal. */
export function actorName(principal: Principal | undefined): string {
  if (principal?.kind === "user") return `user:${principal.userId}`;
  if (principal?.kind === "api_token") return `api_token:${principal.tokenId}`;
  return "system";
}

/**
 * What one transaction (or one statement, `Transactions.once`) changes besides its rows: events
 * written to the outbox, published if and only if the change commits.
 */
export class ChangeSet {
  private readonly pending: OutboxEntry[] = [];
  /** Audit events, sent together at `flush` (`batchAuditEvents`). */
  private readonly audits: AuditEvent[] = [];
  private events = 0;

  constructor(
    readonly em: EntityManager,
    readonly context: CallContext,
  ) {}

  get enqueuedEvents(): number {
    return this.events;
  }

  /** Events added and not yet written or taken. */
  get untaken(): number {
    return this.pending.length + this.audits.length;
  }

  /** Adds an event; it reaches the outbox with the others at `flush`, before the commit. */
  async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<void> {
    this.pending.push(this.event(subject, schema, init));
  }

  private event<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): OutboxEntry {
    this.events += 1;
    return buildEvent(subject, schema, init, this.eventContext());
  }

  private eventContext(): EventContext {
    return {
      ...(this.context.principal ? { principal: this.context.principal } : {}),
      requestId: this.context.requestId,
    };
  }

  /**
   * Writes the events added so far to the outbox in one statement: the others in order, then the
   * audit events, several to a message when there are several.
   */
  async flush(): Promise<void> {
    const entries = this.takeEvents();
    if (entries.length > 0) await enqueueEvents(this.em, entries);
  }

  /**
   * The events added so far, in `flush`'s order, for the caller's next statement to write
   * (kit's `queryWithOutbox`); they are the caller's to write from then on.
   */
  takeEvents(): OutboxEntry[] {
    return [...this.pending.splice(0), ...batchAuditEvents(this.audits.splice(0))];
  }

  /**
   * An audit event `audit.record.<verb>` on the AUDIT stream, sent at `flush` together with the
   * transaction's other audit events; each change is keyed by field id with the field's name at
   * the time as its label (SPEC section 11).
   */
  auditRecord(
    scope: RecordScope,
    verb: "created" | "updated" | "deleted",
    rowId: bigint,
    changes: ValueChange[],
  ): void {
    this.events += 1;
    this.audits.push(
      buildAuditEvent(
        {
          organizationId: scope.organizationId,
          databaseId: scope.databaseId,
          tableId: scope.tableId,
          action: `record.${verb}`,
          target: create(AuditEvent_TargetSchema, { type: "record", id: rowId }),
          changesJson: auditChangesJson(changes),
        },
        this.eventContext(),
      ),
    );
  }
}

/** Runs transactions and wakes the outbox relay after a commit that enqueued events. */
export class Transactions {
  constructor(
    private readonly orm: Orm,
    private readonly relay: Pick<OutboxRelay, "kick">,
    readonly logger: Logger,
  ) {}

  /** A fresh EntityManager for reads outside a transaction. */
  em(): EntityManager {
    return this.orm.em.fork();
  }

  /**
   * Runs `work` without a transaction: for a change that one statement makes (atomic by itself)
   * and that writes its events with it (`takeEvents`). Wakes the outbox relay after.
   */
  async once<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    const changes = new ChangeSet(this.em(), context);
    const result = await work(changes);
    if (changes.untaken > 0) {
      throw new Error("events were added outside a transaction and not written");
    }
    if (changes.enqueuedEvents > 0) this.relay.kick();
    return result;
  }

  async run<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    let changes: ChangeSet | undefined;
    const result = await this.orm.em.fork().transactional(async (em) => {
      changes = new ChangeSet(em, context);
      const done = await work(changes);
      await changes.flush();
      return done;
    });
    if (changes && changes.enqueuedEvents > 0) this.relay.kick();
    return result;
  }
}
