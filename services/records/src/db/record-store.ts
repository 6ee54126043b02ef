import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import {
  hasSqlState,
  OUTBOX_PREPARED_EVENTS_MAX,
  type OutboxEntry,
  outboxInsert,
  query,
  queryWithOutbox,
  type ReadStatement,
} from "@rowbase/kit";
import { PAGE_MAX_BYTES, RECORD_MAX_BYTES } from "../domain/openapi.js";
import type { StoredRecord } from "../domain/record-output.js";
import { type OrderTerm, orderBySql } from "../query/index.js";

/**
 * A `record` row as read through `recordColumns` (bigint as text; times as epoch milliseconds,
 * since the ORM's driver hands timestamptz over as text in the session's time zone).
 */
interface RecordRow {
  row_id: string;
  table_id: string;
  data: JsonObject;
  created_ms: number;
  updated_ms: number;
}

/** Epoch milliseconds of a timestamptz column, as a JSON-safe double. */
export function epochMs(column: string): string {
  return `floor(extract(epoch from ${column}) * 1000)::float8`;
}

/** The select list that `toStored` reads, for `record` under an optional alias. */
export function recordColumns(alias?: string): string {
  return `${columnsButData(alias)}, ${alias ? `${alias}.` : ""}data`;
}

/**
 * `recordColumns` but the data, for statements that wrote data the caller already holds (the
 * database would write it out as text, to be parsed again).
 */
function columnsButData(alias?: string): string {
  const p = alias ? `${alias}.` : "";
  return `${p}row_id, ${p}table_id, ${epochMs(`${p}created_at`)} as created_ms, ${epochMs(`${p}updated_at`)} as updated_ms`;
}

const RECORD_COLUMNS = recordColumns();

export function toStored(row: RecordRow): StoredRecord {
  return {
    rowId: BigInt(row.row_id),
    tableId: BigInt(row.table_id),
    data: row.data,
    createdAt: new Date(row.created_ms),
    updatedAt: new Date(row.updated_ms),
  };
}

const byRowId = (a: StoredRecord, b: StoredRecord) =>
  a.rowId < b.rowId ? -1 : a.rowId > b.rowId ? 1 : 0;

/**
 * A statement as kit's `query` sends it. The record routes' statements are built apart from
 * running them, so that the benchmark's raw-postgres ceiling sends exactly these
 * (`@rowbase/records/statements`).
 */
export interface Statement {
  sql: string;
  params: unknown[];
  /** Sent as a named prepared statement (kit's `query` with `prepare`). */
  prepare: boolean;
}

/** Reads rows of records in a statement that returns `RECORD_COLUMNS`. */
export async function recordsOf(
  em: EntityManager,
  sql: string,
  params: readonly unknown[],
  options: { prepare?: boolean } = {},
): Promise<StoredRecord[]> {
  return (await query<RecordRow>(em, sql, params, options)).map(toStored);
}

/**
 * A write's records whose values would pass RECORD_MAX_BYTES (thrown before the statement is
 * sent): their indexes among the records written.
 */
export class RecordsTooLarge extends Error {
  constructor(readonly indexes: readonly number[]) {
    super(`records over ${RECORD_MAX_BYTES} bytes of values: ${indexes.join(", ")}`);
  }
}

/**
 * A number in exponent form, as JSON.stringify writes those past 1e21 and below 1e-6 (`1e+308`,
 * `1.5e-7`): the pattern also meets such text inside a string, which only costs a walk.
 */
const EXPONENT = /\de[+-]\d/;

/**
 * How many bytes more than JSON.stringify's text `value`'s numbers take as PostgreSQL sends them
 * back: jsonb writes every number out in full, `1e+308` as 309 digits and `1.5e-7` as
 * `0.00000015`, so a record of such numbers would come back tens of times its written size.
 */
function numbersExpandedBy(value: JsonValue): number {
  if (typeof value === "number") {
    const text = String(value);
    const e = text.indexOf("e");
    if (e < 0) return 0;
    const digits = text.slice(0, e).replace(/[-.]/g, "").length;
    const exponent = Number(text.slice(e + 1));
    const sign = value < 0 ? 1 : 0;
    // Past the point: the digits and zeros up to it (a point when digits follow it); before
    // it: "0.", the zeros after the point, the digits.
    const full =
      exponent >= 0
        ? Math.max(digits, exponent + 1) + (digits > exponent + 1 ? 1 : 0)
        : 1 - exponent + digits;
    return sign + full - text.length;
  }
  if (value === null || typeof value !== "object") return 0;
  let extra = 0;
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    extra += numbersExpandedBy(item as JsonValue);
  }
  return extra;
}

/**
 * Records' data as the write statements send it, one JSON array (the same text as
 * `JSON.stringify(datas)`), each record's text measured on the way so that the bound costs no
 * second serialization: a string takes at most 3 UTF-8 bytes per UTF-16 unit, so only a text
 * longer than a third of the bound is counted byte by byte. Numbers count as PostgreSQL sends
 * them back, written out in full (`numbersExpandedBy`), the one case where a read is not near
 * the written size. Throws RecordsTooLarge.
 */
function dataArrayJson(datas: readonly JsonObject[]): string {
  const texts: string[] = [];
  const over: number[] = [];
  datas.forEach((data, index) => {
    const text = JSON.stringify(data);
    const extra = EXPONENT.test(text) ? numbersExpandedBy(data) : 0;
    if (
      text.length * 3 + extra > RECORD_MAX_BYTES &&
      Buffer.byteLength(text) + extra > RECORD_MAX_BYTES
    ) {
      over.push(index);
    }
    texts.push(text);
  });
  if (over.length > 0) throw new RecordsTooLarge(over);
  return `[${texts.join(",")}]`;
}

/**
 * `select` (rows holding `data`, in order) as a statement that PostgreSQL answers only within
 * PAGE_MAX_BYTES of values, measured as it sends them (`data` as text): every row in order with
 * `fits` true, or one row of nulls with `fits` false. An empty `select` answers one row of
 * nulls with `fits` true (the budget's row, which every answer carries). The rows are numbered
 * as `select` gives them, so that the join keeps its order.
 */
function withinReadBudget(select: string): string {
  return `with page as materialized (
       select selected.*, row_number() over () as budget_n from (${select}) selected
     ),
     budget as (
       select coalesce(sum(octet_length(data::text)), 0) <= ${PAGE_MAX_BYTES} as fits from page
     )
     select page.*, budget.fits from budget left join page on budget.fits order by page.budget_n`;
}

/** A row of a `withinReadBudget` statement: the select's columns (null in the budget's row). */
type BudgetedRow<R> = { [K in keyof R]: R[K] | null } & { fits: boolean };

/**
 * The select's rows of a `withinReadBudget` statement, undefined when it passed the budget; the
 * rows of a statement that was not measured (no `fits`) as they are.
 */
function withinBudget<R extends { row_id: string }>(
  rows: readonly BudgetedRow<R>[],
): R[] | undefined {
  const first = rows[0];
  if (!first || !("fits" in first)) return rows as unknown as R[];
  if (!first.fits) return undefined;
  return first.row_id === null ? [] : (rows as unknown as R[]);
}

/**
 * What a list reads (built by `listQuery`): the records `matching` (`from record r where ...`,
 * over `params`, the first of which is the table's id), in `order`, one page of them.
 */
export interface PageQuery {
  matching: string;
  /** False when `matching` is every record of the table: `record_count` then counts them. */
  filtered: boolean;
  /** Whether `matching`'s filter reads a field of `data` (false: only columns, or none). */
  filterReadsData: boolean;
  order: readonly OrderTerm[];
  params: readonly unknown[];
  limit: number;
  offset: number;
  count: CountMode;
}

/**
 * How a list counts its matches: `exact` counts every one; `estimated` counts up to
 * ESTIMATE_ABOVE exactly and takes PostgreSQL's planner estimate past it; `none` makes no count
 * (the page then looks one match past itself to know whether another page exists).
 */
export type CountMode = "exact" | "estimated" | "none";

/** Up to how many matches an `estimated` count is exact. */
export const ESTIMATE_ABOVE = 1000;

/**
 * The page with the count of all matches, in one statement, so one snapshot, without a
 * transaction around two. The page is sent only within PAGE_MAX_BYTES (`withinReadBudget`).
 *
 * The page's row ids come first (`top`), then only those records are read, by primary key: an
 * offset skips ids, not whole records. In `row_id` order the ids come from the
 * `(table_id, row_id)` index, which stops after the page (without a filter on `data` the
 * records are not read at all to skip them), and the count is an uncorrelated subquery
 * PostgreSQL runs once. So it is in the order of a record's `created_at` or `updated_at`
 * (first), unless the filter reads `data`: the ids come from the table's index of that
 * column with `row_id` (migration `TimestampIndexes`), ties sorted on the way, and a filter on
 * the columns is counted from the same index. Any other order has to sort every match, so the
 * matches are read once rather than twice: their row ids and sort values (`matching`,
 * materialized, small), counted, and sorted for the page. Without a filter the count is the
 * table's `record_count`.
 */
export function pageStatement(page: PageQuery): Statement {
  const next = page.params.length;
  const window = `limit $${next + 1} offset $${next + 2}`;
  const column = (term: OrderTerm, index: number) => (term.rowId ? "row_id" : `sort_${index}`);
  const sortValues = page.order
    .map((term, index) => (term.rowId ? "" : `, ${term.value} as ${column(term, index)}`))
    .join("");
  let prelude = "";
  let top: string;
  let count: string;
  if (page.order.every((term) => term.rowId)) {
    top = `select r.row_id ${page.matching} order by ${orderBySql(page.order)} ${window}`;
    count = countSql(page);
  } else if (page.order[0]?.column && !page.filterReadsData) {
    top = `select r.row_id${sortValues} ${page.matching} order by ${orderBySql(page.order)} ${window}`;
    count = countSql(page);
  } else {
    prelude = `with matching as materialized (
       select r.row_id${sortValues} ${page.matching}
     ) `;
    top = `select * from matching order by ${orderBySql(page.order, column)} ${window}`;
    count = page.filtered ? "select count(*) from matching" : countSql(page);
  }
  const total = totalSql(page, count, prelude === "" ? page.matching : "from matching");
  const more = `exists (select 1 ${prelude === "" ? page.matching : "from matching"}
       offset $${next + 1}::bigint + $${next + 2}::bigint)`;
  return {
    sql: withinReadBudget(`${prelude}select ${recordColumns("r")}, (${total}) as total,
       ${page.count === "exact" ? "false" : more} as more
     from (${top}) top join record r on r.row_id = top.row_id
     order by ${orderBySql(page.order, (term, index) => `top.${column(term, index)}`)}`),
    params: [...page.params, page.limit, page.offset],
    prepare: false,
  };
}

/** The count of a page's matches, as SQL over the page's parameters. */
function countSql(page: PageQuery): string {
  return page.filtered
    ? `select count(*) ${page.matching}`
    : "select coalesce(sum(delta), 0)::bigint from record_count where table_id = $1";
}

/**
 * The `total` column as the page's count mode asks: the exact count (`exact`, the count of
 * `count`), at most ESTIMATE_ABOVE + 1 matches of `from` (`estimated`; an unfiltered count is
 * exact and cheap, so it is made), or null (`none`).
 */
function totalSql(page: PageQuery, count: string, from: string): string {
  if (page.count === "none") return "select null::bigint";
  if (page.count === "estimated" && page.filtered) {
    return `select count(*) from (select 1 ${from} limit ${ESTIMATE_ABOVE + 1}) capped`;
  }
  return count;
}

/** A page's `total` as the caller sees it: a count (estimated or exact), or none. */
export interface PageCount {
  total: bigint | null;
  estimated: boolean;
}

/**
 * The count of a page's matches as `totalSql` made it, completed: an `estimated` count past
 * ESTIMATE_ABOVE becomes PostgreSQL's estimate of the matches (its plan's row count), never less
 * than the matches seen.
 */
async function completeCount(
  read: ReadStatement,
  page: PageQuery,
  counted: bigint | null,
): Promise<PageCount> {
  if (
    page.count !== "estimated" ||
    !page.filtered ||
    counted === null ||
    counted <= ESTIMATE_ABOVE
  ) {
    return { total: counted, estimated: false };
  }
  const [plan] = await read<{ "QUERY PLAN": [{ Plan: { "Plan Rows": number } }] }>(
    `explain (format json) select 1 ${page.matching}`,
    page.params,
  );
  const rows = BigInt(Math.round(plan?.["QUERY PLAN"][0]?.Plan["Plan Rows"] ?? 0));
  return { total: rows > counted ? rows : counted, estimated: true };
}

/**
 * A page of records and the count of all matches (`pageStatement`), or `over_budget` for a page
 * past PAGE_MAX_BYTES. A page past the end has no row to carry the count, so that case (only)
 * counts again on its own.
 */
export async function pageWithTotal(
  read: ReadStatement,
  page: PageQuery,
): Promise<({ records: StoredRecord[]; hasMore: boolean } & PageCount) | "over_budget"> {
  const { sql, params } = pageStatement(page);
  const rows = withinBudget(
    await read<BudgetedRow<RecordRow & { total: string | null; more: boolean }>>(sql, params),
  );
  if (!rows) return "over_budget";
  let counted: bigint | null;
  if (rows.length > 0 || page.offset === 0) {
    const first = rows[0];
    counted = page.count === "none" ? null : BigInt(first?.total ?? 0);
    if (first === undefined)
      return { records: [], hasMore: false, total: counted, estimated: false };
  } else if (page.count === "none") {
    return { records: [], hasMore: false, total: null, estimated: false };
  } else {
    // A page past the end has no row to carry the count: count on its own.
    const [row] = await read<{ total: string | null }>(
      `select (${totalSql(page, countSql(page), page.matching)}) as total`,
      page.params,
    );
    counted = row?.total == null ? null : BigInt(row.total);
    return { records: [], hasMore: false, ...(await completeCount(read, page, counted)) };
  }
  const count = await completeCount(read, page, counted);
  const seen = BigInt(page.offset + rows.length);
  // An exact count (and an estimated one that counted every match) says whether more follow;
  // otherwise the statement looked for a match past the page.
  const hasMore = count.total === null || count.estimated ? rows[0]!.more : count.total > seen;
  return { records: rows.map(toStored), hasMore, ...count };
}

function tableLockKey(tableId: bigint): string {
  return `records.table:${tableId}`;
}

function organizationLockKey(organizationId: bigint): string {
  return `records.organization:${organizationId}`;
}

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
  await query(
    em,
    `select pg_advisory_xact_lock_shared(hashtextextended($1, 0)),
            pg_advisory_xact_lock_shared(hashtextextended($2, 0))`,
    [organizationLockKey(organizationId), tableLockKey(tableId)],
    { prepare: true },
  );
}

export async function lockTableExclusive(em: EntityManager, tableId: bigint): Promise<void> {
  await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [tableLockKey(tableId)]);
}

async function lockOrganizationExclusive(em: EntityManager, organizationId: bigint): Promise<void> {
  await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
    organizationLockKey(organizationId),
  ]);
}

/**
 * Takes `count` new row ids, ascending (column `id`). The sequence is looked up once, in a
 * sub-select: `pg_get_serial_sequence` in the select list ran for every id and made a batch's
 * 1000 ids cost five times as much (`test/bench/ROUNDS.md`, twenty-fourth round).
 */
export function allocateRowIdsStatement(count: number): Statement {
  return {
    sql: `select nextval((select pg_get_serial_sequence('record', 'row_id')::regclass)) as id
     from generate_series(1, $1::int) order by 1`,
    params: [count],
    prepare: true,
  };
}

/** `count` new row ids, ascending, for records a create is about to insert. */
export async function allocateRowIds(em: EntityManager, count: number): Promise<bigint[]> {
  const { sql, params, prepare } = allocateRowIdsStatement(count);
  const rows = await query<{ id: string }>(em, sql, params, { prepare });
  return rows.map((row) => BigInt(row.id));
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
}

/**
 * `createRecords`' statement. `create_checks` first (sql/create_checks.sql: the locks, the
 * deletion marks, autonumber fields the create does not know, deleted fields and pending type
 * changes of the fields it writes, write_gate.sql), as a materialized CTE; the insert and the
 * events only when it answers `ok`; then, in the select list and so after every CTE of its
 * FROM is complete, `reserve_records` counts the records against the limit, taking the
 * organization's usage row, which stays locked to the commit: the organization's other creates
 * wait for the commit, not for this insert. Over the limit, it raises RB001 and the statement
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
    rows.map((row) => row.rowId),
    dataArrayJson(rows.map((row) => row.data)),
  ];
  const enqueue = outboxInsert(events, params.length + 1, "(select outcome from gate) = 'ok'");
  const queued = events.length > 0;
  return {
    sql: `with gate as materialized (
       select ${CREATE_CHECKS_CALL} as outcome
     ),
     inserted as (
       insert into record (row_id, table_id, organization_id, data, created_by, updated_by)
       select id.row_id, $1, $2, item.data, $8, $8
       from unnest($9::bigint[]) with ordinality as id(row_id, n)
         join jsonb_array_elements($10::jsonb) with ordinality as item(data, n) using (n)
       where (select outcome from gate) = 'ok'
       returning created_at, updated_at
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
 * counts the records against `limit` (the usage row stays locked until the commit, so it comes
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
  await queryWithOutbox(
    em,
    events,
    `update organization_usage set records = greatest(records - $2, 0)
     where organization_id = $1`,
    [organizationId, count],
  );
}

/** The records an organization holds, as counted. */
export async function recordUsage(em: EntityManager, organizationId: bigint): Promise<bigint> {
  const rows = await query<{ records: string }>(
    em,
    "select records from organization_usage where organization_id = $1",
    [organizationId],
  );
  return BigInt(rows[0]?.records ?? 0);
}

/**
 * The next `count` numbers of an autonumber field, the first of them returned. The counter row
 * stays locked until the transaction ends, so numbers are unique and follow creation order.
 * Undefined when the field is deleted (the caller's schema is older than the deletion).
 */
export async function takeAutonumbers(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  count: number,
): Promise<number | undefined> {
  const rows = await query<{ last_value: string }>(
    em,
    `insert into autonumber_counter (table_id, field_id, last_value) values ($1, $2, $3)
     on conflict (table_id, field_id)
       do update set last_value = autonumber_counter.last_value + excluded.last_value
       where not autonumber_counter.deleted
     returning last_value`,
    [tableId, fieldId, count],
    { prepare: true },
  );
  const [row] = rows;
  return row && Number(row.last_value) - count + 1;
}

/** The numbers an autonumber field's existing records get (`reserveAutonumbers`). */
export interface AutonumberReservation {
  /** The records are numbered after it, from `after + 1` on. */
  after: number;
  /** How many numbers are reserved: the records without a value when it was made. */
  count: number;
  /** The last record created then: later ones number themselves from the counter. */
  lastRowId: string;
}

/**
 * Starts an autonumber field's counter (kept as it is when it exists) and reserves a number for
 * each record of the table without a value for the field, under the table's exclusive lock:
 * creates hold the lock shared until they commit, so every one that got in before is counted,
 * and every one after finds the counter (`create_gate`'s `stale`) and numbers itself past the
 * reservation. `numberReserved` then gives the numbers out. Safe to repeat: a repeat reserves
 * for the records still without a number (the numbers of a reservation cut short stay unused).
 */
export async function reserveAutonumbers(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
): Promise<AutonumberReservation> {
  await lockTableExclusive(em, tableId);
  const [unnumbered] = await query<{ count: string; last_row_id: string | null }>(
    em,
    `select count(*) as count, max(row_id)::text as last_row_id
     from record where table_id = $1 and not (data ? $2::text)`,
    [tableId, fieldId],
  );
  const count = Number(unnumbered!.count);
  const [counter] = await query<{ last_value: string }>(
    em,
    `insert into autonumber_counter (table_id, field_id, last_value) values ($1, $2, $3)
     on conflict (table_id, field_id) do update set last_value = autonumber_counter.last_value + $3
     returning last_value`,
    [tableId, fieldId, count],
  );
  return {
    after: Number(counter!.last_value) - count,
    count,
    lastRowId: unnumbered!.last_row_id ?? "0",
  };
}

/**
 * Records a catalog change that rewrites a table's records (`numberReserved`,
 * `sweepDeletedField`, `renameChoicesInChunks`, `deleteRecordsInChunks`) changes per statement,
 * at most: each statement holds only its records.
 */
export const RECORD_CHUNK = 1000;

/** What a chunk statement of `inChunks` answers, from its `chunk` and `changed` CTEs. */
const CHUNK_RESULT = `select (select max(row_id) from chunk)::text as last,
  (select count(*) from changed)::int as changed`;

/**
 * Runs a chunk statement over a table's records in row_id order until it finds none, or until
 * `more` (given what the last chunk changed and what all did) says it is done; each statement
 * commits on its own. `params` gets the last row id of the chunk before (`"0"` first) and what
 * the chunks changed so far. Returns how many records they changed.
 */
async function inChunks(
  em: EntityManager,
  sql: string,
  params: (after: string, changed: number) => unknown[],
  more: (inChunk: number, changed: number) => boolean,
): Promise<number> {
  let after = "0";
  let changed = 0;
  for (;;) {
    const [row] = await query<{ last: string | null; changed: number }>(
      em,
      sql,
      params(after, changed),
      { prepare: true },
    );
    if (!row?.last) return changed;
    changed += row.changed;
    after = row.last;
    if (!more(row.changed, changed)) return changed;
  }
}

/**
 * Gives a reservation's numbers to the records it was made for, in creation order, `chunk`
 * records per statement, each committed on its own (call it outside a transaction) and
 * without the table's lock: as one statement under the lock, a large table's writes waited for
 * all of it. A record deleted meanwhile takes no number, so the numbers given stay within the
 * reservation; a patch of a record not numbered yet is numbered after it (its chunk checks the
 * record again once the patch commits). Chunks lock their records in row_id order, as writes
 * do. Returns how many records it numbered.
 */
export async function numberReserved(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  reservation: AutonumberReservation,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (reservation.count === 0) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id, row_number() over (order by row_id) as n from (
         select row_id from record
         where table_id = $1 and row_id > $3 and row_id <= $4 and not (data ? $2::text)
         order by row_id limit $6 for update
       ) locked
     ), changed as (
       update record r set data = r.data || jsonb_build_object($2::text, $5::bigint + chunk.n)
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after, numbered) => [
      tableId,
      fieldId,
      after,
      reservation.lastRowId,
      reservation.after + numbered,
      chunk,
    ],
    (_, numbered) => numbered < reservation.count,
  );
}

/** A choice's rename: its old name and its new one. */
export type ChoiceRename = readonly [oldName: string, newName: string];

/**
 * Whether applying `renames` again changes nothing: no new name is also an old one (a swap or a
 * chain renames a value it renamed before). Only then may the records be renamed a chunk at a
 * time, and the records a write may have touched meanwhile renamed once more.
 */
export function renamesRepeatable(renames: readonly ChoiceRename[]): boolean {
  const olds = new Set(renames.map(([old]) => old));
  return renames.every(([, renamed]) => !olds.has(renamed));
}

/**
 * Records (`r`) of table $1 whose field $2 holds an old name of $3: a single select's string,
 * or a multi select's array holding one.
 */
const HOLDS_OLD_CHOICE = `(jsonb_typeof(r.data -> $2::text) = 'string' and r.data ->> $2::text = any($3::text[])
  or jsonb_typeof(r.data -> $2::text) = 'array' and (r.data -> $2::text) ?| $3::text[])`;

/** A matching record's field $2 with the old names $3 renamed to $4, all at once (swaps too). */
const RENAMED_DATA = `jsonb_set(r.data, array[$2::text], case jsonb_typeof(r.data -> $2::text)
  when 'string' then (
    select to_jsonb(m.new_name) from unnest($3::text[], $4::text[]) as m(old_name, new_name)
    where m.old_name = r.data ->> $2::text limit 1)
  else (
    select coalesce(jsonb_agg(to_jsonb(coalesce(m.new_name, item.name)) order by item.n), '[]'::jsonb)
    from jsonb_array_elements_text(r.data -> $2::text) with ordinality as item(name, n)
    left join unnest($3::text[], $4::text[]) as m(old_name, new_name) on m.old_name = item.name)
  end)`;

function renameParams(tableId: bigint, fieldId: string, renames: readonly ChoiceRename[]) {
  return [tableId, fieldId, renames.map(([old]) => old), renames.map(([, renamed]) => renamed)];
}

/** The table's last record now (`"0"` when it has none): where `renameChoicesInChunks` stops. */
export async function lastRowId(em: EntityManager, tableId: bigint): Promise<string> {
  const [row] = await query<{ last: string | null }>(
    em,
    "select max(row_id)::text as last from record where table_id = $1",
    [tableId],
  );
  return row?.last ?? "0";
}

/**
 * Renames stored select values of the table's records up to `upTo` (`lastRowId` before), a
 * chunk of the records holding an old name per statement, each committed on its own (call it
 * outside a transaction) and without the table's lock: as one statement under the lock, a large
 * table's writes waited for every record holding a renamed choice. For `renamesRepeatable`
 * renames only: a write that stores an old name in a record a chunk has passed is renamed by
 * `renameChoicesOf` afterwards (its pending check noted the record), and a record renamed twice
 * stays renamed. A patch under way is renamed after it (its chunk checks the record again once
 * the patch commits). Chunks lock their records in row_id order, as writes do. Returns how many
 * records they renamed.
 */
export async function renameChoicesInChunks(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  renames: readonly ChoiceRename[],
  upTo: string,
  chunk = RECORD_CHUNK,
): Promise<number> {
  if (renames.length === 0) return 0;
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record r
       where table_id = $1 and row_id > $5 and row_id <= $6 and ${HOLDS_OLD_CHOICE}
       order by row_id limit $7 for update
     ), changed as (
       update record r set data = ${RENAMED_DATA}
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after) => [...renameParams(tableId, fieldId, renames), after, upTo, chunk],
    (renamed) => renamed === chunk,
  );
}

/**
 * Renames stored select values in one statement, in the caller's transaction (which holds the
 * table's exclusive lock): of the records after `after` (every record for `"0"`) and of the
 * records writes noted while the change was pending, but for those last written with the new
 * choices, which a swap would rename again: noted so, or written once the change was no longer
 * pending (`cleared`). Returns how many it renamed.
 */
export async function renameChoicesOf(
  em: EntityManager,
  tableId: bigint,
  fieldId: string,
  renames: readonly ChoiceRename[],
  after: string,
  cleared: ClearedChange = { writes: [], pendingUntil: undefined },
): Promise<number> {
  if (renames.length === 0) return 0;
  const { writes, pendingUntil } = cleared;
  const [row] = await query<{ renamed: number }>(
    em,
    `with changed as (
       update record r set data = ${RENAMED_DATA}
       where r.table_id = $1 and (r.row_id > $5 or r.row_id = any($6::bigint[]))
         and r.row_id <> all($7::bigint[]) and ${HOLDS_OLD_CHOICE}
         and ($8::bigint is null or r.updated_at < 'epoch'::timestamptz + $8::bigint * interval '1 microsecond')
       returning 1
     )
     select count(*)::int as renamed from changed`,
    [
      ...renameParams(tableId, fieldId, renames),
      after,
      writes.filter((write) => !write.asChanged).map((write) => write.rowId),
      writes.filter((write) => write.asChanged).map((write) => write.rowId),
      pendingUntil ?? null,
    ],
  );
  return row!.renamed;
}

/**
 * Inserts records in the given order; the result is in the same order (identities are assigned
 * in the order of the ordered select).
 */
export async function insertRecords(
  em: EntityManager,
  target: { tableId: bigint; organizationId: bigint; actor: string },
  datas: readonly JsonObject[],
): Promise<StoredRecord[]> {
  // One JSON text for the whole batch rather than a jsonb[] (which the driver would write as an
  // array literal, escaping every quote of every record), and the data not read back: it is
  // what was sent. Identity values are taken in the order the rows are inserted, `n`'s order,
  // so the returned rows in row_id order are `datas` in order.
  const rows = await query<Omit<RecordRow, "data">>(
    em,
    `insert into record (table_id, organization_id, data, created_by, updated_by)
     select $1, $2, item.data, $3, $3
     from jsonb_array_elements($4::jsonb) with ordinality as item(data, n)
     order by item.n
     returning ${columnsButData()}`,
    [target.tableId, target.organizationId, target.actor, dataArrayJson(datas)],
    { prepare: true },
  );
  const stored = rows.map((row) => toStored({ ...row, data: {} })).sort(byRowId);
  return stored.map((record, index) => ({ ...record, data: datas[index] as JsonObject }));
}

/** A record of a table (one record is within the read budget: it is not measured). */
export async function findRecord(
  em: EntityManager,
  tableId: bigint,
  rowId: bigint,
): Promise<StoredRecord | undefined> {
  const { sql, params, prepare } = findRecordsStatement(tableId, [rowId], false);
  return (await recordsOf(em, sql, params, { prepare }))[0];
}

/**
 * The records of a table among `rowIds`, locked for update when asked, in row_id order (so that
 * two writers lock in one order and cannot deadlock); `over_budget` when a batch's records hold
 * more than PAGE_MAX_BYTES of values.
 */
export async function findRecords(
  em: EntityManager,
  tableId: bigint,
  rowIds: readonly bigint[],
  options: { lock: boolean },
): Promise<StoredRecord[] | "over_budget"> {
  const { sql, params, prepare } = findRecordsStatement(tableId, rowIds, options.lock);
  const rows = withinBudget(await query<BudgetedRow<RecordRow>>(em, sql, params, { prepare }));
  return rows ? rows.map(toStored) : "over_budget";
}

/**
 * The records an update writes, locked, after `write_gate` (sql/write_gate.sql) took the
 * table's shared lock for the transaction and judged the fields the update writes: its answer
 * comes with the records, in the same statement. With no record found it is not known, and
 * `ok` is answered (the update writes nothing).
 */
export async function lockRecordsForWrite(
  em: EntityManager,
  tableId: bigint,
  rowIds: readonly bigint[],
  gate: WriteGate,
): Promise<{ records: StoredRecord[]; outcome: WriteGateOutcome } | "over_budget"> {
  const { sql, params, prepare } = findRecordsStatement(tableId, rowIds, true, gate);
  const rows = withinBudget(
    await query<BudgetedRow<RecordRow & { gate: WriteGateOutcome }>>(em, sql, params, {
      prepare,
    }),
  );
  if (!rows) return "over_budget";
  return { records: rows.map(toStored), outcome: rows[0]?.gate ?? "ok" };
}

/**
 * How many records a read by id may name before PAGE_MAX_BYTES can be passed (every record is
 * within RECORD_MAX_BYTES): a batch's larger reads are measured (`withinReadBudget`).
 */
const UNMEASURED_READ = Math.floor(PAGE_MAX_BYTES / RECORD_MAX_BYTES);

/**
 * `findRecords`' statement; with a `gate`, `lockRecordsForWrite`'s: `write_gate` as a
 * materialized CTE whose answer is a one-time filter (never false: it is never null), so that it
 * runs, and takes the table's lock, before the first record is read and locked. Naming more
 * than UNMEASURED_READ records (a batch), it is sent only within PAGE_MAX_BYTES.
 */
export function findRecordsStatement(
  tableId: bigint,
  rowIds: readonly bigint[],
  lock: boolean,
  gate?: WriteGate,
): Statement {
  const measured = (sql: string) => (rowIds.length > UNMEASURED_READ ? withinReadBudget(sql) : sql);
  if (!gate) {
    return {
      sql: measured(`select ${RECORD_COLUMNS} from record
     where table_id = $1 and row_id = any($2::bigint[])
     order by row_id ${lock ? "for update" : ""}`),
      params: [tableId, rowIds],
      prepare: true,
    };
  }
  return {
    sql: measured(`with gate as materialized (
       select write_gate($1::bigint, $3::bigint[], $4::bigint[]) as outcome
     )
     select ${RECORD_COLUMNS}, (select outcome from gate) as gate from record
     where table_id = $1 and row_id = any($2::bigint[]) and (select outcome from gate) is not null
     order by row_id ${lock ? "for update of record" : ""}`),
    params: [tableId, rowIds, gate.fields, gate.pendingChecked],
    prepare: true,
  };
}

/** A pending type change of a table's field (`pending_type_change`), as a write checks it. */
export interface PendingTypeChange {
  id: string;
  fieldId: string;
  toType: string;
  toOptions: JsonObject;
  /** The field is being made required (migrations/required-marks.ts), not converted. */
  required: boolean;
}

/**
 * The live pending type changes of a table's fields (`write_gate` answered `pending`), but for
 * required marks a change making the field optional lifted.
 */
export async function pendingTypeChanges(
  em: EntityManager,
  tableId: bigint,
): Promise<PendingTypeChange[]> {
  const rows = await query<{
    id: string;
    field_id: string;
    to_type: string;
    to_options: JsonObject;
    required: boolean;
  }>(
    em,
    `select id, field_id, to_type, to_options, required from pending_type_change
     where table_id = $1 and expires_at > now() and lifted_by is null order by id`,
    [tableId],
  );
  return rows.map((row) => ({
    id: row.id,
    fieldId: row.field_id,
    toType: row.to_type,
    toOptions: row.to_options,
    required: row.required,
  }));
}

/** A field and the type and options it is changed to. */
export interface PendingTarget {
  tableId: bigint;
  fieldId: bigint;
  toType: string;
  toOptions: Readonly<JsonObject> | undefined;
}

/** What a mark holds writes to: the change's type and options, or the field being required. */
export type MarkKind = "converts" | "required";

/**
 * Marks a type change of a field as pending for `seconds` (CheckFieldTypeChange, before it reads
 * the values), under the table's exclusive lock: every write that took the table's shared lock
 * before has committed when this commits, and every later one finds the mark (`write_gate`).
 * The mark carries the `changeId` catalog gave the check (migrations/change-ids.ts). The table's
 * long-expired marks go with it (`dropTypeChangeMarks`). Returns the mark's id.
 */
export async function markTypeChangePending(
  em: EntityManager,
  change: PendingTarget,
  seconds: number,
  kind: MarkKind = "converts",
  changeId = "",
): Promise<string> {
  await dropTypeChangeMarks(em, change.tableId, []);
  const [row] = await query<{ id: string }>(
    em,
    `insert into pending_type_change
       (table_id, field_id, to_type, to_options, expires_at, required, change_id)
     values ($1, $2, $3, $4::jsonb, now() + make_interval(secs => $5), $6, nullif($7, ''))
     returning id`,
    [
      change.tableId,
      change.fieldId,
      change.toType,
      JSON.stringify(change.toOptions ?? {}),
      seconds,
      kind === "required",
      changeId,
    ],
  );
  return row!.id;
}

/**
 * How long an expired mark is kept (as a PostgreSQL interval): it holds no write any more, but
 * its change's event, however late (the CATALOG stream keeps events 7 days), still finds when it
 * stopped being pending (`ClearedChange.pendingUntil`), so that a late rename leaves alone the
 * records written since, whatever other checks of the table came in between.
 */
const EXPIRED_MARK_KEPT = "7 days";

/**
 * Removes the table's marks of a change that will not be applied (the check refused it or
 * failed, or catalog did not commit it): those `ids` and those of `changeId`, and the table's
 * marks expired more than EXPIRED_MARK_KEPT ago, in the caller's transaction; the required marks `changeId` lifted hold writes
 * again. Under the table's exclusive lock, as every deletion of a mark: a write noting its
 * records under a mark holds the shared one, so no note names a mark that is gone, and a mark's
 * notes go with it (migrations/pending-writes.ts). Ids already gone, or of another table, are
 * left alone.
 */
export async function dropTypeChangeMarks(
  em: EntityManager,
  tableId: bigint,
  ids: readonly string[],
  changeId = "",
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    `delete from pending_type_change
     where table_id = $1
       and (id = any($2::bigint[]) or change_id = nullif($3, '')
         or expires_at <= now() - interval '${EXPIRED_MARK_KEPT}')`,
    [tableId, ids, changeId],
  );
  if (changeId) {
    await query(
      em,
      "update pending_type_change set lifted_by = null where table_id = $1 and lifted_by = $2",
      [tableId, changeId],
    );
  }
}

/**
 * Lets writes leave a field made optional again empty, at once (its check, under the table's
 * exclusive lock, in the caller's transaction): its required marks are lifted by `changeId`,
 * whose release makes them hold writes again (migrations/change-ids.ts); without a change id
 * (catalogs older than it), they are removed.
 */
export async function liftRequiredMarks(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
  changeId: string,
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    changeId
      ? "update pending_type_change set lifted_by = $3 where table_id = $1 and field_id = $2 and required"
      : "delete from pending_type_change where table_id = $1 and field_id = $2 and required",
    changeId ? [tableId, fieldId, changeId] : [tableId, fieldId],
  );
}

/** A record a write noted under a pending change, and whether it held the field as changed. */
export interface NotedWrite {
  rowId: string;
  /** The last write that noted it held the field as the change makes it (its schema the new). */
  asChanged: boolean;
}

/**
 * Removes the pending marks of a field's change to `to`, applied, in a transaction that holds the
 * table's exclusive lock: those of its `changeId`, which its event carries; returns the records
 * that writes noted under them (`notePendingWrites`), which the conversion may have passed
 * before they were written.
 */
export async function clearTypeChangePending(
  em: EntityManager,
  change: PendingTarget,
  changeId: string,
): Promise<ClearedChange> {
  // An event of a catalog older than change ids, whose check left marks without one: the marks
  // of this change only, its check's (made more than once when a check was tried again), not
  // those of the same change made again later (decimals 2 -> 0, back to 2, to 0 again), whose
  // own check must hold writes until its own event is applied. Changes of a field are checked
  // and applied in order, so the marks equal to this change that come before the first later
  // mark of another change are this change's; the rest are a later one's.
  const equalBeforeOther = `
    with equal as (
      select id from pending_type_change
      where table_id = $1 and field_id = $2 and not required and change_id is null
        and to_type = $3 and to_options = $4::jsonb
    ), later_other as (
      select min(id) as id from pending_type_change
      where table_id = $1 and field_id = $2 and not required and change_id is null
        and not (to_type = $3 and to_options = $4::jsonb)
        and id > (select min(id) from equal)
    )
    select id from equal
    where id < coalesce((select id from later_other), 9223372036854775807)`;
  // The statement reads the notes as they were before it, their marks' deletion takes them.
  const [row] = await query<{ until_us: string | null; writes: { r: string; c: boolean }[] }>(
    em,
    `with mine as (${
      changeId
        ? `select id from pending_type_change
           where table_id = $1 and field_id = $2 and not required and change_id = $3`
        : equalBeforeOther
    }), gone as (
       delete from pending_type_change where id in (select id from mine) returning id, expires_at
     ), noted as (
       select w.row_id, bool_and(w.as_changed) as as_changed
       from pending_type_change_write w join gone on gone.id = w.mark_id
       group by w.row_id
     )
     select (select (extract(epoch from max(expires_at)) * 1000000)::bigint::text from gone)
         as until_us,
       coalesce((select json_agg(json_build_object('r', row_id::text, 'c', as_changed)
         order by row_id) from noted), '[]') as writes`,
    changeId
      ? [change.tableId, change.fieldId, changeId]
      : [change.tableId, change.fieldId, change.toType, JSON.stringify(change.toOptions ?? {})],
  );
  return {
    writes: row!.writes.map((write) => ({ rowId: write.r, asChanged: write.c })),
    pendingUntil: row!.until_us ?? undefined,
  };
}

/** What `clearTypeChangePending` found of a change it cleared. */
export interface ClearedChange {
  /** The records writes noted while the change was pending. */
  writes: NotedWrite[];
  /**
   * When its marks stopped holding writes (epoch microseconds), undefined when it had none
   * left: a write after that was not noted, and held the field as changed (PENDING_SECONDS).
   */
  pendingUntil: string | undefined;
}

/** A pending mark a write's values were checked against, as the write notes its records. */
export interface CheckedMark {
  id: string;
  /** The write held the field as the change makes it (its schema already the new one). */
  asChanged: boolean;
}

/**
 * Notes the records `rowIds` a write changed after checking its values against the pending
 * marks `marks` (those of the fields it sets), in the write's transaction and under the table's
 * shared lock (migrations/pending-writes.ts); a later write of a record notes it again, over
 * the earlier note (migrations/pending-writes-as-changed.ts). Marks gone since the write read
 * them are skipped: the write's gate found none of its fields' live marks unchecked.
 */
export async function notePendingWrites(
  em: EntityManager,
  tableId: bigint,
  marks: readonly CheckedMark[],
  rowIds: readonly bigint[],
): Promise<void> {
  if (marks.length === 0 || rowIds.length === 0) return;
  await query(
    em,
    `insert into pending_type_change_write (mark_id, row_id, as_changed)
     select distinct m.id, r.row_id, c.as_changed
     from unnest($2::bigint[], $3::boolean[]) as c(id, as_changed)
     join pending_type_change m on m.id = c.id and m.table_id = $1
     cross join unnest($4::bigint[]) as r(row_id)
     on conflict (mark_id, row_id) do update set as_changed = excluded.as_changed`,
    [tableId, marks.map((mark) => mark.id), marks.map((mark) => mark.asChanged), rowIds],
  );
}

/**
 * Marks a deleted field deleted, under the table's exclusive lock: a write that took the table's
 * shared lock before has committed, and every later one finds the mark (`write_gate` answers
 * `stale`; a write whose schema still has the field reads it again), so from the commit on no
 * write gives the field a value. Its stored values are then dropped by `sweepDeletedField`.
 */
export async function markFieldDeleted(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
): Promise<void> {
  await lockTableExclusive(em, tableId);
  await query(
    em,
    "insert into deleted_field (table_id, field_id) values ($1, $2) on conflict do nothing",
    [tableId, fieldId],
  );
}

/**
 * Drops a deleted field's values from the table's records, `chunk` records per statement, each
 * committed on its own (call it outside a transaction) and without the table's lock: as one
 * statement under the lock, a million records held every write to the table for seconds. Only
 * after `markFieldDeleted` committed: no write adds a value then, and one that carries the old
 * data of a record not swept yet along (a patch) is swept after it, either by a later chunk or,
 * when its record's chunk waits for it, by the chunk itself, which checks the record again once
 * the patch commits. A chunk locks its records in row_id order, as writes do, so they never
 * deadlock; the records without a value are only read, once. Returns how many held one.
 */
export async function sweepDeletedField(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
  chunk = RECORD_CHUNK,
): Promise<number> {
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record where table_id = $1 and row_id > $3 and data ? $2::text
       order by row_id limit $4 for update
     ), changed as (
       update record r set data = r.data - $2::text
       from chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning 1
     )
     ${CHUNK_RESULT}`,
    (after) => [tableId, fieldId.toString(), after, chunk],
    (swept) => swept === chunk,
  );
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
): Promise<StoredRecord[]> {
  const statement = writeRecordsStatement(actor, changes);
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

/** A record as read for an update without a lock, with its row version (PostgreSQL's `xmin`). */
export interface VersionedRecord {
  record: StoredRecord;
  version: string;
}

/** `readRecordVersion`'s statement. */
export function recordVersionStatement(tableId: bigint, rowId: bigint): Statement {
  return {
    sql: `select ${RECORD_COLUMNS}, xmin::text as version from record
     where table_id = $1 and row_id = $2`,
    params: [tableId, rowId],
    prepare: true,
  };
}

/** A record of the table with its row version, without locking it; undefined when none. */
export async function readRecordVersion(
  em: EntityManager,
  tableId: bigint,
  rowId: bigint,
): Promise<VersionedRecord | undefined> {
  const { sql, params, prepare } = recordVersionStatement(tableId, rowId);
  const [row] = await query<RecordRow & { version: string }>(em, sql, params, { prepare });
  return row && { record: toStored(row), version: row.version };
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
  const params = [
    write.tableId,
    write.rowId,
    write.fields,
    [],
    dataArrayJson([write.data]),
    write.actor,
    write.version,
  ];
  const enqueue = outboxInsert(events, params.length + 1, "exists (select from written)");
  return {
    sql: `with gate as materialized (
       select write_gate($1::bigint, $3::bigint[], $4::bigint[]) as outcome
     ),
     written as (
       update record r set data = ($5::jsonb)->0, updated_at = now(), updated_by = $6
       where r.table_id = $1 and r.row_id = $2 and r.xmin = $7::xid
         and (select outcome from gate) = 'ok'
       returning ${columnsButData("r")}
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
}

/**
 * `deleteRecordIfUnchanged`'s statement: the record deleted only if it is still the version
 * read, then, only when it was, the organization's count given back (last, as a create takes
 * it) and `events` written. Its one row: how many records it deleted (0 or 1).
 */
export function deleteRecordIfUnchangedStatement(
  target: UnchangedDelete,
  events: readonly OutboxEntry[],
): Statement {
  const params = [target.tableId, target.rowId, target.version, target.organizationId];
  const enqueue = outboxInsert(events, params.length + 1, "exists (select from deleted)");
  return {
    sql: `with deleted as (
       delete from record where table_id = $1 and row_id = $2 and xmin = $3::xid
       returning row_id
     ),
     released as (
       update organization_usage set records = greatest(records - 1, 0)
       where organization_id = $4 and exists (select from deleted)
     ),
     enqueued as (${enqueue.sql})
     select count(*)::int as deleted from deleted`,
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

/** `writeRecords`' statement, before its events are put in front of it. */
export function writeRecordsStatement(
  actor: string,
  changes: readonly { rowId: bigint; data: JsonObject }[],
): Statement {
  // As insertRecords: the data as one JSON array (paired with the row ids by position), not
  // read back. Row ids are distinct (the caller refuses a record named twice).
  return {
    sql: `update record r set data = item.data, updated_at = now(), updated_by = $1
     from unnest($2::bigint[]) with ordinality as id(row_id, n)
       join jsonb_array_elements($3::jsonb) with ordinality as item(data, n) using (n)
     where r.row_id = id.row_id
     returning ${columnsButData("r")}`,
    params: [actor, changes.map((c) => c.rowId), dataArrayJson(changes.map((c) => c.data))],
    prepare: true,
  };
}

/** Deletes records of a table (already locked, so the caller has read what it deletes). */
export async function deleteRecords(
  em: EntityManager,
  tableId: bigint,
  rowIds: readonly bigint[],
): Promise<void> {
  await query(em, "delete from record where table_id = $1 and row_id = any($2::bigint[])", [
    tableId,
    rowIds,
  ]);
}

/**
 * Marks the tables deleted, under each table's exclusive lock (in id order): a create that got in
 * before has committed, and every later one finds the mark (`create_gate`'s `gone`).
 */
export async function markTablesDeleted(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<void> {
  const sorted = [...tableIds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const tableId of sorted) await lockTableExclusive(em, tableId);
  await query(
    em,
    "insert into deleted_table (table_id) select unnest($1::bigint[]) on conflict do nothing",
    [sorted],
  );
}

/**
 * Marks the organization deleted, under its exclusive lock: a create that got in before has
 * committed, and every later one finds the mark (`create_gate`'s `gone`).
 */
export async function markOrganizationGone(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  await lockOrganizationExclusive(em, organizationId);
  await query(
    em,
    "insert into deleted_organization (organization_id) values ($1) on conflict do nothing",
    [organizationId],
  );
}

/** The tables the organization has records in. */
export async function tablesWithRecords(
  em: EntityManager,
  organizationId: bigint,
): Promise<bigint[]> {
  const rows = await query<{ table_id: string }>(
    em,
    "select distinct table_id from record where organization_id = $1 order by table_id",
    [organizationId],
  );
  return rows.map((row) => BigInt(row.table_id));
}

/**
 * Deletes a table's records, `chunk` per statement, each committed on its own (call it outside a
 * transaction, once the table or its organization is marked deleted: no create adds a record
 * then), and gives their count back to the organization's usage. As one statement, a table of a
 * million records kept a transaction open for seconds, and the consumer's later events waited
 * for it. What is left (nothing, unless a chunk failed) goes with the deletion's transaction.
 * Returns how many it deleted.
 */
export async function deleteRecordsInChunks(
  em: EntityManager,
  tableId: bigint,
  chunk = RECORD_CHUNK,
): Promise<number> {
  return inChunks(
    em,
    `with chunk as materialized (
       select row_id from record where table_id = $1 and row_id > $2
       order by row_id limit $3 for update
     ), changed as (
       delete from record r using chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning r.organization_id
     ), released as (
       update organization_usage u set records = greatest(u.records - counted.n, 0)
       from (select organization_id, count(*) as n from changed group by organization_id) counted
       where u.organization_id = counted.organization_id
     )
     ${CHUNK_RESULT}`,
    (after) => [tableId, after, chunk],
    (deleted) => deleted === chunk,
  );
}

/**
 * Deletes every record of the tables and gives their count back to each organization's usage;
 * their rows of `record_count` go too. Returns how many it deleted.
 */
export async function deleteTablesRecords(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<number> {
  if (tableIds.length === 0) return 0;
  const rows = await query<{ deleted: string }>(
    em,
    `with gone as (
       delete from record where table_id = any($1::bigint[]) returning organization_id
     ), counted as (
       select organization_id, count(*) as n from gone group by organization_id
     ), released as (
       update organization_usage u set records = greatest(u.records - counted.n, 0)
       from counted where u.organization_id = counted.organization_id
     )
     select coalesce(sum(n), 0) as deleted from counted`,
    [tableIds],
  );
  // Their counts (record_count), but for a row a writer holds: it counts nothing that can be
  // listed, and waiting on it could close a cycle with that writer.
  await query(
    em,
    `delete from record_count where id in (
       select id from record_count where table_id = any($1::bigint[]) for update skip locked
     )`,
    [tableIds],
  );
  await query(em, "delete from autonumber_counter where table_id = any($1::bigint[])", [tableIds]);
  await query(em, "delete from deleted_field where table_id = any($1::bigint[])", [tableIds]);
  await query(em, "delete from pending_type_change where table_id = any($1::bigint[])", [tableIds]);
  return Number(rows[0]?.deleted ?? 0);
}

/**
 * Deletes every record of an organization and its usage row, and the autonumber counters of the
 * tables that hold records and of `tableIds` (those whose records went before, in chunks);
 * those of empty tables go with catalog's DatabaseDeleted (`deleteTablesRecords`), which names
 * every table. Returns how many records it deleted.
 */
export async function deleteOrganizationRecords(
  em: EntityManager,
  organizationId: bigint,
  tableIds: readonly bigint[] = [],
): Promise<number> {
  await query(
    em,
    `delete from autonumber_counter where table_id = any($2::bigint[]) or table_id in (
       select distinct table_id from record where organization_id = $1
     )`,
    [organizationId, tableIds],
  );
  const rows = await query<{ deleted: string }>(
    em,
    `with gone as (delete from record where organization_id = $1 returning 1)
     select count(*) as deleted from gone`,
    [organizationId],
  );
  await query(em, "delete from organization_usage where organization_id = $1", [organizationId]);
  return Number(rows[0]?.deleted ?? 0);
}

/** Whether a consumer has not applied an event yet (without marking it). */
export async function notProcessed(
  em: EntityManager,
  consumer: string,
  eventId: string,
): Promise<boolean> {
  const rows = await query(
    em,
    "select 1 from processed_event where consumer = $1 and event_id = $2",
    [consumer, eventId],
  );
  return rows.length === 0;
}
