import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import { choicesOf, isSelectType } from "@rowbase/kit/field-types";
import type { RequiredRule } from "../../domain/type-change.js";
import { forgetChanges, markTablesDeleted } from "../schema-changes.js";
import { columnTypeOf, isEmptyColumnSql, type StoredField } from "./columns.js";
import {
  addFieldSql,
  applyDdl,
  createLinkJunctionSql,
  createTableSql,
  dropFieldSql,
  dropLinkJunctionSql,
  dropOrganizationSchemaSql,
  dropTableSql,
  registerUserTableSql,
} from "./ddl.js";
import { cancelIndexBuildsSql } from "./indexes.js";
import { fieldColumn, fieldPreviousColumn, idText, tableWriteLockKey, userTable } from "./names.js";
import { type ConversionRefusal, changeFieldType, type TypeChangeOptions } from "./type-change.js";
import { keepChoicesSql, numberRowsSql } from "./value-changes.js";

/**
 * Catalog's schema changes as they reach a user table: each is the state to reach (a table that
 * exists, a column of a type, a column that is gone), so applying one twice ends the same, and
 * the copy the bus delivers after the hand-off (ApplyCatalogEvent) finds nothing left to do.
 */

/** A user table, as catalog's events name it. */
export interface UserTableRef {
  organizationId: bigint;
  tableId: bigint;
}

/** Makes a new table's user table (without columns: its fields follow as FieldCreated). */
export async function createUserTable(em: EntityManager, table: UserTableRef): Promise<void> {
  await applyDdl(em, [
    ...createTableSql(table.organizationId, table.tableId, []),
    registerUserTableSql(table.organizationId, table.tableId),
  ]);
}

/**
 * A new field's column. A new autonumber field numbers the table's rows in creation order, in
 * a transaction holding the table's write lock: creates wait, and the ones after it number
 * themselves from the field's counter, which it starts. Done once: a repeat finds the counter.
 */
export async function addUserTableField(
  em: EntityManager,
  table: UserTableRef,
  field: StoredField,
): Promise<void> {
  await applyDdl(em, addFieldSql(table.organizationId, table.tableId, field));
  if (field.type !== "autonumber") return;
  // Looked for first without the lock: the bus's copy of a field already numbered must not
  // queue behind the table's writes.
  const numbered = await query(
    em,
    "select 1 from autonumber_counter where table_id = $1 and field_id = $2",
    [table.tableId, field.id],
  );
  if (numbered.length > 0) return;
  await em.transactional(async (tx) => {
    await query(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      tableWriteLockKey(table.tableId),
    ]);
    const [started] = await query<{ count: string }>(
      tx,
      `insert into autonumber_counter (table_id, field_id, last_value)
       select $1, $2, count(*) from ${userTable(table.organizationId, table.tableId)}
       on conflict (table_id, field_id) do nothing
       returning last_value::text as count`,
      [table.tableId, field.id],
    );
    if (!started) return;
    await query(tx, numberRowsSql(table.organizationId, table.tableId, field.id), [0]);
  });
}

/**
 * A new link field's junction table, shared with its inverse: made by whichever of the two
 * fields' events comes first (the first already names both), found made by the other.
 */
export async function createLinkJunction(
  em: EntityManager,
  organizationId: bigint,
  field: { id: bigint; tableId: bigint; inverseFieldId: bigint; linkedTableId: bigint },
): Promise<void> {
  await applyDdl(em, [
    cancelIndexBuildsSql(organizationId, field.tableId),
    cancelIndexBuildsSql(organizationId, field.linkedTableId),
    ...createLinkJunctionSql(organizationId, field),
  ]);
}

/** Drops a deleted link field's junction table (its inverse's, which catalog deletes with it). */
export async function dropLinkJunction(
  em: EntityManager,
  organizationId: bigint,
  fieldId: bigint,
  inverseFieldId: bigint,
): Promise<void> {
  await applyDdl(em, dropLinkJunctionSql(organizationId, fieldId, inverseFieldId));
}

/** Drops a deleted field's column; its autonumber counter, if any, numbers no more. */
export async function dropUserTableField(
  em: EntityManager,
  table: UserTableRef,
  fieldId: bigint,
): Promise<void> {
  await applyDdl(em, [
    ...dropFieldSql(table.organizationId, table.tableId, fieldId),
    `update autonumber_counter set deleted = true
     where table_id = ${table.tableId} and field_id = ${fieldId}`,
  ]);
}

/**
 * Drops the user tables of deleted tables (those of `tableIds` that have one), each in a
 * transaction that first takes the table's exclusive lock and marks it deleted (a create
 * racing the deletion either committed before, or finds the mark and is refused), then takes
 * its registry row: whoever takes it gives the table's records back to the organization's
 * usage and drops the user table with its count, row ranges and counters; a repeat (the bus's
 * copy of a change already handed over) finds no row and does nothing.
 */
export async function dropUserTables(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<void> {
  const sorted = [...tableIds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const tableId of sorted) {
    await applyDdl(em, async (tx) => {
      await markTablesDeleted(tx, [tableId]);
      const [registered] = await query<{ organization_id: string }>(
        tx,
        "delete from user_table where table_id = $1 returning organization_id::text",
        [tableId],
      );
      if (!registered) return;
      const organizationId = BigInt(registered.organization_id);
      await query(
        tx,
        `select record_usage_add($1, -(
           select coalesce(sum(delta), 0) from record_count where table_id = $2)::bigint)`,
        [organizationId, tableId],
      );
      for (const statement of dropTableSql(organizationId, tableId)) await query(tx, statement);
      await query(tx, "delete from autonumber_counter where table_id = $1", [tableId]);
      await forgetChanges(tx, [tableId]);
    });
  }
}

/**
 * Drops a deleted organization's schema with every user table in it, in the caller's
 * transaction (the deletion saga's, which also deletes its usage).
 */
export async function dropOrganizationTables(
  em: EntityManager,
  organizationId: bigint,
): Promise<void> {
  const tables = await query<{ table_id: string }>(
    em,
    "select table_id::text from user_table where organization_id = $1",
    [organizationId],
  );
  const tableIds = tables.map((row) => BigInt(row.table_id));
  await query(em, "delete from autonumber_counter where table_id = any($1::bigint[])", [tableIds]);
  await forgetChanges(em, tableIds);
  for (const statement of dropOrganizationSchemaSql(organizationId)) await query(em, statement);
}

/** The column's PostgreSQL type now (`format_type`), undefined when it has none. */
async function columnTypeNow(
  em: EntityManager,
  table: UserTableRef,
  fieldId: bigint,
): Promise<string | undefined> {
  const [row] = await query<{ type: string }>(
    em,
    `select format_type(atttypid, atttypmod) as type from pg_attribute
     where attrelid = to_regclass($1) and attname = $2 and not attisdropped`,
    [userTable(table.organizationId, table.tableId), fieldColumn(fieldId)],
  );
  return row?.type;
}

/**
 * A change of a field's type, options or required flag, on its user table: the values convert
 * (`changeFieldType`) or nothing changes and the refusal names the rows that would not. A
 * select's new options keep its values (they hold choice ids, so a renamed choice needs
 * nothing): a removed choice that a row still holds refuses the change. Applied again (the
 * event after the hand-off) it finds the column converted already and does nothing.
 */
export async function changeUserTableField(
  em: EntityManager,
  table: UserTableRef,
  change: { from: StoredField; to: StoredField; required: RequiredRule },
  /** Catalog's id of a change it has not committed yet: the values before it are kept. */
  changeId?: string,
  /** The conversion's own settings (`changeFieldType`): the caller's abort signal, say. */
  settings: Partial<TypeChangeOptions> = {},
): Promise<{ refused?: ConversionRefusal }> {
  const { from, to } = change;
  const target = columnTypeOf(to.type);
  const now = await columnTypeNow(em, table, to.id);
  if (target && now && columnTypeOf(from.type) !== target && now === pgTypeOf(target)) return {};
  if (from.type === to.type && isSelectType(to.type)) {
    return selectChoicesChange(em, table, change);
  }
  const result = await changeFieldType(
    em,
    { ...table, ...change },
    changeId
      ? {
          ...settings,
          keepPrevious: true,
          beforeCommit: (tx) =>
            query(
              tx,
              `insert into kept_column (change_id, organization_id, table_id, field_id)
               values ($1, $2, $3, $4) on conflict (change_id) do nothing`,
              [changeId, table.organizationId, table.tableId, to.id],
            ).then(() => undefined),
        }
      : settings,
  );
  return "refused" in result ? { refused: result.refused } : {};
}

/**
 * Catalog committed a change records made before (`changeUserTableField` with a change id): the
 * values from before it, kept for a release, go. Whether there was such a change to confirm.
 */
export async function confirmFieldChange(
  em: EntityManager,
  table: UserTableRef,
  fieldId: bigint,
  changeId: string,
): Promise<boolean> {
  const kept = await query(em, "select 1 from kept_column where change_id = $1", [changeId]);
  if (kept.length === 0) return false;
  await applyDdl(em, [
    cancelIndexBuildsSql(table.organizationId, table.tableId),
    `alter table ${userTable(table.organizationId, table.tableId)}
       drop column if exists ${fieldPreviousColumn(fieldId)}`,
    `delete from kept_column where table_id = ${idText(table.tableId)}
       and field_id = ${idText(fieldId)}`,
  ]);
  return true;
}

/**
 * Catalog did not commit a change records made before it: the field's values as they were take
 * its place again (a field that had no column, a created_at one say, loses the new column).
 * Nothing when records made no such change, or it was confirmed. The table's write lock comes
 * first: a release sent while the change still converts (its caller gave up waiting) waits for
 * it to commit, and then takes it back, or to roll back.
 */
export async function undoFieldChange(
  em: EntityManager,
  tableId: bigint,
  changeId: string,
): Promise<void> {
  await applyDdl(em, async (tx) => {
    await query(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      tableWriteLockKey(tableId),
    ]);
    const [kept] = await query<{ organization_id: string; field_id: string }>(
      tx,
      `delete from kept_column where change_id = $1 and table_id = $2
       returning organization_id::text, field_id::text`,
      [changeId, tableId],
    );
    if (!kept) return;
    const fieldId = BigInt(kept.field_id);
    const table = userTable(BigInt(kept.organization_id), tableId);
    await query(tx, cancelIndexBuildsSql(BigInt(kept.organization_id), tableId));
    await query(tx, `alter table ${table} drop column if exists ${fieldColumn(fieldId)}`);
    const [previous] = await query(
      tx,
      `select 1 from pg_attribute where attrelid = to_regclass($1) and attname = $2
         and not attisdropped`,
      [table, fieldPreviousColumn(fieldId)],
    );
    if (previous) {
      await query(
        tx,
        `alter table ${table} rename column ${fieldPreviousColumn(fieldId)} to ${fieldColumn(fieldId)}`,
      );
    }
  });
}

/** How `format_type` names a column type of columns.ts. */
function pgTypeOf(type: string): string {
  return type === "timestamptz" ? "timestamp with time zone" : type;
}

/**
 * A select field's new choices: refused while a row holds a removed choice (or, when the field
 * is made required, holds none); a value of a choice removed since the check is cleared (a
 * write that raced the change).
 */
async function selectChoicesChange(
  em: EntityManager,
  table: UserTableRef,
  change: { from: StoredField; to: StoredField; required: RequiredRule },
): Promise<{ refused?: ConversionRefusal }> {
  const { to } = change;
  const kept = choicesOf(to.options).map((choice) => choice.id);
  const column = fieldColumn(to.id);
  const multiple = to.type === "multi_select";
  const removed = await refusalWhere(
    em,
    table,
    multiple ? `not (${column} <@ $1::text[])` : `${column} <> all ($1::text[])`,
    [kept],
    "holds a choice that is removed",
  );
  if (removed) return { refused: removed };
  if (change.required === "made") {
    const empty = await refusalWhere(
      em,
      table,
      isEmptyColumnSql(columnTypeOf(to.type)!, column),
      [],
      "is empty, and the field is to be required",
    );
    if (empty) return { refused: empty };
  }
  await query(em, keepChoicesSql(table.organizationId, table.tableId, to.id, multiple), [kept]);
  return {};
}

/** How many offending rows a refusal names. */
const EXAMPLES = 5;

/** A refusal naming the rows `condition` holds for, with `problem`; undefined when none does. */
async function refusalWhere(
  em: EntityManager,
  table: UserTableRef,
  condition: string,
  params: unknown[],
  problem: string,
): Promise<ConversionRefusal | undefined> {
  const relation = userTable(table.organizationId, table.tableId);
  const [found] = await query<{ ids: string[]; count: string }>(
    em,
    `select (array_agg(row_id::text order by row_id))[1:${EXAMPLES}] as ids, count(*)::text as count
     from ${relation} where ${condition}`,
    params,
  );
  if (!found || found.count === "0") return undefined;
  return {
    rowIds: found.ids.map(BigInt),
    count: Number(found.count),
    message: `record ${found.ids[0]}: ${problem}`,
  };
}
