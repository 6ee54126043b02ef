import type { EntityManager } from "@mikro-orm/postgresql";
import { query, type SchemaField } from "@rowbase/kit";
import { choicesOf } from "@rowbase/kit/field-types";
import { columnFromJson, columnTypeOf } from "./columns.js";
import { applyDdl, createTableSql, registerUserTableSql } from "./ddl.js";
import { fieldColumn, idText, tableWriteLockKey, userTable } from "./names.js";

/** Records moved per statement. */
export const MOVE_CHUNK = 5_000;

/** A table to move out of `record`: its owner and its fields as catalog has them now. */
export interface TableToMove {
  organizationId: bigint;
  tableId: bigint;
  fields: readonly SchemaField[];
}

/**
 * What `moveTable` did: `moved` its records; found the table `registered` already (moved before,
 * or created in its own table), and did nothing; found it `deleted` (records marked the table or
 * its organization deleted: the deletion removes its records); or found a change of its values
 * `pending`, and left it for a later round: a type or options change of a field checked and not
 * yet applied (the values in `record` may still be converted or renamed), or an autonumber field
 * whose records are still being numbered (a record without a number).
 */
export type MoveOutcome =
  | { outcome: "moved"; records: number }
  | { outcome: "registered" | "deleted" | "pending" };

export class MoveRefused extends Error {}

/** Thrown inside the move to roll it back when a record of an autonumber field has no number. */
class NumberingUnderway extends Error {}

/**
 * Moves a table's records out of `record` into its own table (created here), in one transaction
 * under the table's write lock held exclusively: creates (create_checks) and updates
 * (write_gate) of the table wait for it, reads and every other table go on.
 *
 * Each chunk is one statement that deletes a chunk of the table's rows from `record` and inserts
 * what it deleted, converted, into the user table, so a row is moved exactly as its last
 * committed version: deletes of records take no advisory lock (only their rows' locks), and one
 * that commits first is never copied, one that comes after finds no row. A create or update that
 * chose `record` and waited on the lock finds no row to write (the update writes nothing) or is
 * refused (an insert of a registered table's records raises RB002, sql/record_count_change.sql),
 * and is sent again to the table's own storage. Counts stay exact throughout: `record`'s delete
 * trigger takes each chunk off the table's count in `record_count`, the user table's insert
 * trigger adds it again, in the same statement.
 *
 * The table is registered (`user_table`) last, only when nothing is left in `record`, the user
 * table holds every record moved and the kept count says the same; otherwise MoveRefused, and
 * everything rolls back. Values of fields the schema does not have (a field added after the
 * schema was read) refuse it too, but those of fields records marked deleted, which are dropped.
 * A second call, at once on another replica or later, waits for the lock, finds the table
 * registered and does nothing.
 */
export async function moveTable(em: EntityManager, table: TableToMove): Promise<MoveOutcome> {
  try {
    return await em.transactional((tx) => moveLocked(tx, table));
  } catch (error) {
    if (error instanceof NumberingUnderway) return { outcome: "pending" };
    throw error;
  }
}

async function moveLocked(tx: EntityManager, table: TableToMove): Promise<MoveOutcome> {
  const { organizationId, tableId } = table;
  await query(tx, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
    tableWriteLockKey(tableId),
  ]);
  const [state] = await query<{
    registered: boolean;
    deleted: boolean;
    pending: boolean;
    deleted_fields: string[];
  }>(
    tx,
    `select exists (select from user_table where table_id = $1) as registered,
       exists (select from deleted_table where table_id = $1)
         or exists (select from deleted_organization where organization_id = $2) as deleted,
       exists (select from pending_type_change
               where table_id = $1 and lifted_by is null and expires_at > now()) as pending,
       array(select field_id::text from deleted_field where table_id = $1) as deleted_fields`,
    [tableId, organizationId],
  );
  if (state!.registered) return { outcome: "registered" };
  if (state!.deleted) return { outcome: "deleted" };
  if (state!.pending) return { outcome: "pending" };

  // An unregistered user table is nobody's: none of the routes read or write it. One made by a
  // late TableCreated (registerUserTableSql left it unregistered) has no columns.
  await applyDdl(tx, [
    `drop table if exists ${userTable(organizationId, tableId)}`,
    ...createTableSql(
      organizationId,
      tableId,
      table.fields.map((field) => ({ ...field, id: BigInt(field.id) })),
    ),
  ]);
  // applyDdl's lock timeout lasts until the commit; the chunks wait for rows as writes do.
  await query(tx, "set local lock_timeout to default");

  const known = [...table.fields.map((field) => field.id), ...state!.deleted_fields];
  const numbered = table.fields.filter((f) => f.type === "autonumber").map((f) => f.id);
  const chunk = moveChunkStatement(table);
  let after = "0";
  let moved = 0;
  let unknown = 0;
  for (;;) {
    const [row] = await query<{
      last: string | null;
      moved: number;
      unknown: number;
      unnumbered: number;
    }>(tx, chunk.sql, [tableId, after, MOVE_CHUNK, known, numbered, ...chunk.params]);
    if (!row?.last) break;
    // Numbered after the move, such a record would keep no number.
    if (row.unnumbered > 0) throw new NumberingUnderway();
    after = row.last;
    moved += row.moved;
    unknown += row.unknown;
  }
  if (unknown > 0) {
    throw new MoveRefused(
      `table ${tableId}: ${unknown} records hold values of fields its schema does not have`,
    );
  }

  const [counts] = await query<{ left: string; stored: string; counted: string }>(
    tx,
    `select (select count(*) from record where table_id = $1)::text as left,
       (select count(*) from ${userTable(organizationId, tableId)})::text as stored,
       (select coalesce(sum(delta), 0) from record_count where table_id = $1)::text as counted`,
    [tableId],
  );
  const expected = String(moved);
  if (counts!.left !== "0" || counts!.stored !== expected || counts!.counted !== expected) {
    throw new MoveRefused(
      `table ${tableId}: moved ${expected} records, but ${counts!.left} are left in record, ` +
        `${counts!.stored} are in its table and its kept count is ${counts!.counted}`,
    );
  }
  await query(tx, registerUserTableSql(organizationId, tableId));
  return { outcome: "moved", records: moved };
}

/**
 * The statement moving one chunk: the next MOVE_CHUNK rows of table `$1` after row id `$2`,
 * locked, deleted from `record` and inserted into the user table, version 1, times and actors
 * as they were, each field's value in `data` converted to its column: selects' choice names
 * become their ids (a name no choice has becomes no value), the other types as `columnFromJson`
 * reads them. `$4` lists the field ids whose values are expected, `$5` the autonumber fields';
 * the selects' choice names and ids follow as parameters. Its row: the chunk's last row id (null
 * when there was none), how many it moved, how many of them held a value of a field not in `$4`,
 * and how many had no value in a field of `$5`.
 */
function moveChunkStatement(table: TableToMove): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${5 + params.length}::text[]`;
  };
  const columns: string[] = [];
  const values: string[] = [];
  for (const field of table.fields) {
    const type = columnTypeOf(field.type);
    if (!type) continue;
    const id = idText(BigInt(field.id), "field id");
    const value = `m.data -> '${id}'`;
    columns.push(fieldColumn(BigInt(field.id)));
    if (field.type === "single_select" || field.type === "multi_select") {
      const choices = choicesOf(field.options);
      const names = param(choices.map((c) => c.name));
      const ids = param(choices.map((c) => c.id));
      values.push(
        field.type === "single_select"
          ? `(${ids})[array_position(${names}, ${value} #>> '{}')]`
          : `(case when jsonb_typeof(${value}) = 'array' then array(
               select (${ids})[array_position(${names}, item.name)]
               from jsonb_array_elements_text(${value}) with ordinality as item(name, n)
               where array_position(${names}, item.name) is not null order by item.n) end)`,
      );
    } else {
      values.push(columnFromJson(type, value));
    }
  }
  const sql = `with chunk as materialized (
       select row_id from record where table_id = $1 and row_id > $2::bigint
       order by row_id limit $3 for update
     ), moved as (
       delete from record r using chunk where r.table_id = $1 and r.row_id = chunk.row_id
       returning r.row_id, r.data, r.created_at, r.updated_at, r.created_by, r.updated_by
     ), inserted as (
       insert into ${userTable(table.organizationId, table.tableId)}
         (row_id, version, created_at, updated_at, created_by, updated_by${columns.map((c) => `, ${c}`).join("")})
       select m.row_id, 1, m.created_at, m.updated_at, m.created_by, m.updated_by${values.map((v) => `, ${v}`).join("")}
       from moved m
       returning row_id
     )
     select (select max(row_id)::text from chunk) as last,
       (select count(*)::int from inserted) as moved,
       (select count(*)::int from moved m
        where exists (select from jsonb_object_keys(m.data) k where k <> all($4::text[]))) as unknown,
       (select count(*)::int from moved m where not (m.data ?& $5::text[])) as unnumbered`;
  return { sql, params };
}
