import { randomUUID } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import {
  batchAuditEvents,
  buildAuditEvent,
  OUTBOX_PREPARED_EVENTS_MAX,
  type OutboxEntry,
  outboxInsert,
  preparedName,
  SUBJECTS,
  withOutboxInsert,
} from "@rowbase/kit";
import {
  type AuditEvent,
  AuditEventBatchSchema,
  AuditEventSchema,
} from "@rowbase/proto/rowbase/events/v1/audit_events_pb";
import pg from "pg";

/**
 * The ceiling: the statements the records service sends for each scenario, sent straight to
 * PostgreSQL with `pg`, so that `rowbase / raw-postgres` says how much of what the database can
 * do the whole path (gateway, gRPC, the service) delivers.
 *
 * Keep these in step with services/records/src/records.ts (list, get, create, update) and
 * src/db/record-store.ts, src/query/{where-compiler,sort,value-expression}.ts: the benchmark
 * checks before measuring that each read returns what Rowbase returned (same total, same rows),
 * which catches a change of meaning but not one of form (a new index hint, another join).
 *
 * Writes must not disturb what Rowbase reads or counts: raw creates go to a table and an
 * organization id that do not exist (their records never show in the benchmark table and their
 * quota row is their own), and the outbox rows go to `bench_raw.outbox`, a copy of
 * `records.outbox` with the same indexes that no relay reads (the connection's search_path puts
 * `bench_raw` first, so the statement is the service's own).
 */

/** `floor(extract(epoch from col) * 1000)::float8` as record-store's `epochMs`. */
const epochMs = (column: string) => `floor(extract(epoch from ${column}) * 1000)::float8`;

/** record-store's `recordColumns(alias)`. */
function recordColumns(alias?: string): string {
  return `${columnsButData(alias)}, ${alias ? `${alias}.` : ""}data`;
}

/** record-store's `columnsButData(alias)`. */
function columnsButData(alias?: string): string {
  const p = alias ? `${alias}.` : "";
  return `${p}row_id, ${p}table_id, ${epochMs(`${p}created_at`)} as created_ms, ${epochMs(`${p}updated_at`)} as updated_ms`;
}

const RECORD_COLUMNS = recordColumns();

// value-expression.ts: the stored forms of dates that `::date` cannot fail on.
const YEAR = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})";
const MONTH_DAY =
  "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
const LEAP_DAY =
  "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29";
const SQL_DATE_PATTERN = `^(${YEAR}-${MONTH_DAY}|${LEAP_DAY})$`;

/** value-expression.ts `typedValue` of a number field. */
const numberValue = (fieldId: string) =>
  `(CASE WHEN jsonb_typeof(r.data->'${fieldId}') = 'number' THEN (r.data->'${fieldId}')::numeric END)`;

/** value-expression.ts `typedValue` of a date field. */
const dateValue = (fieldId: string) => {
  const text = `(r.data->>'${fieldId}')`;
  return `(CASE WHEN ${text} ~ '${SQL_DATE_PATTERN}' THEN ${text}::date END)`;
};

export interface Statement {
  text: string;
  values: unknown[];
  /** Set for what the service sends as a prepared statement (kit's `query` with `prepare`). */
  name?: string;
}

/** A statement the service prepares, named as kit names it. */
function prepared(text: string, values: unknown[]): Statement {
  return { name: preparedName(text), text, values };
}

export interface ListQuery {
  limit: number;
  offset: number;
  /** `(Amount,gte,<min>)~and(Status,eq,<status>)`. */
  where?: { amountField: string; min: number; statusField: string; status: string };
  /** `-Due` when set: the date field sorted descending. */
  sortDescending?: string;
}

/** Records.list (record-store's `pageWithTotal`): the page with the count, one statement. */
export function listStatement(tableId: number, query: ListQuery): Statement {
  let filter = "true";
  const filterParams: unknown[] = [];
  if (query.where) {
    const { amountField, min, statusField, status } = query.where;
    // where-compiler: `gte` on a number, `eq` on a select (data @> {"id": "name"}), ANDed.
    filter = `(coalesce(${numberValue(amountField)} >= $2::numeric, false) AND coalesce(r.data @> $3::jsonb, false))`;
    filterParams.push(String(min), JSON.stringify({ [statusField]: status }));
  }
  const orderBy = query.sortDescending
    ? `${dateValue(query.sortDescending)} DESC NULLS FIRST, r.row_id ASC`
    : "r.row_id ASC";
  const matching = `from record r where r.table_id = $1 and ${filter}`;
  const base = [String(tableId), ...filterParams];
  const next = base.length;
  return {
    text: `select ${recordColumns("r")}, (select count(*) ${matching}) as total ${matching}
         order by ${orderBy} limit $${next + 1} offset $${next + 2}`,
    values: [...base, query.limit, query.offset],
  };
}

type Client = pg.PoolClient;

/** The benchmark's pages are never past the end, so the count always comes with the page. */
export async function rawList(client: Client, statement: Statement) {
  const page = await client.query<{ row_id: string; total: string }>(statement);
  return {
    total: Number(page.rows[0]?.total ?? 0),
    rowIds: page.rows.map((r) => Number(r.row_id)),
  };
}

/** record-store's `findRecords` (Records.get reads outside a transaction). */
function findStatement(tableId: string | number, rowIds: number[], lock: boolean): Statement {
  return prepared(
    `select ${RECORD_COLUMNS} from record
     where table_id = $1 and row_id = any($2::bigint[])
     order by row_id ${lock ? "for update" : ""}`,
    [String(tableId), rowIds],
  );
}

export async function rawGet(client: Client, tableId: number, rowId: number) {
  const found = await client.query(findStatement(tableId, [rowId], false));
  if (found.rows.length !== 1) throw new Error(`record ${rowId} not found`);
}

/** Where raw writes go, and the audit events they store (copies of the service's). */
export interface RawWriteTarget {
  /** A table id and an organization id that Rowbase does not use. */
  tableId: string;
  organizationId: string;
  actor: string;
  /** An `audit.record.created` / `audit.record.updated` event the service wrote. */
  createdEvent: AuditEvent;
  updatedEvent: AuditEvent;
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
function withEvents(entries: OutboxEntry[], text: string, values: unknown[]): Statement {
  const { sql, params } = withOutboxInsert(entries, text, values);
  // kit prepares the statements with up to 4 events.
  return entries.length <= 4 ? prepared(sql, params) : { text: sql, values: params };
}

/** One audit event per record, each with its own id, packed as the service packs them. */
function audits(event: AuditEvent, count: number): OutboxEntry[] {
  return batchAuditEvents(
    Array.from({ length: count }, () => ({
      ...event,
      meta: event.meta && { ...event.meta, eventId: randomUUID() },
    })),
  );
}

/**
 * Records.create of a table without autonumber fields: row ids first, then one statement
 * (record-store's `allocateRowIds` and `createRecords`) that passes `create_gate`, inserts the
 * records and one audit event per record, outside a transaction.
 */
export async function rawCreate(client: Client, target: RawWriteTarget, datas: string[]) {
  const { tableId, organizationId } = target;
  const ids = await client.query<{ id: string }>(
    prepared(
      `select nextval(pg_get_serial_sequence('record', 'row_id')) as id
     from generate_series(1, $1::int) order by 1`,
      [datas.length],
    ),
  );
  const events = audits(target.createdEvent, datas.length);
  const params: unknown[] = [
    tableId,
    organizationId,
    datas.length,
    "1000000000000000",
    target.actor,
    ids.rows.map((row) => row.id),
    `[${datas.join(",")}]`,
  ];
  const enqueue = outboxInsert(events, params.length + 1, "(select outcome from gate) = 'ok'");
  const text = `with gate as materialized (
       select create_gate($1::bigint, $2::bigint, $3::bigint, $4::bigint) as outcome
     ),
     inserted as (
       insert into record (row_id, table_id, organization_id, data, created_by, updated_by)
       select id.row_id, $1, $2, item.data, $5, $5
       from unnest($6::bigint[]) with ordinality as id(row_id, n)
         join jsonb_array_elements($7::jsonb) with ordinality as item(data, n) using (n)
       where (select outcome from gate) = 'ok'
       returning ${columnsButData()}
     ), enqueued as (${enqueue.sql})
     select gate.outcome, inserted.* from gate left join inserted on true`;
  const values = [...params, ...enqueue.params];
  const created = await client.query<{ outcome: string }>(
    events.length <= OUTBOX_PREPARED_EVENTS_MAX ? prepared(text, values) : { text, values },
  );
  if (created.rows[0]?.outcome !== "ok") throw new Error("raw create refused");
}

/**
 * Records.update of one record: lock it, write the merged data, one audit event. It updates a
 * seeded record of the benchmark table, as the Rowbase scenario does.
 */
export async function rawPatch(
  client: Client,
  target: RawWriteTarget,
  tableId: number,
  rowId: number,
  change: Record<string, unknown>,
) {
  await transaction(client, async () => {
    const found = await client.query<{ data: Record<string, unknown> }>(
      findStatement(tableId, [rowId], true),
    );
    const before = found.rows[0];
    if (!before) throw new Error(`record ${rowId} not found`);
    await client.query(
      withEvents(
        audits(target.updatedEvent, 1),
        `update record r set data = item.data, updated_at = now(), updated_by = $1
     from unnest($2::bigint[]) with ordinality as id(row_id, n)
       join jsonb_array_elements($3::jsonb) with ordinality as item(data, n) using (n)
     where r.row_id = id.row_id
     returning ${columnsButData("r")}`,
        [target.actor, [rowId], JSON.stringify([{ ...before.data, ...change }])],
      ),
    );
  });
}

/**
 * A pool of `size` connections to the records schema (raw outbox rows to `bench_raw`), and the
 * copy of the outbox they write to.
 */
export async function rawPool(databaseUrl: string, size: number): Promise<pg.Pool> {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query(`create schema if not exists bench_raw;
      create table if not exists bench_raw.outbox (like records.outbox including all)`);
  } finally {
    await admin.end();
  }
  return new pg.Pool({
    connectionString: databaseUrl,
    max: size,
    options: "-c search_path=bench_raw,records",
  });
}

/** Removes what raw writes left (with BASE_URL the database is not ours to drop). */
export async function removeRawWrites(databaseUrl: string, target: RawWriteTarget) {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  try {
    await admin.query("delete from records.record where table_id = $1", [target.tableId]);
    await admin.query("delete from records.organization_usage where organization_id = $1", [
      target.organizationId,
    ]);
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
  const stored = batch.rows[0] && fromBinary(AuditEventBatchSchema, batch.rows[0].payload).events;
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
