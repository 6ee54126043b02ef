import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  ChangeSet as BaseChangeSet,
  Transactions as BaseTransactions,
  buildEvent,
  type CallContext,
  type CompactAuditItem,
  compactAuditEvents,
  enqueueEvents,
  type Logger,
  type Orm,
  type OutboxEntry,
  type OutboxRelay,
  type Principal,
} from "@rowbase/kit";
import { AuditEvent_TargetSchema } from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { ValueChange } from "./domain/audit.js";
import { type RecordChangeEntry, recordChangesEntry } from "./domain/record-changes.js";

/** What an audit event of a record says was done to it. */
type RecordVerb = "created" | "updated" | "deleted";

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
  if (principal?.kind === "form") return `form:${principal.formId}`;
  return "system";
}

/**
 * What one records transaction (or one statement, `Transactions.once`) changes besides its rows
 * (kit `ChangeSet`): its events are gathered and written to the outbox together, in one
 * statement before the commit (`flush`) or with the statement that makes the change
 * (`takeEvents`).
 */
export class ChangeSet extends BaseChangeSet {
  private readonly pending: OutboxEntry[] = [];
  /**
   * Audit events of records by table and action, in the order first added, sent at `flush`
   * (`compactAuditEvents`: the records of one batch write in compact messages).
   */
  private readonly audits = new Map<
    string,
    { scope: RecordScope; verb: RecordVerb; items: CompactAuditItem[] }
  >();
  /** How many audit events `audits` holds. */
  private auditCount = 0;
  /** Record changes for the table's change log, written together at `flush`. */
  private recordChanges: { scope: RecordScope; changes: RecordChangeEntry[] } | undefined;

  /** Events added and not yet written or taken. */
  get untaken(): number {
    return this.pending.length + this.auditCount + (this.recordChanges ? 1 : 0);
  }

  /** Adds an event; it reaches the outbox with the others at `flush`, before the commit. */
  override async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<OutboxEntry> {
    this.events += 1;
    const entry = buildEvent(subject, schema, init, this.eventContext());
    this.pending.push(entry);
    return entry;
  }

  /**
   * Writes the events added so far to the outbox in one statement: the others in order, then the
   * audit events, several to a message when there are several.
   */
  async flush(): Promise<void> {
    const entries = this.takeEvents();
    if (entries.length > 0) await enqueueEvents(this.em, entries);
  }

  override async beforeCommit(): Promise<void> {
    await this.flush();
  }

  /**
   * The events added so far, in `flush`'s order, for the caller's next statement to write
   * (kit's `queryWithOutbox`); they are the caller's to write from then on.
   */
  takeEvents(): OutboxEntry[] {
    const changes = this.recordChanges;
    this.recordChanges = undefined;
    const audits = [...this.audits.values()];
    this.audits.clear();
    this.auditCount = 0;
    const entries = [
      ...this.pending.splice(0),
      ...audits.flatMap(({ scope, verb, items }) =>
        compactAuditEvents(
          {
            organizationId: scope.organizationId,
            databaseId: scope.databaseId,
            tableId: scope.tableId,
            action: `record.${verb}`,
            target: create(AuditEvent_TargetSchema, { type: "record" }),
          },
          items,
          this.eventContext(),
        ),
      ),
      ...(changes
        ? [recordChangesEntry(changes.scope, changes.changes, this.context.principal)]
        : []),
    ];
    this.written(...entries);
    return entries;
  }

  /**
   * A record created, updated or deleted, for the table's change log: the changes of one write go
   * in one outbox row, in the order they are added, which a trigger turns into the log's rows in
   * the write's transaction (sql/record_change_capture.sql). They carry what the write knows
   * (the record after it, and the values before it), so the log never reads a record again.
   */
  recordChanged(scope: RecordScope, change: RecordChangeEntry): void {
    if (this.recordChanges && this.recordChanges.scope.tableId !== scope.tableId) {
      throw new Error("one write's record changes are of one table");
    }
    if (!this.recordChanges) this.events += 1;
    this.recordChanges ??= { scope, changes: [] };
    this.recordChanges.changes.push(change);
  }

  /**
   * An audit event `audit.record.<verb>` on the AUDIT stream, sent at `flush` together with the
   * transaction's other audit events of the table and verb (the records of a batch write in
   * compact `audit.batch` messages); each change is keyed by field id with the field's name at
   * the time as its label, so that an entry still reads after the field is renamed.
   */
  auditRecord(scope: RecordScope, verb: RecordVerb, rowId: bigint, changes: ValueChange[]): void {
    this.events += 1;
    this.auditCount += 1;
    const key = `${scope.tableId}:${verb}`;
    let group = this.audits.get(key);
    if (!group) {
      group = { scope, verb, items: [] };
      this.audits.set(key, group);
    }
    group.items.push({ targetId: rowId, changes });
  }
}

/** Records' transactions, each with a records `ChangeSet`. */
export class Transactions extends BaseTransactions<ChangeSet> {
  constructor(orm: Orm, relay: Pick<OutboxRelay, "kick">, logger: Logger) {
    super(orm, relay, logger, (em, context) => new ChangeSet(em, context));
  }

  /**
   * Runs `work` without a transaction: for a change that one statement makes (atomic by itself)
   * and that writes its events with it (`takeEvents`). What follows a commit follows it.
   */
  async once<T>(context: CallContext, work: (changes: ChangeSet) => Promise<T>): Promise<T> {
    const changes = this.open(this.em(), context);
    const result = await work(changes);
    if (changes.untaken > 0) {
      throw new Error("events were added outside a transaction and not written");
    }
    await this.committed(changes);
    return result;
  }
}
