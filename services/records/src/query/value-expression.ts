import type { QueryField, QueryFieldType, ReferenceTarget } from "./field-reference.js";
import { relationalSource } from "./relational-source.js";

/** How the query language treats a value: which operators fit, how it is read and compared. */
export type ValueKind =
  | "text"
  | "single_select"
  | "multi_select"
  | "number"
  | "row_id"
  | "date"
  | "datetime"
  | "boolean"
  | "json"
  | "link"
  | "file";

const KIND_OF_TYPE: Readonly<Record<QueryFieldType, ValueKind>> = {
  text: "text",
  long_text: "text",
  email: "text",
  url: "text",
  phone: "text",
  number: "number",
  autonumber: "number",
  boolean: "boolean",
  date: "date",
  datetime: "datetime",
  created_at: "datetime",
  updated_at: "datetime",
  single_select: "single_select",
  multi_select: "multi_select",
  json: "json",
  file: "file",
  // In `data` (the jsonb storage, which holds no relational field) they have no value; on the
  // per-table storage they are `relationalSource`'s.
  link: "file",
  lookup: "file",
  rollup: "file",
};

/**
 * SQL that reads one field or column of a record. The field id is the only text that comes from
 * outside and reaches the SQL; it is checked to be digits first.
 */
export interface ValueSource {
  kind: ValueKind;
  /**
   * Where the value lives: in the record's `data` document (`jsonb`), or in a column of its own
   * of the field's type (`columns`, a table per user table), where selects hold choice ids.
   */
  storage: Storage;
  /** Whether the value is a field's (false: `row_id` or the record's timestamps). */
  readsField: boolean;
  /** The field id when the value lives in `data` (`data @> {"id": ...}` then applies). */
  fieldId: string | undefined;
  /** A select field's choice names, when known. */
  choices: readonly string[] | undefined;
  /** A select field's choice ids, in the order of `choices` (column storage). */
  choiceIds: readonly string[] | undefined;
  /** The record's `data` column. */
  data: string;
  /**
   * The value with its SQL type (text, numeric, date, timestamptz, boolean, bigint), NULL when
   * it is blank or is not of the field's type. Every cast sits behind a check that makes it
   * unable to fail, so a malformed stored value matches nothing instead of failing the query.
   */
  typed: string;
  /**
   * What the value sorts by (NULL sorts as blank): `typed`, but text in code point order, and
   * dates and datetimes as their stored text (`sortableValue`).
   */
  sortable: string;
  /**
   * A date or datetime field's value as stored text, and the `LIKE` pattern of its stored form
   * (`STORED_SHAPE`), whose texts compare in code point order as the days and instants they are.
   */
  stored: { text: string; shape: string } | undefined;
  /** True when the value is blank (missing, null, "" or []), never NULL. */
  blank: string;
  /** False when `typed` is never NULL (`row_id`, the primary key). */
  nullable: boolean;
  /**
   * True when `typed` is a subquery (a rollup's aggregate, a link's count): a comparison is
   * then made TRUE or FALSE by `coalesce`, reading it once, and no field index keeps its order.
   */
  computed?: boolean;
  /**
   * A link's records (`relationalSource`): `from`, the `from ... where` of its junction's rows for
   * the record, and `linked`, the linked row id's column in them.
   */
  link?: { from: string; linked: string };
  /**
   * A lookup's linked records (`from`, the `from ... where` of them for the record) and the
   * looked-up field's value in one of them (`inner`): a condition holds when one value satisfies
   * it.
   */
  lookup?: { from: string; inner: ValueSource };
}

/** How records are stored: see `ValueSource.storage`. */
export type Storage = "jsonb" | "columns";

const FIELD_ID = /^[0-9]{1,19}$/;
/** Choice ids as the server makes them (`ch_` and URL-safe characters): safe as SQL literals. */
const CHOICE_ID = /^[A-Za-z0-9_-]{1,64}$/;
const TABLE_ALIAS = /^[a-z_][a-z0-9_]{0,62}$/;

// The stored forms of dates and datetimes, down to the calendar (30 February and 0000 are out),
// so that `::date` / `::timestamptz` behind them cannot fail. PostgreSQL accepts offsets up to
// 15:59. No backslash and no "?" in them: the SQL then means the same whatever
// standard_conforming_strings says, and no "?"-placeholder layer can misread it.
const YEAR = "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})";
const MONTH_DAY =
  "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
const LEAP_DAY =
  "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29";
const DATE_BODY = `(${YEAR}-${MONTH_DAY}|${LEAP_DAY})`;
const TIME_BODY =
  "[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{1,9}){0,1}([Zz]|[+-](0[0-9]|1[0-5]):[0-5][0-9])";
/** Exported for the tests that hold them against PostgreSQL's own parser. */
export const SQL_DATE_PATTERN = `^${DATE_BODY}$`;
export const SQL_DATETIME_PATTERN = `^${DATE_BODY}${TIME_BODY}$`;

/** `alias.` for a valid alias; an invalid one is a programming error. */
export function columnPrefix(alias: string | undefined): string {
  if (alias === undefined) return "";
  if (!TABLE_ALIAS.test(alias)) throw new Error(`invalid table alias ${JSON.stringify(alias)}`);
  return `${alias}.`;
}

function columnSource(
  kind: ValueKind,
  column: string,
  data: string,
  storage: Storage,
): ValueSource {
  return {
    kind,
    storage,
    readsField: false,
    fieldId: undefined,
    choices: undefined,
    choiceIds: undefined,
    data,
    typed: column,
    sortable: column,
    stored: undefined,
    blank: `(${column} IS NULL)`,
    nullable: kind !== "row_id",
  };
}

export function valueSource(
  target: ReferenceTarget,
  alias: string | undefined,
  storage: Storage = "jsonb",
): ValueSource {
  const prefix = columnPrefix(alias);
  const data = `${prefix}data`;
  if (target.kind === "column") {
    const kind = target.column === "row_id" ? "row_id" : "datetime";
    return columnSource(kind, `${prefix}${target.column}`, data, storage);
  }
  const { field } = target;
  // A created_at / updated_at field shows the record's own timestamps.
  if (field.type === "created_at" || field.type === "updated_at") {
    return columnSource("datetime", `${prefix}${field.type}`, data, storage);
  }
  if (!FIELD_ID.test(field.id)) {
    throw new Error(`field id must be 1-19 digits, got ${JSON.stringify(field.id)}`);
  }
  if (storage === "columns") {
    if (field.type === "link" || field.type === "lookup" || field.type === "rollup") {
      return relationalSource(field, prefix);
    }
    return fieldColumnSource(field, prefix);
  }
  const kind = KIND_OF_TYPE[field.type];
  const json = `${data}->'${field.id}'`;
  const text = `(${data}->>'${field.id}')`;
  const typed = typedValue(kind, json, text);
  return {
    kind,
    storage,
    readsField: true,
    fieldId: field.id,
    choices: field.choices,
    choiceIds: field.choiceIds,
    data,
    typed,
    sortable: sortableValue(kind, typed, text),
    stored:
      kind === "date" || kind === "datetime" ? { text, shape: STORED_SHAPE[kind] } : undefined,
    blank: `(coalesce(${json}, 'null'::jsonb) IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb))`,
    nullable: true,
  };
}

/**
 * The shapes (`LIKE` patterns) of the stored forms of dates (`YYYY-MM-DD`) and datetimes (UTC
 * with milliseconds, `YYYY-MM-DDTHH:MM:SS.mmmZ`), as every write and conversion stores them
 * (kit's field types). With four-digit years, in code point order, such texts sort as the days
 * and instants they are.
 */
export const STORED_SHAPE = {
  date: "____-__-__",
  datetime: "____-__-__T__:__:__.___Z",
} as const;

/**
 * A stored date or datetime sorts by its text when it has the stored form's shape, NULL (as a
 * blank) otherwise. Checking the calendar too (`typed`'s pattern) cost about 1 µs a value in
 * PostgreSQL's regular expressions, which a sort pays for every match (a third of a filtered
 * page of 16,000 matches); nothing stores a date of that shape that is no day (30 February),
 * and one would only sort by its text. Filters stay exact (where-compiler's `range`).
 */
function sortableValue(kind: ValueKind, typed: string, text: string): string {
  switch (kind) {
    case "text":
    case "single_select":
    case "multi_select":
      return `${typed} COLLATE "C"`;
    case "date":
    case "datetime":
      return `(CASE WHEN ${text} LIKE '${STORED_SHAPE[kind]}' THEN ${text} END) COLLATE "C"`;
    default:
      return typed;
  }
}

function typedValue(kind: ValueKind, json: string, text: string): string {
  switch (kind) {
    case "text":
    case "single_select":
      return `(CASE WHEN jsonb_typeof(${json}) = 'string' AND ${text} <> '' THEN ${text} END)`;
    case "number":
    case "row_id":
      return `(CASE WHEN jsonb_typeof(${json}) = 'number' THEN (${json})::numeric END)`;
    case "boolean":
      return `(CASE WHEN jsonb_typeof(${json}) = 'boolean' THEN (${json})::boolean END)`;
    case "date":
      return `(CASE WHEN ${text} ~ '${SQL_DATE_PATTERN}' THEN ${text}::date END)`;
    case "datetime":
      return `(CASE WHEN ${text} ~ '${SQL_DATETIME_PATTERN}' THEN ${text}::timestamptz END)`;
    case "multi_select":
      // The array's JSON text: it orders by the first choice, then the next.
      return `(CASE WHEN jsonb_typeof(${json}) = 'array' AND ${json} <> '[]'::jsonb THEN ${text} END)`;
    case "json":
    case "link":
    case "file":
      return json;
  }
}

/**
 * A field's value in its own column (`f_<id>`, a table per user table): the column's type is the
 * value's, so `typed` is the column itself, save that an empty text is blank as in `data`. A
 * select's column holds choice ids; it sorts by its choices' names (their code point order,
 * ids inlined: they are the server's, checked against CHOICE_ID), a multi select by the names
 * of its choices in turn. A file field has no column: its value lives in the files service.
 */
function fieldColumnSource(field: QueryField, prefix: string): ValueSource {
  const kind = KIND_OF_TYPE[field.type];
  const column = `${prefix}f_${field.id}`;
  const base = {
    kind,
    storage: "columns" as const,
    readsField: true,
    fieldId: undefined,
    choices: field.choices,
    choiceIds: field.choiceIds,
    data: `${prefix}data`,
    stored: undefined,
    nullable: true,
  };
  switch (kind) {
    case "text":
      return {
        ...base,
        typed: `nullif(${column}, '')`,
        sortable: `nullif(${column}, '') COLLATE "C"`,
        blank: `(${column} IS NULL OR ${column} = '')`,
      };
    case "single_select":
      return {
        ...base,
        typed: column,
        sortable: `array_position(${choiceRanks(field)}, ${column})`,
        blank: `(${column} IS NULL)`,
      };
    case "multi_select":
      return {
        ...base,
        typed: `(CASE WHEN cardinality(${column}) > 0 THEN ${column} END)`,
        sortable: `(CASE WHEN cardinality(${column}) > 0 THEN array(select array_position(${choiceRanks(field)}, c) from unnest(${column}) with ordinality as u(c, n) order by n) END)`,
        blank: `(${column} IS NULL OR cardinality(${column}) = 0)`,
      };
    case "json":
      return {
        ...base,
        typed: column,
        sortable: column,
        blank: `(${column} IS NULL OR ${column} IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb))`,
      };
    case "file":
      return { ...base, typed: "NULL", sortable: "NULL", blank: "true" };
    default:
      return { ...base, typed: column, sortable: column, blank: `(${column} IS NULL)` };
  }
}

/** A select's choice ids in the code point order of their names, as an SQL array literal. */
function choiceRanks(field: QueryField): string {
  const names = field.choices ?? [];
  const ids = field.choiceIds ?? [];
  const order = ids
    .map((id, i) => ({ id, name: names[i] ?? "" }))
    // UTF-8 byte order is code point order, as COLLATE "C" compares.
    .sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  for (const { id } of order) {
    if (!CHOICE_ID.test(id)) throw new Error(`invalid choice id ${JSON.stringify(id)}`);
  }
  return `ARRAY[${order.map(({ id }) => `'${id}'`).join(", ")}]::text[]`;
}
