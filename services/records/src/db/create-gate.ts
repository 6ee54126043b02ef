// What a create passes before its records are stored, and the record quota: the table's and the
// organization's advisory locks, `create_checks` and `create_gate` (sql/), the one-statement
// create that counts its records last (`reserve_records`), and the organization's usage.

import type { JsonObject } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  hasSqlState,
  lockHeld,
  OUTBOX_PREPARED_EVENTS_MAX,
  type OutboxEntry,
  outboxInsert,
  query,
  queryWithOutbox,
} from "@rowbase/kit";
import type { StoredRecord } from "../domain/record-output.js";
import { epochMs, RECORD_ROWS, rowIdsParam, type Statement, type TableRows } from "./rows.js";

function tableLockKey(tableId: bigint): string {
  return `records.table:${tableId}`;
}

/**
 * Held exclusively by a type change while it converts the table's values (user-tables/
 * type-change.ts); a write only tries it, shared, and is refused while it is held
 * (sql/write_gate.sql says why).
 */
export function tableConversionLockKey(tableId: bigint): string {
  return `records.conversion:${tableId}`;
}

function organizationLockKey(organizationId: bigint): string {
  return `records.organization:${organizationId}`;
}

/**
 * The longest a write waits for its table's lock (and its organization's, for a create): a
 * type change holds the table's exclusively while it converts the table, for minutes on
 * millions of records, and a write that waited longer than its client (the gateway's 10 s)
 * would be applied after the client was told 503. Past it PostgreSQL refuses the statement
 * with lock_not_available, nothing is written, and the call answers 503 with Retry-After
 * (kit's grpc-server). The same bound is the `lock_timeout` of the SQL functions that take the
 * lock for a write (sql/write_gate.sql, create_checks.sql), which a test holds to this one.
 */
export const WRITE_LOCK_TIMEOUT_MS = 5_000;

/**
 * Taken (shared) by every create until its transaction ends (the table's also by every update,
 * through `write_gate`), and exclusively by the deletion of the table or the organization (the
 * table's also by a field's deletion and a type change's check, sql/write_gate.sql): a
 * create either commits before the deletion removes what it holds, or runs after it and finds
 * the mark (`deleted_table`, `deleted_organization`) that `create_gate` and `create_checks`
 * look for — so a create racing a deletion never leaves a record behind. Taken first in a
 * create's transaction (before autonumber counters, in the deletion's order);
 * `create_gate` takes it again, held already, at the end.
 */
export async function lockForCreate(
  em: EntityManager,
  tableId: bigint,
  organizationId: bigint,
): Promise<void> {
  // As create_checks: refused at once while the table's values are being converted, else the
  // locks waited for within the bound, which the first CTE sets before they are asked for and
  // which holds for the rest of the create's transaction (its other waits are a moment's).
  const locked = await query(
    em,
    `with bound as materialized (select set_config('lock_timeout', $3, true)),
     free as materialized (
       select pg_try_advisory_xact_lock_shared(hashtextextended($4, 0)) as ok from bound
     )
     select 1 as locked from free, lateral (
       select pg_advisory_xact_lock_shared(hashtextextended($1, 0)),
              pg_advisory_xact_lock_shared(hashtextextended($2, 0))
       where free.ok
     ) as locks`,
    [
      organizationLockKey(organizationId),
      tableLockKey(tableId),
      `${WRITE_LOCK_TIMEOUT_MS}ms`,
      tableConversionLockKey(tableId),
    ],
    { prepare: true },
  );
  if (locked.length === 0) throw lockHeld();
}

export async function lockTableExclusive(em: EntityManager, tableId: bigint): Promise<void> {
  await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [tableLockKey(tableId)]);
}

export async function lockOrganizationExclusive(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
    organizationLockKey(organizationId),
  ]);
}

/**
 * What `create_gate` and `create_checks` (sql/create_gate.sql, create_checks.sql, write_gate.sql)
 * answer; `stale`: the table has an autonumber field the create did not number,
 * or a field the create holds a value for is deleted (its schema is older than the change);
 * `pending`: a field the create holds a value for has a pending type change the create has not
 * checked its values against.
 */
export type GateOutcome = "ok" | "gone" | "over_limit" | "stale" | "pending";

/** What `write_gate` answers (`create_gate` and `create_checks` pass these on). */
export type WriteGateOutcome = Extract<GateOutcome, "ok" | "stale" | "pending">;

/** The seven parameters of `create_gate` and `create_checks`, as a statement's first seven. */
const GATE_ARGS =
  "($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint[], $6::bigint[], $7::bigint[])";

const CREATE_GATE_CALL = `create_gate${GATE_ARGS}`;

const CREATE_CHECKS_CALL = `create_checks${GATE_ARGS}`;

/** The gate's parameters, in CREATE_GATE_CALL's order. */
function gateParams(target: GateTarget, count: number): unknown[] {
  return [
    target.tableId,
    target.organizationId,
    count,
    target.limit,
    target.autonumberFields,
    target.fields,
    target.pendingChecked,
  ];
}

export type CreateOutcome =
  | { outcome: "ok"; records: StoredRecord[] }
  | { outcome: Exclude<GateOutcome, "ok"> };

/** What `write_gate` checks a write against. */
export interface WriteGate {
  /** The fields (ids) the write holds values for. */
  fields: readonly string[];
  /** The pending type changes (ids) the write's values were checked against. */
  pendingChecked: readonly string[];
}

/** What `create_gate` and `create_checks` check a create against. */
export interface GateTarget extends WriteGate {
  tableId: bigint;
  organizationId: bigint;
  /** The organization's record limit. */
  limit: bigint;
  /**
   * The autonumber fields (ids) the create numbers, by the schema it was checked against; null
   * when that schema was just read from catalog, so nothing can be missing from it.
   */
  autonumberFields: readonly string[] | null;
}

/** Where a create writes, as `createRecords` takes it. */
export interface CreateTarget extends GateTarget {
  actor: string;
  /** Where the rows go: the jsonb record table unless said. */
  rows?: TableRows;
}

/**
 * `createRecords`' statement. `create_checks` first (sql/create_checks.sql: the locks, the
 * deletion marks, autonumber fields the create does not know, deleted fields and pending type
 * changes of the fields it writes, write_gate.sql), as a materialized CTE; the insert and the
 * events only when it answers `ok`; then, in the select list and so after every CTE of its
 * FROM is complete, `reserve_records` counts the records against the limit, taking the
 * organization's usage lock to the commit (sql/take_records.sql: shared far from the limit,
 * exclusive near it, when the organization's other creates wait for the commit, not for this
 * insert). Over the limit, it raises RB001 and the statement
 * writes nothing. It answers one row: the outcome, how many records it inserted and their
 * times (the columns' default, `now()`, is the same for every row of a statement), so that a
 * batch does not read back a row per record.
 */
export function createRecordsStatement(
  target: CreateTarget,
  rows: readonly { rowId: bigint; data: JsonObject }[],
  events: readonly OutboxEntry[],
): Statement {
  const params: unknown[] = [
    ...gateParams(target, rows.length),
    target.actor,
    rowIdsParam(rows.map((row) => row.rowId)),
    (target.rows ?? RECORD_ROWS).dataParam(rows.map((row) => row.data)),
  ];
  const enqueue = outboxInsert(events, params.length + 1, "(select outcome from gate) = 'ok'");
  const queued = events.length > 0;
  return {
    sql: `with gate as materialized (
       select ${CREATE_CHECKS_CALL} as outcome
     ),
     inserted as (
       ${(target.rows ?? RECORD_ROWS).insert({
         tableId: "$1",
         organizationId: "$2",
         actor: "$8",
         ids: "$9",
         data: "$10",
         condition: "(select outcome from gate) = 'ok'",
       })}
     ),
     written as materialized (
       select count(*)::int as n, min(created_at) as created_at, min(updated_at) as updated_at
       from inserted
     )${queued ? `, enqueued as (${enqueue.sql} returning 1), queued as materialized (select count(*) from enqueued)` : ""}
     select case when gate.outcome = 'ok' then reserve_records($2, written.n, $4)
         else gate.outcome end as outcome,
       written.n as inserted,
       ${epochMs("written.created_at")} as created_ms,
       ${epochMs("written.updated_at")} as updated_ms
     from gate, written${queued ? ", queued" : ""}`,
    params: queued ? [...params, ...enqueue.params] : params,
    prepare: events.length <= OUTBOX_PREPARED_EVENTS_MAX,
  };
}

/** SQLSTATE of `reserve_records` refusing records over the organization's limit. */
const OVER_LIMIT_STATE = "RB001";

/**
 * Creates records with their `events`, in one statement and so without a transaction around it
 * (`createRecordsStatement`). `rows` carry ids from `allocateRowIds`; the result is in their
 * order.
 */
export async function createRecords(
  em: EntityManager,
  target: CreateTarget,
  rows: readonly { rowId: bigint; data: JsonObject }[],
  events: readonly OutboxEntry[],
): Promise<CreateOutcome> {
  const { sql, params, prepare } = createRecordsStatement(target, rows, events);
  let answer:
    | { outcome: string; inserted: number; created_ms: number | null; updated_ms: number | null }
    | undefined;
  try {
    [answer] = await query<NonNullable<typeof answer>>(em, sql, params, { prepare });
  } catch (error) {
    if (hasSqlState(error, OVER_LIMIT_STATE)) return { outcome: "over_limit" };
    throw error;
  }
  const outcome = answer?.outcome;
  if (
    outcome === "gone" ||
    outcome === "over_limit" ||
    outcome === "stale" ||
    outcome === "pending"
  ) {
    return { outcome };
  }
  if (outcome !== "ok" || answer?.inserted !== rows.length) {
    throw new Error(
      `create_checks answered ${outcome} with ${answer?.inserted} of ${rows.length} rows`,
    );
  }
  const createdAt = new Date(answer.created_ms!);
  const updatedAt = new Date(answer.updated_ms!);
  return {
    outcome,
    records: rows.map((row) => ({
      rowId: row.rowId,
      tableId: target.tableId,
      data: row.data,
      createdAt,
      updatedAt,
    })),
  };
}

/**
 * The last statement of a create's transaction: `create_gate` looks for the deletion marks and
 * counts the records against `limit` (the usage lock is held until the commit, so it comes
 * last), and the transaction's `events` go to the outbox with it. Anything but `ok` means the
 * caller rolls back, events included.
 */
export async function passCreateGate(
  em: EntityManager,
  target: GateTarget,
  count: number,
  events: readonly OutboxEntry[],
): Promise<GateOutcome> {
  const rows = await queryWithOutbox<{ outcome: GateOutcome }>(
    em,
    events,
    `select ${CREATE_GATE_CALL} as outcome`,
    gateParams(target, count),
    { prepare: true },
  );
  return rows[0]!.outcome;
}

/** Gives back the count of deleted records; writes `events` to the outbox in the same statement. */
export async function releaseRecords(
  em: EntityManager,
  organizationId: bigint,
  count: number,
  events: readonly OutboxEntry[] = [],
): Promise<void> {
  if (count === 0 && events.length === 0) return;
  await queryWithOutbox(em, events, "select record_usage_add($1, -$2::bigint)", [
    organizationId,
    count,
  ]);
}

/** The records an organization holds, as counted (sql/record_usage.sql). */
export async function recordUsage(em: EntityManager, organizationId: bigint): Promise<bigint> {
  const rows = await query<{ records: string }>(em, "select record_usage($1)::text as records", [
    organizationId,
  ]);
  return BigInt(rows[0]?.records ?? 0);
}
