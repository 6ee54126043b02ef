import { fieldColumn, userTable } from "./names.js";

/**
 * The changes of a field's stored values that follow a change of its options rather than of
 * its type, on a user table. Renaming a choice needs none (its column holds the choice's id).
 */

/**
 * Clears the choices a select field no longer has from its values: a single select that holds
 * one becomes empty, a multi select keeps its other choices in their order. Parameter `$1`: the
 * ids of the choices the field keeps (`text[]`). Only the rows holding another are written.
 */
export function keepChoicesSql(
  organizationId: bigint,
  tableId: bigint,
  fieldId: bigint,
  multiple: boolean,
): string {
  const table = userTable(organizationId, tableId);
  const column = fieldColumn(fieldId);
  return multiple
    ? `update ${table} set ${column} = array(
         select c from unnest(${column}) with ordinality as u(c, n)
         where c = any ($1::text[]) order by n
       ), version = version + 1
       where not (${column} <@ $1::text[])`
    : `update ${table} set ${column} = null, version = version + 1
       where ${column} <> all ($1::text[])`;
}

/**
 * Numbers a new autonumber field's rows that have no number yet, in creation (row id) order,
 * from `$1 + 1` on (`$1`: the last number given before them, bigint). A repeat numbers only
 * rows still without a number.
 */
export function numberRowsSql(organizationId: bigint, tableId: bigint, fieldId: bigint): string {
  const table = userTable(organizationId, tableId);
  const column = fieldColumn(fieldId);
  return `update ${table} t set ${column} = $1::bigint + numbered.n
     from (
       select row_id, row_number() over (order by row_id) as n
       from ${table} where ${column} is null
     ) numbered
     where t.row_id = numbered.row_id`;
}
