import type { JsonValue } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { hasSqlState, query, sameJson } from "@rowbase/kit";
import {
  type ConversionSql,
  canChangeType,
  conversionFrom,
  conversionSql,
  convertValue,
  type FieldLike,
  sqlLiteral,
} from "@rowbase/kit/field-types";
import {
  conversionProblem,
  EMPTY_MADE_REQUIRED,
  emptiedProblem,
  type RequiredRule,
  sourceValue,
} from "../../domain/type-change.js";
import { tableConversionLockKey } from "../create-gate.js";
import {
  type ColumnType,
  columnFromJson,
  columnJson,
  columnRead,
  columnTypeOf,
  columnValue,
  type StoredField,
} from "./columns.js";
import { applyDdl, DDL_LOCK, type DdlLockOptions } from "./ddl.js";
import { cancelIndexBuildsSql, dropFieldIndexSql, fieldIndexChangeSql } from "./indexes.js";
import {
  fieldColumn,
  fieldPreviousColumn,
  fieldShadowColumn,
  tableWriteLockKey,
  userTable,
} from "./names.js";

/** A change of one field's type or options, in a user table. */
export interface FieldTypeChange {
  organizationId: bigint;
  tableId: bigint;
  /** The field as it is; `to` has the same id. */
  from: StoredField;
  to: StoredField;
  /** What the change asks of empty values (the field made or kept required). */
  required: RequiredRule;
}

/** Why a change was refused: a few of the rows whose values do not convert, how many, the first problem. */
export interface ConversionRefusal {
  rowIds: bigint[];
  count: number;
  message: string;
}

export interface TypeChangeOptions {
  /**
   * Rows converted per statement: the caller's abort is seen between two, so a chunk's time
   * (0.1-0.4 s at 10,000 rows on a busy 2-core machine) is how late a change gives up past its
   * caller's deadline.
   */
  chunk: number;
  lock: DdlLockOptions;
  /** Called after each chunk is written, inside the change (its progress, for metrics and tests). */
  afterChunk?: (converted: number) => Promise<void>;
  /**
   * Keep the values as they were in the field's previous column (`fieldPreviousColumn`), so
   * that the change can be taken back: always through a shadow column then, even when the
   * column's type stays.
   */
  keepPrevious?: boolean;
  /** Runs last in the change's transaction, so that what it writes commits with the change. */
  beforeCommit?: (tx: EntityManager) => Promise<void>;
  /**
   * The caller's: once aborted (its deadline passed, say), the change stops before its next
   * chunk and rolls back whole, rather than commit a change its caller no longer waits for.
   */
  signal?: AbortSignal;
}

const DEFAULTS: TypeChangeOptions = { chunk: 10_000, lock: DDL_LOCK };

/** How many offending rows a refusal names. */
const EXAMPLES = 5;

/** A chunk of the field's cells, in row order. */
interface CellRow {
  row_id: string;
  value: unknown;
  created_at: string;
  updated_at: string;
}

/** A refused change: thrown inside the transaction so that it writes nothing. */
class Refused extends Error {
  constructor(readonly refusal: ConversionRefusal) {
    super(refusal.message);
  }
}

/**
 * Changes a field's type or options: every value converts under kit's field-type registry, in
 * SQL (`conversionSql`, which a test holds to `convertValue`, the rules that check writes), or
 * nothing changes and the refusal names the rows that would not.
 *
 * Reads are never held up beyond a moment: when the column's type stays, the values are
 * rewritten in place, a chunk of rows per statement; when it changes, a shadow column of the new
 * type is added and filled the same way, then takes the old one's place (drop, rename) in a
 * statement that waits at most `lock.lockTimeoutMs` for its lock, retried. Writes of the table
 * are refused while it converts (503 with Retry-After): it holds the table's conversion lock
 * (`tableConversionLockKey`), which writes try without waiting, and its write lock
 * (`tableWriteLockKey`) throughout.
 */
export async function changeFieldType(
  em: EntityManager,
  change: FieldTypeChange,
  options: Partial<TypeChangeOptions> = {},
): Promise<{ converted: number } | { refused: ConversionRefusal }> {
  const settings = { ...DEFAULTS, ...options };
  const { from, to } = change;
  if (from.id !== to.id) throw new Error("a type change keeps the field's id");
  if (!canChangeType(from.type, to.type)) {
    return {
      refused: { rowIds: [], count: 0, message: `cannot convert ${from.type} to ${to.type}` },
    };
  }
  const target = columnTypeOf(to.type);
  if (!target) throw new Error(`a ${to.type} field has no column to convert into`);
  const source = columnTypeOf(from.type);
  const table = userTable(change.organizationId, change.tableId);
  const inPlace = source === target && !settings.keepPrevious;
  const shadow = fieldShadowColumn(to.id);
  if (!inPlace) {
    // A shadow column left by an attempt that failed half way is started afresh.
    await applyDdl(
      em,
      [
        cancelIndexBuildsSql(change.organizationId, change.tableId),
        `alter table ${table} drop column if exists ${shadow}`,
        `alter table ${table} add column ${shadow} ${target}`,
      ],
      settings.lock,
    );
  }
  try {
    const converted = await em.transactional(async (tx) => {
      // The conversion lock first: from then on a write of the table is refused at once (503
      // with Retry-After) rather than wait, holding the table's ROW EXCLUSIVE lock, which the
      // swap needs (sql/write_gate.sql); then the write lock, once the writes under way are done.
      // In that order, as writes take them: a write holding the first may wait for the second.
      for (const key of [
        tableConversionLockKey(change.tableId),
        tableWriteLockKey(change.tableId),
      ]) {
        await query(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [key]);
      }
      const converted = await convertAll(tx, change, {
        table,
        read: source ? fieldColumn(from.id) : rowTimeColumn(from.type),
        readType: source ?? "timestamptz",
        write: inPlace ? fieldColumn(to.id) : shadow,
        writeType: target,
        inPlace,
        settings,
      });
      if (!inPlace) {
        await swapIn(tx, table, change, settings);
      } else {
        // The field's index goes when the field no longer has one on the same expression
        // (indexes.ts), taking the table's lock only at the end, as a swap does.
        const drop = fieldIndexChangeSql(change.organizationId, change.tableId, from, to);
        if (drop.length > 0) {
          await lastInSavepoint(tx, settings.lock, async () => {
            await query(tx, cancelIndexBuildsSql(change.organizationId, change.tableId));
            for (const statement of drop) await query(tx, statement);
          });
        }
      }
      await settings.beforeCommit?.(tx);
      // Its caller may have given up during the last range or the swap: rolled back, not
      // committed behind its back (catalog would have to take it back with a release).
      settings.signal?.throwIfAborted();
      return converted;
    });
    return { converted };
  } catch (error) {
    if (!inPlace) await applyDdl(em, [`alter table ${table} drop column if exists ${shadow}`]);
    if (error instanceof Refused) return { refused: error.refusal };
    throw error;
  }
}

/** The row's own column a created_at / updated_at field shows. */
function rowTimeColumn(type: string): string {
  if (type === "created_at" || type === "updated_at") return type;
  throw new Error(`a ${type} field has no values to convert`);
}

interface ConvertPlan {
  table: string;
  read: string;
  readType: ColumnType;
  write: string;
  writeType: ColumnType;
  /** Rewriting the field's own column: values that stay as they are are not written. */
  inPlace: boolean;
  settings: TypeChangeOptions;
}

/** A value that does not convert: its row, and why. */
interface Offending {
  rowId: bigint;
  message: string;
}

/**
 * Converts every row's value in SQL (kit's `conversionSql`, the registry's rules as SQL), a
 * range of `chunk` row ids per statement; the few values the SQL leaves to Node are converted
 * with `convertValue` as before. Throws Refused when any does not convert.
 */
async function convertAll(
  tx: EntityManager,
  change: FieldTypeChange,
  plan: ConvertPlan,
): Promise<number> {
  const { from, to, required } = change;
  // A double's text is its shortest form, the digits JavaScript writes (the SQL relies on it).
  await query(tx, "select set_config('extra_float_digits', '1', true)");
  const conversion = conversionSql(from, to, "src");
  const rows = conversionFrom(
    conversion,
    `(select r.row_id, r.${plan.read} as src from ${plan.table} as r
      where r.row_id > $1::bigint and r.row_id <= $2::bigint)`,
  );
  const problem = `(case when ${conversion.inNode} then null else coalesce(${conversion.problem}, ${requiredProblemSql(conversion, to, required)}) end)`;
  const write = plan.inPlace ? `t.${plan.write} is distinct from c.value` : "c.value is not null";
  const offending: bigint[] = [];
  let count = 0;
  let message = "";
  let converted = 0;
  for (let after = "0"; ; ) {
    plan.settings.signal?.throwIfAborted();
    // The range's last row: the chunk-th after `after`, else the table's last.
    const [bound] = await query<{ last: string | null }>(
      tx,
      `select coalesce(
         (select row_id from ${plan.table} where row_id > $1::bigint order by row_id offset $2 limit 1),
         (select max(row_id) from ${plan.table}))::text as last`,
      [after, plan.settings.chunk - 1],
    );
    const last = bound?.last;
    if (!last || BigInt(last) <= BigInt(after)) break;
    const [chunk] = await query<{
      written: number;
      refused: number;
      ids: string[];
      messages: string[];
      in_node: string[];
    }>(
      tx,
      `with c as (
         select row_id, ${conversion.value} as value, ${problem} as problem,
                ${conversion.inNode} as in_node
         from ${rows} as converted
       ), written as (
         update ${plan.table} as t set ${plan.write} = c.value from c
         where t.row_id > $1::bigint and t.row_id <= $2::bigint and t.row_id = c.row_id
           and $3::boolean and c.problem is null and not c.in_node and ${write}
         returning 1
       )
       select (select count(*) from written)::int as written,
              count(*) filter (where problem is not null)::int as refused,
              coalesce((array_agg(row_id::text order by row_id) filter (where problem is not null))[1:${EXAMPLES}], '{}') as ids,
              coalesce((array_agg(problem order by row_id) filter (where problem is not null))[1:${EXAMPLES}], '{}') as messages,
              coalesce(array_agg(row_id::text order by row_id) filter (where in_node), '{}') as in_node
       from c`,
      [after, last, count === 0],
    );
    const found: Offending[] = chunk!.ids.map((id, i) => ({
      rowId: BigInt(id),
      message: chunk!.messages[i]!,
    }));
    let refused = chunk!.refused;
    converted += chunk!.written;
    if (chunk!.in_node.length > 0) {
      const inNode = await convertInNode(tx, change, plan, chunk!.in_node, count + refused === 0);
      found.push(...inNode.offending);
      refused += inNode.offending.length;
      converted += inNode.written;
    }
    found.sort((a, b) => (a.rowId < b.rowId ? -1 : a.rowId > b.rowId ? 1 : 0));
    for (const { rowId, message: problem } of found) {
      if (offending.length < EXAMPLES) offending.push(rowId);
      if (!message) message = `record ${rowId}: ${problem}`;
    }
    count += refused;
    await plan.settings.afterChunk?.(converted);
    after = last;
  }
  if (count > 0) throw new Refused({ rowIds: offending, count, message });
  return converted;
}

/**
 * The `required` rule (`conversionProblem`) in SQL: a value the conversion empties, or one
 * already empty when the field is made required.
 */
function requiredProblemSql(conversion: ConversionSql, to: FieldLike, required: RequiredRule) {
  if (required === "none") return "null::text";
  const emptied = sqlLiteral(emptiedProblem(to));
  const empty = required === "made" ? sqlLiteral(EMPTY_MADE_REQUIRED) : "null";
  return `(case when ${conversion.valueEmpty} then (case when not ${conversion.sourceEmpty} then ${emptied} else ${empty} end) end)`;
}

/**
 * Converts the rows `rowIds` in Node, the values the SQL conversion leaves to `convertValue`;
 * writes them when `write` (no value was refused so far).
 */
async function convertInNode(
  tx: EntityManager,
  change: FieldTypeChange,
  plan: ConvertPlan,
  rowIds: string[],
  write: boolean,
): Promise<{ written: number; offending: Offending[] }> {
  const { from, to, required } = change;
  const rows = await query<CellRow>(
    tx,
    `select r.row_id::text, ${columnRead(plan.readType, `r.${plan.read}`)} as value,
            ${columnRead("timestamptz", "r.created_at")} as created_at,
            ${columnRead("timestamptz", "r.updated_at")} as updated_at
     from ${plan.table} r where r.row_id = any($1::bigint[]) order by r.row_id`,
    [rowIds],
  );
  const offending: Offending[] = [];
  const writes: { id: string; val: JsonValue }[] = [];
  for (const row of rows) {
    const cell = {
      value: columnTypeOf(from.type) ? columnValue(from, row.value) : undefined,
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
    };
    const problem = conversionProblem(from, to, cell, required);
    if (problem !== undefined) {
      offending.push({ rowId: BigInt(row.row_id), message: problem });
      continue;
    }
    const result = convertValue(from, to, sourceValue(from, cell));
    const value = result.ok ? result.value : null;
    if (plan.inPlace ? sameJson(value, cell.value ?? null) : value === null) continue;
    writes.push({ id: row.row_id, val: columnJson(to, value) });
  }
  if (!write || offending.length > 0 || writes.length === 0) return { written: 0, offending };
  await query(
    tx,
    `update ${plan.table} t set ${plan.write} = ${columnFromJson(plan.writeType, "v.val")}
     from jsonb_to_recordset($1::jsonb) as v(id bigint, val jsonb) where t.row_id = v.id`,
    [JSON.stringify(writes)],
  );
  return { written: writes.length, offending };
}

/**
 * The filled shadow column takes the field's place: the old column (if the field had one) is
 * dropped, or kept as the previous one, and the shadow renamed (`lastInSavepoint`). The field's
 * index (indexes.ts) goes first: it is on the old column's values, which a kept previous column
 * would carry on with; a list asks for the new column's.
 */
async function swapIn(
  tx: EntityManager,
  table: string,
  change: FieldTypeChange,
  settings: TypeChangeOptions,
): Promise<void> {
  const column = fieldColumn(change.to.id);
  const previous = fieldPreviousColumn(change.to.id);
  await lastInSavepoint(tx, settings.lock, async () => {
    await query(tx, cancelIndexBuildsSql(change.organizationId, change.tableId));
    await query(tx, dropFieldIndexSql(change.organizationId, change.tableId, change.to.id));
    await query(tx, `alter table ${table} drop column if exists ${previous}`);
    if (settings.keepPrevious && columnTypeOf(change.from.type)) {
      await query(tx, `alter table ${table} rename column ${column} to ${previous}`);
    } else {
      await query(tx, `alter table ${table} drop column if exists ${column}`);
    }
    await query(
      tx,
      `alter table ${table} rename column ${fieldShadowColumn(change.to.id)} to ${column}`,
    );
  });
}

/**
 * How many times the last statements are tried again after a deadlock with writes (each found
 * after PostgreSQL's `deadlock_timeout`, 1 s by default): more than the writes wait
 * (`WRITE_LOCK_TIMEOUT_MS`, 5 s), so the writes give up first.
 */
const DEADLOCK_ATTEMPTS = 20;

/**
 * The last statements of a change, which need the table's ACCESS EXCLUSIVE lock: in a savepoint
 * that waits at most `lockTimeoutMs` for the lock and is tried again, so the work of the fill is
 * kept while reads finish, and reads wait for the lock only from here to the commit.
 *
 * A write of the table holds its ROW EXCLUSIVE lock from the start of its statement, so one
 * waiting in `write_gate` for the write lock this change holds blocks the lock these statements
 * need: a deadlock, which PostgreSQL breaks by failing one of the two (40P01). When it is these
 * statements, they are tried again: such a write gives up within `WRITE_LOCK_TIMEOUT_MS`, and
 * a write that starts later queues behind this lock's request without taking its own lock.
 */
async function lastInSavepoint(
  tx: EntityManager,
  lock: DdlLockOptions,
  work: () => Promise<void>,
): Promise<void> {
  await query(tx, "select set_config('lock_timeout', $1, true)", [String(lock.lockTimeoutMs)]);
  for (let attempt = 1, deadlocks = 0; ; ) {
    await query(tx, "savepoint last_statements");
    try {
      await work();
      await query(tx, "release savepoint last_statements");
      return;
    } catch (error) {
      await query(tx, "rollback to savepoint last_statements");
      if (hasSqlState(error, "40P01") && ++deadlocks < DEADLOCK_ATTEMPTS) continue;
      if (!hasSqlState(error, "55P03") || ++attempt > lock.attempts) throw error;
    }
  }
}
