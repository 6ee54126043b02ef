import type { FieldRelation, LinkPath, QueryField } from "./field-reference.js";
import type { ValueKind, ValueSource } from "./value-expression.js";
import { valueSource } from "./value-expression.js";

/**
 * The aliases of the junction and of the linked table inside the subqueries of a link, lookup or
 * rollup; the record they belong to is the statement's own alias (`r`). A subquery's aliases hide
 * the statement's, so these are names the statements never use.
 */
export const JUNCTION_ALIAS = "jn";
export const LINKED_ALIAS = "lk";

/**
 * `from <junction> where <own> = <row>`: the record's links, through the junction's primary key
 * `(row_id, linked_row_id)` or its index `(linked_row_id, row_id)`, whichever leads with `own`.
 */
export function linksFrom(path: LinkPath, row: string): string {
  return `from ${path.junction} ${JUNCTION_ALIAS} where ${JUNCTION_ALIAS}.${path.own} = ${row}`;
}

/**
 * `linksFrom` joined to the linked records (aliased LINKED_ALIAS) by their primary key: what a
 * filter or sort reaches for the links of every record, which PostgreSQL may hash once for all
 * of them. (A page's values look the linked records of each record up by key instead:
 * `linkRows` in computed-values.ts.)
 */
export function linkedFrom(path: LinkPath, row: string): string {
  return `from ${path.junction} ${JUNCTION_ALIAS} join ${path.table} ${LINKED_ALIAS} on ${LINKED_ALIAS}.row_id = ${JUNCTION_ALIAS}.${path.other} where ${JUNCTION_ALIAS}.${path.own} = ${row}`;
}

/**
 * A looked-up field's value in a linked record, or undefined for a field that has none to look
 * up: a file (its values live in the files service) or a link, lookup or rollup (computed
 * themselves; not looked up through another link).
 */
export function linkedValue(field: QueryField): ValueSource | undefined {
  if (
    field.type === "file" ||
    field.type === "link" ||
    field.type === "lookup" ||
    field.type === "rollup"
  ) {
    return undefined;
  }
  return valueSource({ kind: "field", field }, LINKED_ALIAS, "columns");
}

/** A rollup's value as SQL, and what kind of value it is. */
export interface RollupValue {
  sql: string;
  kind: ValueKind;
  /** False for the counts and sums, which are 0 over no values. */
  nullable: boolean;
}

const NUMERIC_KINDS: ReadonlySet<ValueKind> = new Set(["number"]);
const ORDERED_KINDS: ReadonlySet<ValueKind> = new Set(["number", "date", "datetime"]);

/**
 * A rollup's aggregate over `linkedFrom`'s rows (nulls and blanks skipped): `count` the linked
 * records, `count_values` the non-blank values, `sum` and `avg` of numbers, `min` and `max` of
 * numbers, dates or datetimes (a datetime field's, or a record's created_at / updated_at).
 * Over no values the counts and the sum are 0, the others null; a function that does not apply
 * to the looked-up field's type (which catalog refuses), or a looked-up field that is gone, has
 * no value, kind `file`.
 */
export function rollupAggregate(relation: Extract<FieldRelation, { type: "rollup" }>): RollupValue {
  const none: RollupValue = { sql: "NULL::numeric", kind: "file", nullable: true };
  if (relation.function === "count") {
    return { sql: "count(*)::numeric", kind: "number", nullable: false };
  }
  const value = relation.field && linkedValue(relation.field);
  if (!value) return none;
  switch (relation.function) {
    case "count_values":
      return {
        sql: `(count(*) filter (where not ${value.blank}))::numeric`,
        kind: "number",
        nullable: false,
      };
    case "sum":
      if (!NUMERIC_KINDS.has(value.kind)) return none;
      return { sql: `coalesce(sum(${value.typed}), 0)`, kind: "number", nullable: false };
    case "avg":
      if (!NUMERIC_KINDS.has(value.kind)) return none;
      return { sql: `avg(${value.typed})`, kind: "number", nullable: true };
    case "min":
    case "max":
      if (!ORDERED_KINDS.has(value.kind)) return none;
      return { sql: `${relation.function}(${value.typed})`, kind: value.kind, nullable: true };
  }
}

/**
 * A rollup's one value for the record `row` (`rollupAggregate` as a subquery); a `count` reads
 * the junction alone.
 */
export function rollupValue(
  relation: Extract<FieldRelation, { type: "rollup" }>,
  row: string,
): RollupValue {
  const aggregate = rollupAggregate(relation);
  if (aggregate.kind === "file") return aggregate;
  const from =
    relation.function === "count" ? linksFrom(relation.path, row) : linkedFrom(relation.path, row);
  return { ...aggregate, sql: `(select ${aggregate.sql} ${from})` };
}

/**
 * A link's, lookup's or rollup's value source on the per-table storage, for the record whose
 * columns are prefixed `prefix` (never empty: the junction has a `row_id` too).
 * - A link: `link` (its `has`), blank when it links nothing; sorts by its count of links.
 * - A lookup: `lookup`, the looked-up field's value in a linked record, which the compiler tests
 *   inside an EXISTS over the linked records; the kind is that field's, blank when no linked
 *   record holds a value. Not sortable (parseSort refuses it).
 * - A rollup: its aggregate (`rollupValue`) as `typed`, a value like a column's.
 * Without its `relation` (a link, inverse or looked-up field gone) a field has no value.
 */
export function relationalSource(field: QueryField, prefix: string): ValueSource {
  if (prefix === "") throw new Error("a link, lookup or rollup needs the record's table alias");
  const row = `${prefix}row_id`;
  const base = {
    storage: "columns" as const,
    readsField: true,
    fieldId: undefined,
    choices: undefined,
    choiceIds: undefined,
    data: `${prefix}data`,
    stored: undefined,
  };
  const none: ValueSource = {
    ...base,
    kind: "file",
    typed: "NULL",
    sortable: "NULL",
    blank: "true",
    nullable: true,
  };
  const relation = field.relation;
  if (!relation || relation.type !== field.type) return none;
  switch (relation.type) {
    case "link": {
      const links = linksFrom(relation.path, row);
      const count = `(select count(*) ${links})`;
      return {
        ...base,
        kind: "link",
        typed: count,
        sortable: count,
        blank: `(NOT EXISTS (select 1 ${links}))`,
        nullable: false,
        computed: true,
        link: { from: links, linked: `${JUNCTION_ALIAS}.${relation.path.other}` },
      };
    }
    case "lookup": {
      const inner = linkedValue(relation.field);
      if (!inner) return none;
      const from = linkedFrom(relation.path, row);
      return {
        ...base,
        kind: inner.kind,
        choices: inner.choices,
        choiceIds: inner.choiceIds,
        typed: "NULL",
        sortable: "NULL",
        blank: `(NOT EXISTS (select 1 ${from} and not ${inner.blank}))`,
        nullable: true,
        lookup: { from, inner },
      };
    }
    case "rollup": {
      const value = rollupValue(relation, row);
      return {
        ...base,
        kind: value.kind,
        typed: value.sql,
        sortable: value.sql,
        blank: `(${value.sql} IS NULL)`,
        nullable: value.nullable,
        computed: true,
      };
    }
  }
}
