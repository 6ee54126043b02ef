// Reads of records: a list's page with its count, records by id (locked for an update when asked,
// behind `write_gate`), and a record with its row version; every read of several records is
// answered within PAGE_MAX_BYTES.

import type { EntityManager } from "@mikro-orm/postgresql";
import {
  hasSqlState,
  PAGE_MAX_BYTES,
  query,
  RECORD_MAX_BYTES,
  type ReadStatement,
} from "@rowbase/kit";
import type { StoredRecord } from "../domain/record-output.js";
import { type OrderTerm, orderBySql } from "../query/index.js";
import type { WriteGate, WriteGateOutcome } from "./create-gate.js";
import {
  RECORD_ROWS,
  type RecordRow,
  rowIdsParam,
  type Statement,
  type TableRows,
  toStored,
} from "./rows.js";
import type { IndexKey } from "./user-tables/indexes.js";
import { userTable } from "./user-tables/names.js";

/**
 * `select` (rows holding `data`, in order) as a statement that PostgreSQL answers only within
 * PAGE_MAX_BYTES of values, measured as the storage holds them (`TableRows.sizeOf`: the
 * jsonb storage's `data` as text, a user table's columns): every row in order with
 * `fits` true, or one row of nulls with `fits` false. An empty `select` answers one row of
 * nulls with `fits` true (the budget's row, which every answer carries). The rows are numbered
 * as `select` gives them, so that the join keeps its order.
 */
function withinReadBudget(select: string, rows: TableRows): string {
  return `with page as materialized (
       select selected.*, row_number() over () as budget_n from (${select}) selected
     ),
     budget as (
       select coalesce(sum(${rows.sizeOf("page")}), 0) <= ${PAGE_MAX_BYTES} as fits from page
     )
     select page.*, budget.fits from budget left join page on budget.fits order by page.budget_n`;
}

/** A row selected through `TableRows.values`: the record's head and its stored values. */
type ValuesRow = Omit<RecordRow, "data"> & Record<string, unknown>;

/** A record from its row selected through `TableRows.values`. */
function storedOf(row: ValuesRow, table: TableRows): StoredRecord {
  const { data, linksTruncated } = table.recordOf(row);
  return toStored({ ...row, data, links_truncated: linksTruncated } as RecordRow);
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
  rows: TableRows;
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
  /**
   * The field indexes that could serve the list, on the per-table storage (none on the jsonb
   * one): the filter's, then those of the fields the sort orders by (`indexKeysOf`,
   * `TableIndexes.noteQuery`).
   */
  indexCandidates: readonly IndexKey[];
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
    sql: withinReadBudget(
      `${prelude}select ${page.rows.values}, (${total}) as total,
       ${page.count === "exact" ? "false" : more} as more
     from (${top}) top join ${page.rows.relation} r on r.row_id = top.row_id
     order by ${orderBySql(page.order, (term, index) => `top.${column(term, index)}`)}`,
      page.rows,
    ),
    params: [...page.params, page.limit, page.offset],
    prepare: false,
  };
}

/** The count of a page's matches, as SQL over the page's parameters. */
function countSql(page: PageQuery): string {
  return page.filtered ? `select count(*) ${page.matching}` : page.rows.count;
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
    await read<BudgetedRow<ValuesRow & { total: string | null; more: boolean }>>(sql, params),
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
  return { records: rows.map((row) => storedOf(row, page.rows)), hasMore, ...count };
}

/** A record of a table (one record is within the read budget: it is not measured). */
export async function findRecord(
  em: EntityManager,
  tableId: bigint,
  rowId: bigint,
  table: TableRows = RECORD_ROWS,
): Promise<StoredRecord | undefined> {
  const { sql, params, prepare } = findRecordStatement(tableId, rowId, table);
  const [row] = await query<ValuesRow>(em, sql, params, { prepare });
  return row && storedOf(row, table);
}

/**
 * `findRecord`'s statement: the record's values as its storage holds them (`TableRows.values`),
 * its `data` built by `recordOf`, which costs PostgreSQL less than building it in the statement.
 */
export function findRecordStatement(
  tableId: bigint,
  rowId: bigint,
  table: TableRows = RECORD_ROWS,
): Statement {
  return {
    sql: `select ${table.values} from ${table.relation} r
     where ${table.ofTable("$1")} and r.row_id = $2`,
    params: [tableId, rowId],
    prepare: true,
  };
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
  table: TableRows = RECORD_ROWS,
): Promise<StoredRecord[] | "over_budget"> {
  const { sql, params, prepare } = findRecordsStatement(
    tableId,
    rowIds,
    options.lock,
    undefined,
    table,
  );
  const rows = withinBudget(await query<BudgetedRow<ValuesRow>>(em, sql, params, { prepare }));
  return rows ? rows.map((row) => storedOf(row, table)) : "over_budget";
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
  table: TableRows = RECORD_ROWS,
): Promise<{ records: StoredRecord[]; outcome: WriteGateOutcome } | "over_budget"> {
  const { sql, params, prepare } = findRecordsStatement(tableId, rowIds, true, gate, table);
  const rows = withinBudget(
    await query<BudgetedRow<ValuesRow & { gate: WriteGateOutcome }>>(em, sql, params, {
      prepare,
    }),
  );
  if (!rows) return "over_budget";
  return { records: rows.map((row) => storedOf(row, table)), outcome: rows[0]?.gate ?? "ok" };
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
  table: TableRows = RECORD_ROWS,
): Statement {
  const measured = (sql: string) =>
    rowIds.length > UNMEASURED_READ ? withinReadBudget(sql, table) : sql;
  if (!gate) {
    return {
      sql: measured(`select ${table.values} from ${table.relation} r
     where ${table.ofTable("$1")} and r.row_id = any($2::bigint[])
     order by r.row_id ${lock ? "for update of r" : ""}`),
      params: [tableId, rowIdsParam(rowIds)],
      prepare: true,
    };
  }
  return {
    sql: measured(`with gate as materialized (
       select write_gate($1::bigint, $3::bigint[], $4::bigint[]) as outcome
     )
     select ${table.values}, (select outcome from gate) as gate from ${table.relation} r
     where ${table.ofTable("$1")} and r.row_id = any($2::bigint[])
       and (select outcome from gate) is not null
     order by r.row_id ${lock ? "for update of r" : ""}`),
    params: [tableId, rowIdsParam(rowIds), gate.fields, gate.pendingChecked],
    prepare: true,
  };
}

/** A record as read for an update without a lock, with its row version (PostgreSQL's `xmin`). */
export interface VersionedRecord {
  record: StoredRecord;
  version: string;
}

/** `readRecordVersion`'s statement (the record's values as `findRecordStatement` reads them). */
export function recordVersionStatement(
  tableId: bigint,
  rowId: bigint,
  table: TableRows = RECORD_ROWS,
): Statement {
  return {
    sql: `select ${table.values}, r.xmin::text as version from ${table.relation} r
     where ${table.ofTable("$1")} and r.row_id = $2`,
    params: [tableId, rowId],
    prepare: true,
  };
}

/** A record of the table with its row version, without locking it; undefined when none. */
export async function readRecordVersion(
  em: EntityManager,
  tableId: bigint,
  rowId: bigint,
  table: TableRows = RECORD_ROWS,
): Promise<VersionedRecord | undefined> {
  const { sql, params, prepare } = recordVersionStatement(tableId, rowId, table);
  const [row] = await query<ValuesRow & { version: string }>(em, sql, params, { prepare });
  return row && { record: storedOf(row, table), version: row.version };
}

/**
 * The table and organization of the record with this row id, in whichever storage holds it;
 * undefined when there is none. A user table's row ids are found through the ranges its inserts
 * noted (`row_range`, sql/user_table_rows_change.sql), and the row is then read, since a deleted
 * row's range stays.
 */
export async function findHome(
  em: EntityManager,
  rowId: bigint,
): Promise<{ tableId: bigint; organizationId: bigint } | undefined> {
  const homes = await query<{ table_id: string; organization_id: string; stored: boolean }>(
    em,
    `select table_id, organization_id, true as stored from record where row_id = $1
     union all
     select u.table_id, u.organization_id, false from row_range r join user_table u using (table_id)
     where r.ids @> $1::bigint`,
    [rowId],
    { prepare: true },
  );
  for (const home of homes) {
    const found = { tableId: BigInt(home.table_id), organizationId: BigInt(home.organization_id) };
    if (home.stored) return found;
    try {
      const rows = await query(
        em,
        `select 1 from ${userTable(found.organizationId, found.tableId)} where row_id = $1`,
        [rowId],
      );
      if (rows.length > 0) return found;
    } catch (error) {
      // The table was dropped since its range was read.
      if (!hasSqlState(error, "42P01")) throw error;
    }
  }
  return undefined;
}
