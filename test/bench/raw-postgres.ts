import { randomUUID } from "node:crypto";
import { fromBinary, type JsonObject } from "@bufbuild/protobuf";
import {
  type AuditChange,
  auditBatchEvents,
  buildAuditEvent,
  compactAuditEvents,
  OUTBOX_PREPARED_EVENTS_MAX,
  type OutboxEntry,
  preparedName,
  SUBJECTS,
  withOutboxInsert,
} from "@rowbase/kit";
import {
  type AuditEvent,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import {
  allocateRowIdsStatement,
  type CountMode,
  createdChange,
  createRecordsStatement,
  createTableSql,
  fieldIndexKeyOf,
  findRecordStatement,
  findRecordsStatement,
  listQuery,
  organizationSchema,
  pageStatement,
  RowIdBlock,
  recordChangesEntry,
  recordVersionStatement,
  rowIdsOf,
  type SchemaField,
  type Statement,
  type TableRows,
  type TableSchema,
  updatedChange,
  userTable,
  userTableRows,
  writeRecordIfUnchangedStatement,
  writeRecordsStatement,
} from "@rowbase/records/statements";
import pg from "pg";
import type { Tenant } from "./seed.js";

/**
 * The ceiling: the statements the records service sends for each scenario, sent straight to
 * PostgreSQL with `pg`, so that `rowbase / raw-postgres` says how much of what the database can
 * do the whole path (gateway, gRPC, the service) delivers. The statements are the service's own
 * (`@rowbase/records/statements`); what this file keeps in step by hand is their order and
 * transactions, as services/records/src/records.ts sends them. The benchmark table is a new
 * table, so the service keeps its records in a user table of their own (a column per field,
 * docs/records-storage.md), and so do these statements (`benchRows`). The benchmark also checks
 * before measuring that each read returns what Rowbase returned (same total, same rows).
 *
 * Writes must not disturb what Rowbase reads or counts: raw creates go to a table and an
 * organization id that do not exist, into a user table of their own with the benchmark table's
 * fields (`rawPool` makes it, `removeRawWrites` drops it with the counts and row ranges its
 * triggers wrote), so their records never show in the benchmark table and their quota row is
 * their own; the outbox rows go to `bench_raw.outbox`, a copy of `records.outbox` with the same
 * indexes that no relay reads (the connection's search_path puts `bench_raw` first, so the
 * statement is the service's own).
 */

type Client = pg.PoolClient;

/** Sends a statement as kit's `query` does: named when the service prepares it. */
function send<R extends pg.QueryResultRow>(client: Client, statement: Statement) {
  const { sql: text, params: values, prepare } = statement;
  return client.query<R>(prepare ? { name: preparedName(text), text, values } : { text, values });
}

/** The benchmark table as the records service sees it, from the fields the API answered. */
export function benchSchema(
  tenant: Pick<Tenant, "organizationId" | "databaseId" | "tableId" | "fields">,
): TableSchema {
  return {
    tableId: BigInt(tenant.tableId),
    databaseId: BigInt(tenant.databaseId),
    organizationId: BigInt(tenant.organizationId),
    name: "Customers",
    fields: tenant.fields.map((field) => ({
      id: String(field.field_id),
      name: field.name,
      type: field.type as SchemaField["type"],
      options: field.options,
      required: field.required,
      description: field.description,
    })),
  };
}

/** A table's records as the records service reaches them: its user table. */
export function benchRows(schema: TableSchema): TableRows {
  return userTableRows(schema.organizationId, schema.tableId, schema.fields);
}

/**
 * The raw creates' own table: the benchmark table's fields under the target's made-up table and
 * organization ids.
 */
export function rawWriteSchema(schema: TableSchema, target: RawWriteTarget): TableSchema {
  return { ...schema, tableId: target.tableId, organizationId: target.organizationId };
}

/** A list's parameters, as the scenario sends them in the URL. */
export interface ListQuery {
  limit: number;
  offset: number;
  where?: string;
  sort?: string;
  count?: CountMode;
}

/**
 * Records.list of a user table: the page with the count, one statement, built as the service
 * builds it when the table's field indexes are `indexed` (`servedFieldIndexes`).
 */
export function listStatement(
  schema: TableSchema,
  query: ListQuery,
  indexed: ReadonlySet<string>,
): Statement {
  return pageStatement(
    listQuery(
      schema,
      {
        limit: query.limit,
        offset: query.offset,
        where: query.where ?? "",
        sort: query.sort ?? "",
        count: query.count ?? "exact",
      },
      "columns",
      indexed,
    ),
  );
}

/**
 * The table's valid field indexes as the records service knows them (`TableIndexes.served`),
 * read from PostgreSQL's catalog; with `waitMs`, first waits until the service's builds of them
 * are done (none under way for a second), which a list's first request sets off.
 */
export async function servedFieldIndexes(
  pool: pg.Pool,
  schema: TableSchema,
  waitMs = 0,
): Promise<Set<string>> {
  const table = userTable(schema.organizationId, schema.tableId);
  const building = async () =>
    Number(
      (
        await pool.query<{ n: string }>(
          "select count(*) as n from pg_stat_progress_create_index where relid = to_regclass($1)",
          [table],
        )
      ).rows[0]?.n,
    );
  const deadline = Date.now() + waitMs;
  let quiet = 0;
  while (Date.now() < deadline && quiet < 4) {
    quiet = (await building()) === 0 ? quiet + 1 : 0;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const { rows } = await pool.query<{ name: string }>(
    `select c.relname as name from pg_index i join pg_class c on c.oid = i.indexrelid
     where i.indrelid = to_regclass($1) and i.indisvalid`,
    [table],
  );
  return new Set(rows.flatMap((row) => fieldIndexKeyOf(schema.tableId, row.name) ?? []));
}

/**
 * The benchmark's pages are never past the end, so the count always comes with the page, nor
 * past the page's byte budget, so every row is a record.
 */
export async function rawList(client: Client, statement: Statement) {
  const page = await send<{ row_id: string; total: string }>(client, statement);
  const total = page.rows[0]?.total;
  return {
    total: total === null || total === undefined ? null : Number(total),
    rowIds: page.rows.map((r) => Number(r.row_id)),
  };
}

/** Records.get (it reads outside a transaction). */
export async function rawGet(client: Client, rows: TableRows, tableId: number, rowId: number) {
  const found = await send(client, findRecordStatement(BigInt(tableId), BigInt(rowId), rows));
  if (found.rows.length !== 1) throw new Error(`record ${rowId} not found`);
  rows.recordOf(found.rows[0]!);
}

/** Where raw writes go, and the audit events they store (copies of the service's). */
export interface RawWriteTarget {
  /** A table id and an organization id that Rowbase does not use. */
  tableId: bigint;
  organizationId: bigint;
  actor: string;
  /** An `audit.record.created` / `audit.record.updated` event the service wrote. */
  createdEvent: AuditEvent;
  updatedEvent: AuditEvent;
  /** Where a create's row ids come from, as in the records service (`rawRowIds`). */
  rowIds: RowIdBlock<Client>;
}

/** Row ids taken as the records service takes them: a block at a time for small creates. */
export function rawRowIds(): RowIdBlock<Client> {
  return new RowIdBlock<Client>(async (client, count) => {
    const answer = await send<{ ids: string | null }>(client, allocateRowIdsStatement(count));
    return rowIdsOf(answer.rows[0]!);
  });
}

async function transaction<T>(client: Client, work: () => Promise<T>): Promise<T> {
  await client.query("begin");
  try {
    const result = await work();
    await client.query("commit");
    return result;
  } catch (error) {
    await client.query("rollback").catch(() => {});
    throw error;
  }
}

/**
 * kit's `queryWithOutbox`: a transaction's last statement, which takes its events along (the
 * benchmark's events are always one insert's worth).
 */
function withEvents(entries: OutboxEntry[], statement: Statement): Statement {
  const { sql, params } = withOutboxInsert(entries, statement.sql, statement.params);
  return {
    sql,
    params,
    prepare: statement.prepare && entries.length <= OUTBOX_PREPARED_EVENTS_MAX,
  };
}

/** One audit event per record, packed as the service packs them (kit `compactAuditEvents`). */
function audits(event: AuditEvent, count: number): OutboxEntry[] {
  const item = {
    targetId: event.target?.id ?? 0n,
    changes: JSON.parse(event.changesJson || "[]") as AuditChange[],
  };
  return compactAuditEvents(
    event,
    Array.from({ length: count }, () => item),
    {},
  );
}

/**
 * A write's change log entry, as the service adds it to the write's outbox rows (its
 * `records.changes` row, which the capture trigger on `bench_raw.outbox` turns into a
 * `record_change_write` row of the made-up table), written by the system actor.
 */
function changeLogEntry(
  target: RawWriteTarget,
  changes: Parameters<typeof recordChangesEntry>[1],
): OutboxEntry {
  return recordChangesEntry(
    { organizationId: target.organizationId, databaseId: 0n, tableId: target.tableId },
    changes,
    undefined,
  );
}

/**
 * Records.create of a table without autonumber fields: row ids (a block's, `RowIdBlock`), then
 * one statement (`createRecords`) that passes `create_checks`, inserts the records into `rows`
 * (the target's user table, `rawWriteSchema`), one audit event per record and the write's
 * change log entry, and counts them with `reserve_records`, outside a transaction.
 */
export async function rawCreate(
  client: Client,
  target: RawWriteTarget,
  rows: TableRows,
  datas: JsonObject[],
) {
  const ids = await target.rowIds.take(client, datas.length);
  const records = ids.map((rowId, index) => ({ rowId, data: datas[index]! }));
  const created = await send<{ outcome: string }>(
    client,
    createRecordsStatement(
      // The benchmark table has no autonumber field; the service sends its (empty) list too,
      // and the fields the records hold values for.
      {
        ...target,
        limit: 1_000_000_000_000_000n,
        autonumberFields: [],
        fields: [...new Set(datas.flatMap((data) => Object.keys(data)))],
        pendingChecked: [],
        rows,
      },
      records,
      [
        ...audits(target.createdEvent, datas.length),
        changeLogEntry(
          target,
          records.map(({ rowId, data }) => createdChange(rowId, data)),
        ),
      ],
    ),
  );
  if (created.rows[0]?.outcome !== "ok") throw new Error("raw create refused");
}

/**
 * Records.update of one record: read it with its row version, then one statement that passes
 * `write_gate`, writes the merged data if the record is still that version and takes its audit
 * event along, outside a transaction; when it wrote nothing (another writer got in between),
 * the transaction: lock it (past `write_gate`), write, the event. It updates a seeded record of
 * the benchmark table (`rows`, its user table), as the Rowbase scenario does.
 */
export async function rawPatch(
  client: Client,
  target: RawWriteTarget,
  rows: TableRows,
  tableId: number,
  rowId: number,
  change: JsonObject,
) {
  const fields = Object.keys(change);
  const read = await send<{ version: string }>(
    client,
    recordVersionStatement(BigInt(tableId), BigInt(rowId), rows),
  );
  const row = read.rows[0];
  if (!row) throw new Error(`record ${rowId} not found`);
  const before = { data: rows.recordOf(row).data, version: row.version };
  const after = { ...before.data, ...change };
  // Its change log entry goes to the made-up table (`target`), not to the benchmark table's.
  const logged = changeLogEntry(target, [
    updatedChange(
      {
        rowId: BigInt(rowId),
        tableId: target.tableId,
        data: before.data,
        createdAt: new Date(),
        updatedAt: new Date(),
      },
      after,
      fields.map((key) => ({
        key,
        label: key,
        old: before.data[key] ?? null,
        new: after[key] ?? null,
      })),
    ),
  ]);
  const written = await send<{ gate: string; row_id: string | null }>(
    client,
    writeRecordIfUnchangedStatement(
      {
        tableId: BigInt(tableId),
        rowId: BigInt(rowId),
        version: before.version,
        actor: target.actor,
        data: after,
        fields,
        rows,
      },
      [...audits(target.updatedEvent, 1), logged],
    ),
  );
  if (written.rows[0]?.row_id != null) return;
  await transaction(client, async () => {
    const found = await send<{ data: JsonObject }>(
      client,
      findRecordsStatement(
        BigInt(tableId),
        [BigInt(rowId)],
        true,
        { fields, pendingChecked: [] },
        rows,
      ),
    );
    const locked = found.rows[0];
    if (!locked) throw new Error(`record ${rowId} not found`);
    await send(
      client,
      withEvents(
        [...audits(target.updatedEvent, 1), logged],
        writeRecordsStatement(
          target.actor,
          [{ rowId: BigInt(rowId), data: { ...locked.data, ...change } }],
          rows,
        ),
      ),
    );
  });
}

/**
 * A pool of `size` connections to the records schema (raw outbox rows to `bench_raw`), the copy
 * of the outbox they write to, and the user table of `writes` (`rawWriteSchema`) that raw creates
 * insert into, made as the service makes one (`createTableSql`).
 */
export async function rawPool(
  databaseUrl: string,
  size: number,
  writes: TableSchema,
): Promise<pg.Pool> {
  // The user table's triggers call records' `user_table_rows_change`, found on this path.
  const admin = new pg.Client({ connectionString: databaseUrl, options: "-c search_path=records" });
  await admin.connect();
  try {
    // `like` copies no trigger: the change log's capture is made as records makes it.
    await admin.query(`create schema if not exists bench_raw;
      create table if not exists bench_raw.outbox (like records.outbox including all);
      create or replace trigger record_change_capture before insert on bench_raw.outbox
        for each row when (new.subject = 'records.changes')
        execute function records.record_change_capture()`);
    const fields = writes.fields.map((field) => ({ ...field, id: BigInt(field.id) }));
    for (const sql of createTableSql(writes.organizationId, writes.tableId, fields)) {
      await admin.query(sql);
    }
  } finally {
    await admin.end();
  }
  return new pg.Pool({
    connectionString: databaseUrl,
    max: size,
    options: "-c search_path=bench_raw,records",
  });
}

/**
 * Removes what raw writes left (with BASE_URL the database is not ours to drop): their user
 * table's schema, the count and row ranges its triggers kept for the made-up table id (the
 * schema goes without its delete trigger), and the change log rows of that table id.
 */
export async function removeRawWrites(databaseUrl: string, target: RawWriteTarget) {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query(`drop schema if exists ${organizationSchema(target.organizationId)} cascade`);
    for (const table of [
      "records.record_count",
      "records.row_range",
      "records.record_change_write",
    ]) {
      await admin.query(`delete from ${table} where table_id = $1`, [target.tableId]);
    }
    for (const table of ["records.organization_usage", "records.organization_usage_share"]) {
      await admin.query(`delete from ${table} where organization_id = $1`, [target.organizationId]);
    }
    await admin.query("drop schema if exists bench_raw cascade");
  } finally {
    await admin.end();
  }
}

/**
 * An audit event of `action` as the service just wrote it to its outbox (alone, or in an
 * `audit.batch`), for the raw writes to store copies of; a made-up one of about 400 bytes when
 * the relay already took them all.
 */
export async function auditSample(pool: pg.Pool, action: string): Promise<AuditEvent> {
  const single = await pool.query<{ payload: Buffer }>(
    "select payload from records.outbox where subject = $1 order by seq desc limit 1",
    [SUBJECTS.audit(action)],
  );
  if (single.rows[0]) return fromBinary(AuditEventSchema, single.rows[0].payload);
  const batch = await pool.query<{ payload: Buffer }>(
    "select payload from records.outbox where subject = $1 order by seq desc limit 1",
    [SUBJECTS.auditBatch],
  );
  const stored =
    batch.rows[0] &&
    auditBatchEvents(fromBinary(AuditEventBatchSchema, batch.rows[0].payload), randomUUID());
  return (
    stored?.find((event) => event.action === action) ??
    buildAuditEvent(
      {
        organizationId: 0n,
        databaseId: 0n,
        tableId: 0n,
        action,
        changesJson: JSON.stringify([{ key: "fld", label: "Name", new: "x".repeat(300) }]),
      },
      {},
    )
  );
}
