// Writes of records: row ids for creates, inserts, updates and deletes, with their events.

import type { JsonObject } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  OUTBOX_PREPARED_EVENTS_MAX,
  type OutboxEntry,
  outboxInsert,
  query,
  queryWithOutbox,
} from "@rowbase/kit";
import type { StoredRecord } from "../domain/record-output.js";
import {
  byRowId,
  epochMs,
  RECORD_ROWS,
  type RecordRow,
  rowIdsParam,
  type Statement,
  type TableRows,
  toStored,
} from "./rows.js";

/**
 * Takes `count` new row ids from records' one sequence of row ids
 * (migrations/row-id-sequence.ts), as one row: `ids`, ascending and comma-separated
 * (`rowIdsOf`). A row per id cost the driver a message and an object each, for every batch.
 */
export function allocateRowIdsStatement(count: number): Statement {
  return {
    sql: `select string_agg(id::text, ',' order by id) as ids
      from (select nextval('row_id_seq') as id from generate_series(1, $1::int)) taken`,
    params: [count],
    prepare: true,
  };
}

/** The row ids of `allocateRowIdsStatement`'s answer (no text: none were asked for). */
export function rowIdsOf(answer: { ids: string | null }): bigint[] {
  return answer.ids ? answer.ids.split(",").map(BigInt) : [];
}

/** `count` new row ids, ascending, for records a create is about to insert. */
export async function allocateRowIds(em: EntityManager, count: number): Promise<bigint[]> {
  const { sql, params, prepare } = allocateRowIdsStatement(count);
  const [answer] = await query<{ ids: string | null }>(em, sql, params, { prepare });
  return rowIdsOf(answer!);
}

/** How many row ids a `RowIdBlock` takes from the sequence at once, and how long it keeps them. */
const ROW_ID_BLOCK = { size: 64, maxAgeMs: 250 } as const;

/** The most records of one create that `RowIdBlock` serves; a larger create takes its own. */
const ROW_ID_BLOCK_SERVES = 8;

/**
 * Row ids for the creates of a records process, small ones taken from the sequence a block at a
 * time: a create of one record then needs one statement (the create's), not two. Each create
 * gets ids above those of the creates before it in the process. A block is let go after
 * `ROW_ID_BLOCK.maxAgeMs`, so that ids stay in creation order across replicas, each with its own
 * block, for records created further apart than that (within that time two creates on different
 * replicas are concurrent, and a sequence gives no order to concurrent creates either: its ids
 * are taken before their commits). Ids of a block let go, or of a replica that stops, are
 * never used, as a sequence leaves gaps after a rollback.
 */
export class RowIdBlock<Connection = EntityManager> {
  private ids: bigint[] = [];
  private at = 0;
  private takenAt = 0;
  private refill: Promise<void> | undefined;

  constructor(
    /** Takes `count` ids from the sequence on a connection (`allocateRowIds`). */
    private readonly allocate: (on: Connection, count: number) => Promise<bigint[]>,
    private readonly options: { size: number; maxAgeMs: number } = ROW_ID_BLOCK,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * `count` new row ids, ascending, and above every id this block gave before; taken on `on`
   * when the block has too few. A larger create takes its own from the sequence, and the block's
   * rest is let go, lest a later create be given an id below them.
   */
  async take(on: Connection, count: number): Promise<bigint[]> {
    if (count > ROW_ID_BLOCK_SERVES) {
      this.ids = [];
      return this.allocate(on, count);
    }
    for (;;) {
      if (this.ids.length - this.at >= count && this.now() - this.takenAt < this.options.maxAgeMs) {
        this.at += count;
        return this.ids.slice(this.at - count, this.at);
      }
      // One refill at a time: the creates that find the block spent meanwhile share the next.
      // It is taken on the caller's connection (within its transaction, if any: a nextval is not
      // rolled back), never on another of the pool, which creates holding every connection of
      // it would wait for. A create whose refill failed fails; the others sharing it try again.
      const mine = this.refill === undefined;
      this.refill ??= this.allocate(on, this.options.size)
        .then((ids) => {
          this.ids = ids;
          this.at = 0;
          this.takenAt = this.now();
        })
        .finally(() => {
          this.refill = undefined;
        });
      try {
        await this.refill;
      } catch (error) {
        if (mine) throw error;
      }
    }
  }
}

/**
 * Inserts records in the given order, with new row ids (`RowIdBlock`, one per record); the
 * result is in the same order. For a create of several statements: the one-statement create is
 * `createRecordsStatement`.
 */
export async function insertRecords(
  em: EntityManager,
  target: { tableId: bigint; organizationId: bigint; actor: string; rows: TableRows },
  datas: readonly JsonObject[],
  rowIds: readonly bigint[],
): Promise<StoredRecord[]> {
  // One JSON text for the whole batch rather than a jsonb[] (which the driver would write as an
  // array literal, escaping every quote of every record), and the data not read back: it is
  // what was sent. The rows of one statement share their times (`now()`).
  const data = target.rows.dataParam(datas);
  const insert = target.rows.insert({
    tableId: "$1",
    organizationId: "$2",
    actor: "$3",
    ids: "$4",
    data: "$5",
    condition: "true",
  });
  const [times] = await query<{ created_ms: number; updated_ms: number }>(
    em,
    // The ids are selected too: a user table's insert does not name them, and PostgreSQL must
    // know every parameter's type.
    `with inserted as (${insert})
     select $1::bigint as table_id, $2::bigint as organization_id,
       ${epochMs("min(created_at)")} as created_ms, ${epochMs("min(updated_at)")} as updated_ms
     from inserted`,
    [target.tableId, target.organizationId, target.actor, rowIdsParam(rowIds), data],
    { prepare: true },
  );
  return rowIds.map((rowId, index) => ({
    rowId,
    tableId: target.tableId,
    data: datas[index] as JsonObject,
    createdAt: new Date(times!.created_ms),
    updatedAt: new Date(times!.updated_ms),
  }));
}

/**
 * Writes new data for records (already locked) and stamps the change; writes `events` to the
 * outbox in the same statement.
 */
export async function writeRecords(
  em: EntityManager,
  actor: string,
  changes: readonly { rowId: bigint; data: JsonObject }[],
  events: readonly OutboxEntry[] = [],
  table: TableRows = RECORD_ROWS,
): Promise<StoredRecord[]> {
  const statement = writeRecordsStatement(actor, changes, table);
  const rows = await queryWithOutbox<Omit<RecordRow, "data">>(
    em,
    events,
    statement.sql,
    statement.params,
    { prepare: statement.prepare },
  );
  const written = new Map(changes.map((c) => [String(c.rowId), c.data]));
  return rows
    .map((row) => toStored({ ...row, data: written.get(row.row_id) as JsonObject }))
    .sort(byRowId);
}

/** `writeRecords`' statement, before its events are put in front of it. */
export function writeRecordsStatement(
  actor: string,
  changes: readonly { rowId: bigint; data: JsonObject }[],
  table: TableRows = RECORD_ROWS,
): Statement {
  // As insertRecords: the data as one JSON array (paired with the row ids by position), not
  // read back. Row ids are distinct (the caller refuses a record named twice).
  return {
    sql: `update ${table.relation} r set ${table.assign("item.data")}, updated_at = now(), updated_by = $1
     from unnest($2::bigint[]) with ordinality as id(row_id, n)
       join jsonb_array_elements($3::jsonb) with ordinality as item(data, n) using (n)
     where r.row_id = id.row_id
     returning ${table.head}`,
    params: [actor, changes.map((c) => c.rowId), table.dataParam(changes.map((c) => c.data))],
    prepare: true,
  };
}

/** What `writeRecordIfUnchanged` writes: a record's new data over the version it was read at. */
export interface UnchangedWrite {
  tableId: bigint;
  rowId: bigint;
  version: string;
  actor: string;
  data: JsonObject;
  /** The fields (ids) the write gives a value, for `write_gate`. */
  fields: readonly string[];
  /** Where the record is: the jsonb record table unless said. */
  rows?: TableRows;
}

/**
 * `writeRecordIfUnchanged`'s statement: `write_gate` first (as `lockRecordsForWrite` passes it,
 * with no pending change checked), then the record's data written only when the gate answered
 * `ok` and the row is still the version read, then `events` only when it was written. Its one
 * row: the gate's answer, and the record's columns but the data (null when nothing was written).
 * Throws RecordsTooLarge.
 */
export function writeRecordIfUnchangedStatement(
  write: UnchangedWrite,
  events: readonly OutboxEntry[],
): Statement {
  const table = write.rows ?? RECORD_ROWS;
  const params = [
    write.tableId,
    write.rowId,
    write.fields,
    [],
    table.dataParam([write.data]),
    write.actor,
    write.version,
  ];
  const enqueue = outboxInsert(events, params.length + 1, "exists (select from written)");
  return {
    sql: `with gate as materialized (
       select write_gate($1::bigint, $3::bigint[], $4::bigint[]) as outcome
     ),
     written as (
       update ${table.relation} r set ${table.assign("($5::jsonb)->0")}, updated_at = now(),
         updated_by = $6
       where ${table.ofTable("$1")} and r.row_id = $2 and r.xmin = $7::xid
         and (select outcome from gate) = 'ok'
       returning ${table.head}
     ),
     enqueued as (${enqueue.sql})
     select (select outcome from gate) as gate, written.* from (select) one
       left join written on true`,
    params: [...params, ...enqueue.params],
    prepare: events.length <= OUTBOX_PREPARED_EVENTS_MAX,
  };
}

/**
 * A record's update in one statement, outside a transaction (`writeRecordIfUnchangedStatement`):
 * the record as written, or undefined when nothing was written (the record changed since it was
 * read, or `write_gate` did not answer `ok`), its events included.
 */
export async function writeRecordIfUnchanged(
  em: EntityManager,
  write: UnchangedWrite,
  events: readonly OutboxEntry[],
): Promise<StoredRecord | undefined> {
  const { sql, params, prepare } = writeRecordIfUnchangedStatement(write, events);
  const [row] = await query<{ [K in Exclude<keyof RecordRow, "data">]: RecordRow[K] | null }>(
    em,
    sql,
    params,
    { prepare },
  );
  if (!row || row.row_id === null || row.table_id === null) return undefined;
  return toStored({
    row_id: row.row_id,
    table_id: row.table_id,
    data: write.data,
    created_ms: row.created_ms ?? 0,
    updated_ms: row.updated_ms ?? 0,
  });
}

/** What `deleteRecordIfUnchanged` deletes: a record at the version it was read at. */
export interface UnchangedDelete {
  tableId: bigint;
  organizationId: bigint;
  rowId: bigint;
  version: string;
  /** Where the record is: the jsonb record table unless said. */
  rows?: TableRows;
}

/**
 * `deleteRecordIfUnchanged`'s statement: `write_gate` first (sql/write_gate.sql: a table being
 * converted refuses the delete at once rather than have it wait behind the conversion and land
 * after its client gave up), then the record deleted only if it is still the version read, then,
 * only when it was, the organization's count given back (last, as a create takes it) and
 * `events` written. Its one row: how many records it deleted (0 or 1).
 */
export function deleteRecordIfUnchangedStatement(
  target: UnchangedDelete,
  events: readonly OutboxEntry[],
): Statement {
  const table = target.rows ?? RECORD_ROWS;
  const params = [target.tableId, target.rowId, target.version, target.organizationId];
  const enqueue = outboxInsert(events, params.length + 1, "exists (select from deleted)");
  return {
    sql: `with gate as materialized (
       select write_gate($1::bigint, '{}'::bigint[], '{}'::bigint[]) as outcome
     ),
     deleted as (
       delete from ${table.relation} r where ${table.ofTable("$1")} and r.row_id = $2
         and r.xmin = $3::xid and (select outcome from gate) is not null
       returning r.row_id
     ),
     released as materialized (
       select record_usage_add($4, -(select count(*) from deleted))
     ),
     enqueued as (${enqueue.sql})
     -- A CTE that writes nothing runs only when read: this select reads it.
     select (select count(*) from deleted)::int as deleted from released`,
    params: [...params, ...enqueue.params],
    prepare: events.length <= OUTBOX_PREPARED_EVENTS_MAX,
  };
}

/**
 * A record's deletion in one statement, outside a transaction
 * (`deleteRecordIfUnchangedStatement`): whether it deleted the record, its events included
 * (false when the record changed or went since it was read).
 */
export async function deleteRecordIfUnchanged(
  em: EntityManager,
  target: UnchangedDelete,
  events: readonly OutboxEntry[],
): Promise<boolean> {
  const { sql, params, prepare } = deleteRecordIfUnchangedStatement(target, events);
  const [row] = await query<{ deleted: number }>(em, sql, params, { prepare });
  return row?.deleted === 1;
}

/** Deletes records of a table (already locked, so the caller has read what it deletes). */
export async function deleteRecords(
  em: EntityManager,
  tableId: bigint,
  rowIds: readonly bigint[],
  table: TableRows = RECORD_ROWS,
): Promise<void> {
  await query(
    em,
    `delete from ${table.relation} r where ${table.ofTable("$1")} and r.row_id = any($2::bigint[])`,
    [tableId, rowIdsParam(rowIds)],
  );
}
