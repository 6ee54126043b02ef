import { setTimeout as sleep } from "node:timers/promises";
import type { EntityManager } from "@mikro-orm/postgresql";
import { hasSqlState, query } from "@rowbase/kit";
import { columnTypeOf, type StoredField } from "./columns.js";
import { cancelIndexBuildsSql } from "./indexes.js";
import {
  fieldColumn,
  idText,
  linkJunction,
  organizationSchema,
  userTable,
  userTableIndex,
} from "./names.js";

/**
 * The DDL of the per-table storage, as statements: an organization's schema, a user table with
 * the fixed columns every record has and a column per field, and the changes of fields and
 * tables. Every identifier comes from `names.ts`, made of ids; nothing else is SQL text here.
 * Each statement may run again without harm (`if exists` / `if not exists`), so a change that
 * is applied twice, or repaired after a failure, ends in the same state.
 */

export function createOrganizationSchemaSql(organizationId: bigint): string[] {
  return [`create schema if not exists ${organizationSchema(organizationId)}`];
}

/** Drops an organization's schema and every table in it, with their counts and registry rows. */
export function dropOrganizationSchemaSql(organizationId: bigint): string[] {
  return [
    cancelIndexBuildsSql(organizationId),
    `drop schema if exists ${organizationSchema(organizationId)} cascade`,
    `delete from record_count where table_id in
       (select table_id from user_table where organization_id = ${idText(organizationId)})`,
    `delete from row_range where table_id in
       (select table_id from user_table where organization_id = ${idText(organizationId)})`,
    `delete from user_table where organization_id = ${idText(organizationId)}`,
  ];
}

/**
 * Marks a table as stored in its user table (`user_table`): the last statement of the
 * transaction that makes the user table hold the table's records (its creation, or the
 * upgrade's move out of `record`). Not while `record` holds records of the table: a table made
 * before the per-table storage is registered only by the upgrade's move, which empties `record`
 * of it first, so a late or repeated TableCreated can never hide its records behind an empty
 * user table (the empty table it makes is replaced by the move's). Once the upgrade has dropped
 * `record` (or while the statement waited for it to), there is nothing to look at there.
 */
export function registerUserTableSql(organizationId: bigint, tableId: bigint): string {
  const insert = `insert into user_table (table_id, organization_id)
      select ${idText(tableId)}, ${idText(organizationId)}`;
  return `do $register$
    begin
      ${insert}
      where not exists (select from record where table_id = ${idText(tableId)})
      on conflict (table_id) do nothing;
    exception when undefined_table then
      ${insert}
      on conflict (table_id) do nothing;
    end
    $register$`;
}

/**
 * A user table: `row_id` (given by the writer from records' one global sequence, so that a row
 * id alone finds its record), the row's `version` (1 on create, one more on every write), its
 * times and actors, and a column per field that has one. Lists in the order of the record's
 * times come from the two indexes with `row_id`, which breaks ties.
 */
export function createTableSql(
  organizationId: bigint,
  tableId: bigint,
  fields: readonly StoredField[],
): string[] {
  const table = userTable(organizationId, tableId);
  const columns = fields.flatMap((field) => {
    const type = columnTypeOf(field.type);
    return type ? [`${fieldColumn(field.id)} ${type}`] : [];
  });
  return [
    ...createOrganizationSchemaSql(organizationId),
    `create table if not exists ${table} (
       row_id bigint primary key,
       version bigint not null default 1,
       created_at timestamptz not null default now(),
       updated_at timestamptz not null default now(),
       created_by text not null,
       updated_by text not null${columns.map((column) => `,\n       ${column}`).join("")}
     )`,
    `create index if not exists ${userTableIndex(tableId, "created")} on ${table} (created_at, row_id)`,
    `create index if not exists ${userTableIndex(tableId, "updated")} on ${table} (updated_at, row_id)`,
    ...rowTriggersSql(table, tableId),
  ];
}

/**
 * The two triggers that keep the table's record count and the ranges of its row ids
 * (sql/user_table_rows_change.sql): an unfiltered list's exact total is read from
 * `record_count` instead of counted, and a row id alone finds its table through `row_range`.
 */
function rowTriggersSql(table: string, tableId: bigint): string[] {
  const id = tableId.toString();
  return [
    `create or replace trigger count_insert after insert on ${table}
       referencing new table as new_rows
       for each statement execute function user_table_rows_change('${id}')`,
    `create or replace trigger count_delete after delete on ${table}
       referencing old table as old_rows
       for each statement execute function user_table_rows_change('${id}')`,
  ];
}

/**
 * Drops a user table, with its count (the rows go without their delete trigger). `cascade`
 * drops the foreign keys of link junctions that name it; the junctions themselves go with the
 * link fields catalog deletes with the table.
 */
export function dropTableSql(organizationId: bigint, tableId: bigint): string[] {
  return [
    cancelIndexBuildsSql(organizationId, tableId),
    `drop table if exists ${userTable(organizationId, tableId)} cascade`,
    `delete from record_count where table_id = ${idText(tableId)}`,
    `delete from row_range where table_id = ${idText(tableId)}`,
    `delete from user_table where table_id = ${idText(tableId)}`,
  ];
}

/**
 * A new field's column: nullable and without a default, so PostgreSQL only records it in its
 * catalog and rewrites no row. A field without a column of its own needs nothing.
 */
export function addFieldSql(organizationId: bigint, tableId: bigint, field: StoredField): string[] {
  const type = columnTypeOf(field.type);
  if (!type) return [];
  return [
    cancelIndexBuildsSql(organizationId, tableId),
    `alter table ${userTable(organizationId, tableId)} add column if not exists ${fieldColumn(field.id)} ${type}`,
  ];
}

/**
 * Drops a field's column: PostgreSQL marks it dropped and rewrites no row. The column's index
 * (`indexes.ts`), if it has one, goes with it.
 */
export function dropFieldSql(organizationId: bigint, tableId: bigint, fieldId: bigint): string[] {
  return [
    cancelIndexBuildsSql(organizationId, tableId),
    `alter table ${userTable(organizationId, tableId)} drop column if exists ${fieldColumn(fieldId)}`,
  ];
}

/**
 * The junction table of a link field (`linkJunction`) that relates records of `tableId` to
 * records of `linkedTableId`, shared with its inverse field: a row per linked pair, looked up
 * from either side by an index that leads with that side's column. Each column references its
 * user table's rows `on delete cascade`, so deleting a record unlinks it everywhere in the
 * statement that deletes it, and no pair can name a row that does not exist.
 */
export function createLinkJunctionSql(
  organizationId: bigint,
  field: { id: bigint; tableId: bigint; inverseFieldId: bigint; linkedTableId: bigint },
): string[] {
  const junction = linkJunction(organizationId, field.id, field.inverseFieldId);
  const tableOf = {
    [junction.own]: userTable(organizationId, field.tableId),
    [junction.other]: userTable(organizationId, field.linkedTableId),
  } as Record<"row_id" | "linked_row_id", string>;
  const name = junction.relation.slice(junction.relation.indexOf(".") + 1);
  return [
    `create table if not exists ${junction.relation} (
       row_id bigint not null references ${tableOf.row_id} (row_id) on delete cascade,
       linked_row_id bigint not null references ${tableOf.linked_row_id} (row_id) on delete cascade,
       primary key (row_id, linked_row_id)
     )`,
    `create index if not exists ${name}_linked on ${junction.relation} (linked_row_id, row_id)`,
  ];
}

/** Drops a link field's junction table (its inverse's too: they share it). */
export function dropLinkJunctionSql(
  organizationId: bigint,
  fieldId: bigint,
  inverseFieldId: bigint,
): string[] {
  return [`drop table if exists ${linkJunction(organizationId, fieldId, inverseFieldId).relation}`];
}

/** How DDL waits for its table's lock (`applyDdl`). */
export interface DdlLockOptions {
  /** How long one attempt waits for a lock (`lock_timeout`). */
  lockTimeoutMs: number;
  attempts: number;
}

export const DDL_LOCK: DdlLockOptions = { lockTimeoutMs: 2_000, attempts: 5 };

/**
 * Runs DDL statements (or `work`, which runs its own) in one transaction that waits at most
 * `lockTimeoutMs` for each lock, and tries again (a little later each time) while the lock is
 * not had in time. A DDL statement needs its table's ACCESS EXCLUSIVE lock, and while it waits
 * for it every later read of the table queues behind it: so a long read delays a schema change,
 * never the other way round. Past the last attempt PostgreSQL's lock_not_available (55P03) is
 * thrown.
 */
export async function applyDdl(
  em: EntityManager,
  work: readonly string[] | ((tx: EntityManager) => Promise<void>),
  options: DdlLockOptions = DDL_LOCK,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await em.transactional(async (tx) => {
        await query(tx, "select set_config('lock_timeout', $1, true)", [
          String(options.lockTimeoutMs),
        ]);
        if (typeof work === "function") return work(tx);
        for (const statement of work) await query(tx, statement);
      });
      return;
    } catch (error) {
      if (!hasSqlState(error, "55P03") || attempt >= options.attempts) throw error;
      await sleep(50 * attempt);
    }
  }
}
