import type { JsonValue } from "@bufbuild/protobuf";
import { choicesOf, type FieldLike, type FieldTypeName } from "@rowbase/kit/field-types";

/** The PostgreSQL type of a field's column. */
export type ColumnType =
  | "text"
  | "numeric"
  | "boolean"
  | "date"
  | "timestamptz"
  | "text[]"
  | "jsonb"
  | "bigint";

/**
 * Each field type's column, of the value's natural type; undefined for the types that have no
 * column of their own: a file field's values live in the files service, created_at /
 * updated_at fields show the row's own columns, a link's values are rows of its junction table
 * and lookups and rollups are computed through a link. Selects hold choice ids, so renaming a choice
 * rewrites no record.
 */
const COLUMN_TYPES: Readonly<Record<FieldTypeName, ColumnType | undefined>> = {
  text: "text",
  long_text: "text",
  email: "text",
  url: "text",
  phone: "text",
  number: "numeric",
  boolean: "boolean",
  date: "date",
  datetime: "timestamptz",
  single_select: "text",
  multi_select: "text[]",
  json: "jsonb",
  autonumber: "bigint",
  file: undefined,
  created_at: undefined,
  updated_at: undefined,
  link: undefined,
  lookup: undefined,
  rollup: undefined,
};

export function columnTypeOf(type: FieldTypeName): ColumnType | undefined {
  return COLUMN_TYPES[type];
}

/** A field as the storage needs it: its id (for the column's name), type and options. */
export interface StoredField extends FieldLike {
  id: bigint;
}

/**
 * A value as the registry stores it (already validated against the field) as the parameter of
 * its column: choice names become their ids, numbers their exact decimal text, JSON its text
 * (sent with a `::jsonb` cast). Null stays null.
 */
export function columnParam(field: FieldLike, value: JsonValue): unknown {
  if (value === null) return null;
  switch (field.type) {
    case "number":
    case "autonumber":
      return String(value);
    case "single_select":
      return choiceId(field, value as string);
    case "multi_select":
      return (value as string[]).map((name) => choiceId(field, name));
    case "json":
      return JSON.stringify(value);
    default:
      return value;
  }
}

function choiceId(field: FieldLike, name: string): string {
  const choice = choicesOf(field.options).find((c) => c.name === name);
  if (!choice) throw new Error(`"${name}" is no choice of the field`);
  return choice.id;
}

/**
 * SQL that reads a field's column as `columnValue` decodes it: dates and datetimes as the text
 * of their stored forms (`YYYY-MM-DD`, UTC with milliseconds), whatever the session's settings;
 * any other column cast to its own type (which costs nothing). The cast puts the column's type in
 * the statement's text: a statement prepared on a connection before the field's type changed
 * has another text, hence another name, than the one built after. Reusing the old name would
 * fail with "cached plan must not change result type" on every connection that prepared it.
 */
export function columnRead(type: ColumnType, column: string): string {
  switch (type) {
    case "date":
      return `to_char(${column}, 'YYYY-MM-DD')`;
    case "timestamptz":
      return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    default:
      return `${column}::${type}`;
  }
}

/**
 * A column's value, as read by `columnRead` through node-postgres (numeric and bigint come as
 * text, arrays and jsonb parsed), as the field's stored JSON value: choice ids become the
 * names of the choices. An id no choice has any more reads as no value.
 */
export function columnValue(field: FieldLike, raw: unknown): JsonValue {
  if (raw === null || raw === undefined) return null;
  switch (field.type) {
    case "number":
    case "autonumber":
      return Number(raw);
    case "single_select":
      return choiceName(field, raw as string);
    case "multi_select": {
      const names = (raw as string[]).map((id) => choiceName(field, id));
      return names.filter((name): name is string => name !== null);
    }
    default:
      return raw as JsonValue;
  }
}

function choiceName(field: FieldLike, id: string): string | null {
  return choicesOf(field.options).find((c) => c.id === id)?.name ?? null;
}

/**
 * A stored value as `columnFromJson` reads it from a jsonb parameter: `columnParam`'s value,
 * but a json field's value as it is rather than as its text.
 */
export function columnJson(field: FieldLike, value: JsonValue): JsonValue {
  if (field.type === "json") return value;
  return columnParam(field, value) as JsonValue;
}

/**
 * SQL that turns `json`, a jsonb value holding a column's value as `columnJson` makes it
 * (JSON null for none), into the column's type: so that one jsonb parameter carries the values
 * of many rows (`jsonb_to_recordset`) whatever their columns' types.
 */
export function columnFromJson(type: ColumnType, json: string): string {
  switch (type) {
    case "text[]":
      return `(case when jsonb_typeof(${json}) = 'array' then array(select jsonb_array_elements_text(${json})) end)`;
    case "jsonb":
      return `nullif(${json}, 'null'::jsonb)`;
    default:
      return `(${json} #>> '{}')::${type}`;
  }
}

/**
 * SQL that reads a select's column (`column`, choice ids) as the record output shows it, in
 * `jsonb_build_object`: a single select's choice name, a multi select's names in the order
 * written (`[]` for none); an id no choice has any more reads as no value. `names` and `ids`
 * are `text[]` parameters of the choices' names and ids, in one order.
 */
export function choiceNamesSql(
  type: "single_select" | "multi_select",
  column: string,
  names: string,
  ids: string,
): string {
  return type === "single_select"
    ? `(${names})[array_position(${ids}, ${column})]`
    : `(CASE WHEN ${column} IS NOT NULL THEN coalesce((select jsonb_agg((${names})[array_position(${ids}, c)] order by n) from unnest(${column}) with ordinality as u(c, n) where array_position(${ids}, c) IS NOT NULL), '[]'::jsonb) END)`;
}

/** SQL that holds when a column of this type holds an empty value (none, `''`, `{}`). */
export function isEmptyColumnSql(type: ColumnType, column: string): string {
  if (type === "text") return `(${column} is null or ${column} = '')`;
  if (type === "text[]") return `(${column} is null or cardinality(${column}) = 0)`;
  return `${column} is null`;
}
