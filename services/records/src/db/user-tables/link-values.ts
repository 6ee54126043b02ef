import type { SchemaField } from "@rowbase/kit";
import { linkOptionsOf } from "@rowbase/kit/field-types";
import { type LinkJunction, linkJunction, userTable } from "./names.js";

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
