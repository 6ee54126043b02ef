import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AuditChange } from "@rowbase/kit";
import {
  auditChangesJson,
  ChangeSet as BaseChangeSet,
  Transactions as BaseTransactions,
  type Cache,
  type CallContext,
  type Logger,
  markTableSchemaChanged,
  type Orm,
  type OutboxEntry,
  type OutboxRelay,
  query,
  SUBJECTS,
} from "@rowbase/kit";
import {
  AuditEvent_TargetSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import type { RecordsApply } from "./records-apply.js";

export type AuditTargetType = "database" | "table" | "field" | "form";

const FORM_AUDIT_PREFIX = SUBJECTS.audit("form.");

/** Where an audited target lives; `tableId` is absent for a database. */
export interface AuditScope {
  organizationId: bigint;
  databaseId: bigint;
  tableId?: bigint;
}

/**
 * What one catalog transaction changes besides its rows (kit `ChangeSet`): its audit events, and
 * the tables whose schema it changes. Those get a raised schema version before the commit and
 * their cached schemas marked with it after (kit `markTableSchemaChanged`).
 */
export class ChangeSet extends BaseChangeSet {
  /** Tables whose schema (the table or its fields) this transaction changes. */
  readonly changedTables = new Set<bigint>();

  /** Events records applies, handed to it once this commits (`RecordsApply`). */
  private readonly forRecords: OutboxEntry[] = [];
  /** Events records applies before this commits, handed to it in `beforeCommit`. */
  private readonly forRecordsFirst: OutboxEntry[] = [];

  constructor(
    em: EntityManager,
    context: CallContext,
    private readonly cache: Cache,
    private readonly records?: RecordsApply,
  ) {
    super(em, context);
  }

  override async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<OutboxEntry> {
    const entry = await super.publish(subject, schema, init);
    const records = this.records;
    const when = records?.applies(subject);
    if (when === "before_commit") this.forRecordsFirst.push(entry);
    if (records && when === "after_commit") {
      if (this.forRecords.length === 0) {
        // In the order written, each after the one before it, as the bus delivers them.
        this.afterCommit(async () => {
          for (const event of this.forRecords) await records.apply(event, this.context);
        });
      }
      this.forRecords.push(entry);
    }
    // Every catalog event that names tables announces a change of them: their cached schemas
    // (records, files) must go once this commits. A form is not part of its table's schema:
    // its audit events change no schema version (and take no lock on the table row).
    if (subject.startsWith(FORM_AUDIT_PREFIX)) return entry;
    const named = init as { tableId?: unknown; tableIds?: unknown };
    if (typeof named.tableId === "bigint" && named.tableId !== 0n) {
      this.changedTables.add(named.tableId);
    }
    if (Array.isArray(named.tableIds)) {
      for (const id of named.tableIds) if (typeof id === "bigint") this.changedTables.add(id);
    }
    return entry;
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

  /**
   * Hands records the events it applies before the commit, in the order written (a failure
   * rolls this back); raises the changed tables' schema versions, whose cache entries are
   * marked after the commit.
   */
  override async beforeCommit(): Promise<void> {
    for (const event of this.forRecordsFirst.splice(0)) {
      await this.records!.apply(event, this.context).catch((error: unknown) => {
        throw new ConnectError(
          "the records service could not apply the change; nothing was changed",
          Code.Unavailable,
          undefined,
          undefined,
          error,
        );
      });
    }
    if (this.changedTables.size === 0) return;
    const tables = [...this.changedTables];
    const versions = await raiseSchemaVersions(this.em, tables);
    this.afterCommit(() => markTables(this.cache, tables, versions));
  }
}

/** Catalog's transactions, each with a catalog `ChangeSet`. */
export class Transactions extends BaseTransactions<ChangeSet> {
  constructor(
    orm: Orm,
    relay: Pick<OutboxRelay, "kick">,
    cache: Cache,
    logger: Logger,
    records?: RecordsApply,
  ) {
    super(orm, relay, logger, (em, context) => new ChangeSet(em, context, cache, records));
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
 * Marks the cached schemas of committed `tables` with their new versions. A cache that cannot be
 * reached is logged and does not fail the call: the entries live a minute at most, and records
 * and files evict them again on the events. In chunks: an organization's deletion can name many
 * thousands of tables.
 */
async function markTables(
  cache: Cache,
  tables: bigint[],
  versions: Map<bigint, bigint>,
): Promise<void> {
  for (let i = 0; i < tables.length; i += EVICTION_CHUNK) {
    await Promise.all(
      tables
        .slice(i, i + EVICTION_CHUNK)
        .map((id) => markTableSchemaChanged(cache, id, versions.get(id) ?? DELETED_TABLE_VERSION)),
    );
  }
}

/**
 * Raises the schema version of the tables a transaction changed, in it (the row lock orders
 * concurrent changes of a table as they commit); returns the new versions. A table deleted by
 * the transaction has none.
 */
async function raiseSchemaVersions(
  em: EntityManager,
  tables: bigint[],
): Promise<Map<bigint, bigint>> {
  const rows = await query<{ id: string; schema_version: string }>(
    em,
    `update tables set schema_version = schema_version + 1 where id = any($1::bigint[])
      returning id::text, schema_version::text`,
    [tables],
  );
  return new Map(rows.map((row) => [BigInt(row.id), BigInt(row.schema_version)]));
}
