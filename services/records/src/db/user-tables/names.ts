/**
 * The SQL identifiers of the per-table storage, made from ids only: a name a client chose never
 * reaches SQL text, so renaming a table or field changes nothing here and no name can inject
 * SQL. Ids are positive int64 values; anything else is a programming error.
 */

const INT64_MAX = 9_223_372_036_854_775_807n;

/** An id as SQL text (a literal, or part of an identifier); throws for anything but an id. */
export function idText(id: bigint, what = "id"): string {
  if (typeof id !== "bigint" || id <= 0n || id > INT64_MAX) {
    throw new Error(`${what} must be a positive int64, got ${String(id)}`);
  }
  return id.toString();
}

/** The schema that holds an organization's tables: `org_<organization_id>`. */
export function organizationSchema(organizationId: bigint): string {
  return `org_${idText(organizationId, "organization id")}`;
}

/** A user table's PostgreSQL table, schema-qualified: `org_<organization_id>.t_<table_id>`. */
export function userTable(organizationId: bigint, tableId: bigint): string {
  return `${organizationSchema(organizationId)}.t_${idText(tableId, "table id")}`;
}

/** A field's column: `f_<field_id>`. */
export function fieldColumn(fieldId: bigint): string {
  return `f_${idText(fieldId, "field id")}`;
}

/** The column a type change fills before it takes the field's place: `f_<field_id>_next`. */
export function fieldShadowColumn(fieldId: bigint): string {
  return `${fieldColumn(fieldId)}_next`;
}

/**
 * The column a type change keeps the field's values of before it in, until catalog has committed
 * the change (and it is dropped) or not (and it takes the field's place again):
 * `f_<field_id>_prev`.
 */
export function fieldPreviousColumn(fieldId: bigint): string {
  return `${fieldColumn(fieldId)}_prev`;
}

/**
 * The advisory lock of a user table's writes: every write takes it shared, a change that
 * rewrites a field's values exclusively, so that no write lands on values already converted.
 * Reads never take it.
 */
export function tableWriteLockKey(tableId: bigint): string {
  return `records.table:${idText(tableId, "table id")}`;
}

/** An index of a user table's; index names are unique per schema, so they carry the table id. */
export function userTableIndex(tableId: bigint, purpose: string): string {
  if (!/^[a-z][a-z0-9]{0,20}$/.test(purpose)) throw new Error(`invalid index purpose ${purpose}`);
  return `t_${idText(tableId, "table id")}_${purpose}`;
}

/**
 * The index of a field's column that a list asked for (`indexes.ts`): `t_<table_id>_f<field_id>`;
 * of two fields' columns, `t_<table_id>_f<field_id>_f<field_id>` (at most 63 characters, the
 * longest name PostgreSQL keeps).
 */
export function fieldIndex(tableId: bigint, ...fieldIds: [bigint, ...bigint[]]): string {
  if (fieldIds.length > 2) throw new Error("a field index has at most two fields");
  const fields = fieldIds.map((id) => `_f${idText(id, "field id")}`).join("");
  return `t_${idText(tableId, "table id")}${fields}`;
}

/**
 * Where a link field's values live. A link and its inverse share one junction table,
 * `l_<the lower of the two field ids>`, a row per linked pair: its `row_id` column holds the
 * record of the lower id's table and `linked_row_id` the other's (for a table linked to itself,
 * both are its rows). `own` is the column of the field's own records, `other` the linked ones'.
 */
export interface LinkJunction {
  relation: string;
  own: "row_id" | "linked_row_id";
  other: "row_id" | "linked_row_id";
}

export function linkJunction(
  organizationId: bigint,
  fieldId: bigint,
  inverseFieldId: bigint,
): LinkJunction {
  if (fieldId === inverseFieldId) throw new Error("a link's inverse is another field");
  const low = fieldId < inverseFieldId;
  return {
    relation: `${organizationSchema(organizationId)}.l_${idText(low ? fieldId : inverseFieldId, "field id")}`,
    own: low ? "row_id" : "linked_row_id",
    other: low ? "linked_row_id" : "row_id",
  };
}
