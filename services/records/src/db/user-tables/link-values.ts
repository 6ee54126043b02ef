import type { SchemaField } from "@rowbase/kit";
import { linkOptionsOf, MAX_LINKS_PER_VALUE } from "@rowbase/kit/field-types";
import { fieldColumn, type LinkJunction, linkJunction, userTable } from "./names.js";

/**
 * The fields of the tables a table's link fields name, by table id (decimal string): what a
 * read needs to show a linked record (its primary field) and, for lookups and rollups, the
 * linked values. A table missing from it shows its records by row id.
 */
export type LinkedSchemas = ReadonlyMap<string, readonly SchemaField[]>;

/** The field types whose value can stand for a record in another table's link. */
const DISPLAY_TYPES: ReadonlySet<SchemaField["type"]> = new Set([
  "text",
  "long_text",
  "email",
  "url",
  "phone",
]);

/**
 * A table's primary field, which names its records in a link: the first field (fields come in
 * position order) whose value is text. A long text is shown as stored (its Markdown), not
 * rendered: a link names a record, it does not show its text.
 */
export function primaryFieldOf(fields: readonly SchemaField[]): SchemaField | undefined {
  return fields.find((field) => DISPLAY_TYPES.has(field.type));
}

/** A link field as reads and writes reach its values. */
export interface LinkStorage {
  field: SchemaField;
  junction: LinkJunction;
  /** The linked table's id, and its user table (aliased `t` in the statements). */
  targetTableId: bigint;
  target: string;
  /** The linked table's fields, when known. */
  targetFields: readonly SchemaField[] | undefined;
}

/**
 * Where a link field's values live; undefined for a field that is not a link, or a link whose
 * inverse catalog has not named yet (it has no junction, so no values).
 */
export function linkStorageOf(
  organizationId: bigint,
  field: SchemaField,
  linked: LinkedSchemas,
): LinkStorage | undefined {
  if (field.type !== "link") return undefined;
  const options = linkOptionsOf(field.options);
  if (!options?.inverseFieldId) return undefined;
  return {
    field,
    junction: linkJunction(organizationId, BigInt(field.id), options.inverseFieldId),
    targetTableId: options.tableId,
    target: userTable(organizationId, options.tableId),
    targetFields: linked.get(options.tableId.toString()),
  };
}

/** The link fields of `fields` that have values, with their junctions. */
export function linkStoragesOf(
  organizationId: bigint,
  fields: readonly SchemaField[],
  linked: LinkedSchemas,
): LinkStorage[] {
  return fields.flatMap((field) => {
    const storage = linkStorageOf(organizationId, field, linked);
    return storage ? [storage] : [];
  });
}

/**
 * SQL of a link's value for the record `r`: its first MAX_LINKS_PER_VALUE linked records in row
 * id order, each `{"row_id", "display"}`, `[]` when none. `display` is the linked record's
 * primary field, or its row id as text when the table has none or the value is empty. The ids
 * come from the junction's primary key (`own`, `other`) in order and stop at the cap; each
 * linked record is then read by its primary key.
 */
export function linkValueSql(link: LinkStorage, row = "r"): string {
  const { junction } = link;
  const primary = link.targetFields && primaryFieldOf(link.targetFields);
  const display = primary
    ? `coalesce(nullif(t.${fieldColumn(BigInt(primary.id))}, ''), t.row_id::text)`
    : "t.row_id::text";
  // Each linked record is looked up by its key (`offset 0` keeps PostgreSQL from hashing the
  // whole linked table for every record instead: `linkedFrom` says why).
  return `coalesce((select jsonb_agg(jsonb_build_object('row_id', t.row_id, 'display', ${display}) order by t.row_id)
       from (select j.${junction.other} as row_id from ${junction.relation} j
         where j.${junction.own} = ${row}.row_id order by j.${junction.other} limit ${MAX_LINKS_PER_VALUE}) l
       cross join lateral (select * from ${link.target} t where t.row_id = l.row_id offset 0) t), '[]'::jsonb)`;
}

/**
 * SQL of the ids (text[]) of the link fields whose values for `r` hold more records than a
 * value shows (MAX_LINKS_PER_VALUE): each a probe of the junction's index past the cap.
 */
export function linksTruncatedSql(links: readonly LinkStorage[], row = "r"): string {
  const probes = links.map(
    ({ field, junction }) =>
      `case when exists (select from ${junction.relation} j where j.${junction.own} = ${row}.row_id
         offset ${MAX_LINKS_PER_VALUE}) then '${BigInt(field.id)}' end`,
  );
  return `array_remove(array[${probes.join(", ")}]::text[], null)`;
}
