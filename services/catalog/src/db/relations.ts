import type { JsonObject } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import { query } from "@rowbase/kit";
import type { FieldTypeName } from "@rowbase/kit/field-types";

/**
 * The queries behind link, lookup and rollup fields. Each stays inside one database (links
 * never leave it) and goes through the partial indexes of the migration RelationalFields, whose
 * expressions these repeat.
 */

/** A field row as these queries answer it. */
export interface StoredField {
  id: bigint;
  tableId: bigint;
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
  position: number;
}

interface RawField {
  id: string;
  table_id: string;
  name: string;
  type: FieldTypeName;
  options: JsonObject;
  required: boolean;
  description: string;
  position: number;
}

const COLUMNS = `f.id::text as id, f.table_id::text as table_id, f.name, f.type, f.options,
  f.required, f.description, f.position`;

function stored(row: RawField): StoredField {
  return {
    id: BigInt(row.id),
    tableId: BigInt(row.table_id),
    name: row.name,
    type: row.type,
    options: row.options,
    required: row.required,
    description: row.description,
    position: row.position,
  };
}

/**
 * A table of the database, locked for update (a link's inverse is added to it, and every change
 * of a table's fields holds its row); undefined when there is none in this database.
 */
export async function lockTableOfDatabase(
  em: EntityManager,
  databaseId: bigint,
  tableId: bigint,
): Promise<{ id: bigint; name: string } | undefined> {
  const [row] = await query<{ id: string; name: string }>(
    em,
    "select id::text as id, name from tables where id = $1 and database_id = $2 for update",
    [tableId, databaseId],
  );
  return row ? { id: BigInt(row.id), name: row.name } : undefined;
}

/**
 * Locks tables for update in ascending id order (the order every caller here takes them in, so
 * that two deletions spanning the same tables wait rather than deadlock); answers those that
 * still exist.
 */
export async function lockTables(
  em: EntityManager,
  tableIds: readonly bigint[],
): Promise<bigint[]> {
  if (tableIds.length === 0) return [];
  const rows = await query<{ id: string }>(
    em,
    "select id::text as id from tables where id = any($1::bigint[]) order by id for update",
    [tableIds],
  );
  return rows.map((row) => BigInt(row.id));
}

/**
 * Holds a table's row in share mode to the commit: the fields a new lookup or rollup reads in
 * it cannot be deleted meanwhile (a deletion locks the row for update), so that the deletion
 * always sees the new field among the ones it takes along.
 */
export async function holdTable(em: EntityManager, tableId: bigint): Promise<void> {
  await query(em, "select 1 from tables where id = $1 for share", [tableId]);
}

/** A field of the table, or undefined. */
export async function fieldOfTable(
  em: EntityManager,
  tableId: bigint,
  fieldId: bigint,
): Promise<StoredField | undefined> {
  const [row] = await query<RawField>(
    em,
    `select ${COLUMNS} from fields f where f.id = $1 and f.table_id = $2`,
    [fieldId, tableId],
  );
  return row ? stored(row) : undefined;
}

/** The names of a table's fields, as their keys (foldName) would compare them. */
export async function fieldNamesOf(
  em: EntityManager,
  tableId: bigint,
): Promise<{ name: string; name_key: string | null }[]> {
  return query(em, "select name, name_key from fields where table_id = $1", [tableId]);
}

/**
 * What goes with deleted fields, in the database's tables other than `skipTableId` (a table
 * being deleted, whose fields go with it): the fields named in `ids` (links' inverses), and the
 * lookups and rollups that go through or show a field of `deleted`.
 */
export async function dependentsOf(
  em: EntityManager,
  databaseId: bigint,
  deleted: readonly bigint[],
  ids: readonly bigint[],
  skipTableId = 0n,
): Promise<StoredField[]> {
  const rows = await query<RawField>(
    em,
    `select ${COLUMNS} from fields f join tables t on t.id = f.table_id
      where t.database_id = $1 and f.table_id <> $4
        and (f.id = any($3::bigint[])
          or (f.type in ('lookup', 'rollup') and (
            (f.options->>'link_field_id')::bigint = any($2::bigint[])
            or (f.options->>'field_id')::bigint = any($2::bigint[]))))
      order by f.id`,
    [databaseId, deleted, ids, skipTableId],
  );
  return rows.map(stored);
}

/** The link fields of the database's other tables that point to `tableId`. */
export async function linksInto(
  em: EntityManager,
  databaseId: bigint,
  tableId: bigint,
): Promise<StoredField[]> {
  const rows = await query<RawField>(
    em,
    `select ${COLUMNS} from fields f join tables t on t.id = f.table_id
      where t.database_id = $1 and f.table_id <> $2 and f.type = 'link'
        and (f.options->>'table_id')::bigint = $2
      order by f.id`,
    [databaseId, tableId],
  );
  return rows.map(stored);
}

/** The rollups of the database that show `fieldId`. */
export async function rollupsShowing(
  em: EntityManager,
  databaseId: bigint,
  fieldId: bigint,
): Promise<StoredField[]> {
  const rows = await query<RawField>(
    em,
    `select ${COLUMNS} from fields f join tables t on t.id = f.table_id
      where t.database_id = $1 and f.type = 'rollup'
        and (f.options->>'field_id')::bigint = $2
      order by f.id`,
    [databaseId, fieldId],
  );
  return rows.map(stored);
}

/** Deletes fields; answers them as they were, in id order. */
export async function deleteFieldRows(
  em: EntityManager,
  fieldIds: readonly bigint[],
): Promise<StoredField[]> {
  const rows = await query<RawField>(
    em,
    `delete from fields f where f.id = any($1::bigint[]) returning ${COLUMNS}`,
    [fieldIds],
  );
  return rows.map(stored).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * Closes the gaps deleted fields left in a table's field order (the position constraint is
 * deferred, so the fields may pass each other's old places within the statement).
 */
export async function renumberFields(em: EntityManager, tableId: bigint): Promise<void> {
  await query(
    em,
    `update fields f set position = r.position
       from (select id, (row_number() over (order by position) - 1)::int as position
               from fields where table_id = $1) r
      where f.id = r.id and f.position <> r.position`,
    [tableId],
  );
}
