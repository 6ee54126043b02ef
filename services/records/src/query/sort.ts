import {
  type QueryField,
  type ReferenceTarget,
  resolveReference,
  sameTarget,
} from "./field-reference.js";
import { QueryError, quoteForMessage } from "./query-error.js";
import { splitReferenceList } from "./reference-list.js";
import { columnPrefix, type Storage, valueSource } from "./value-expression.js";

export const SORT_MAX_KEYS = 20;

/**
 * Whether a list can sort by a field of this type: json and file values have no order, nor has
 * a lookup's list of values. A link sorts by its count of links, a rollup by its value
 * (`relationalSource`).
 */
export function isSortable(type: string): boolean {
  return type !== "json" && type !== "file" && type !== "lookup";
}

export interface SortKey {
  target: ReferenceTarget;
  descending: boolean;
}

/**
 * Parses `sort`: comma-separated references, `-` before one for descending,
 * `row_id`, `created_at` and `updated_at` accepted besides fields. Unknown references, the same
 * field twice (whatever the direction or spelling), more than 20 keys, and json, file or lookup
 * fields (which have no order) are errors.
 */
export function parseSort(text: string, fields: readonly QueryField[]): SortKey[] {
  const items = splitReferenceList(text, "sort", { descending: true });
  if (items.length > SORT_MAX_KEYS) {
    throw new QueryError(
      "sort",
      `more than ${SORT_MAX_KEYS} sort keys`,
      items[SORT_MAX_KEYS]!.position,
    );
  }
  const keys: SortKey[] = [];
  for (const item of items) {
    const target = resolveReference(item.text, fields, { systemColumns: true });
    if (!target) {
      throw new QueryError(
        "sort",
        `unknown field ${quoteForMessage(item.text)}`,
        item.position,
        "not_found",
      );
    }
    if (target.kind === "field" && !isSortable(target.field.type)) {
      throw new QueryError(
        "sort",
        `cannot sort by ${target.field.type} field ${quoteForMessage(target.field.name)}`,
        item.position,
      );
    }
    if (keys.some((key) => sameTarget(key.target, target))) {
      throw new QueryError(
        "sort",
        `${quoteForMessage(item.text)} is sorted by twice`,
        item.position,
      );
    }
    keys.push({ target, descending: item.descending });
  }
  return keys;
}

/** One term of an ORDER BY: what a record sorts by, and which way (nulls placed). */
export interface OrderTerm {
  /** SQL of the value: a typed field value, or a column of the record. */
  value: string;
  direction: "ASC" | "ASC NULLS LAST" | "DESC NULLS FIRST";
  /** True for `row_id`, which the `(table_id, row_id)` index keeps in order. */
  rowId: boolean;
  /**
   * True for a column of the record (`row_id`, `created_at`, `updated_at`, also as a created_at
   * or updated_at field), which an index of the table keeps in order with `row_id`; and, on the
   * per-table storage, for a field whose column's index keeps it in order (`indexed`).
   */
  column: boolean;
}

/**
 * The ORDER BY terms for sort keys: each key's sortable value (numbers as numbers, text by code
 * point, dates and datetimes by their stored text), nulls (blank and malformed values) last
 * ascending and first descending, then `row_id` ascending to break ties — so paging is stable and ties keep
 * creation order whatever the direction. No keys: `row_id` ascending. They hold no
 * parameters: only checked field ids reach the SQL.
 */
export function orderTerms(
  keys: readonly SortKey[],
  options: {
    tableAlias?: string;
    storage?: Storage;
    /**
     * The fields whose column has an index built on what they sort by (the per-table
     * storage's field indexes): all but a select's, which sorts by its choices' order.
     */
    indexed?: ReadonlySet<string>;
  } = {},
): OrderTerm[] {
  const terms = keys.map((key): OrderTerm => {
    const source = valueSource(key.target, options.tableAlias, options.storage);
    const indexed =
      source.storage === "columns" &&
      key.target.kind === "field" &&
      options.indexed?.has(key.target.field.id) === true &&
      source.computed !== true &&
      source.kind !== "single_select" &&
      source.kind !== "multi_select";
    return {
      value: source.sortable,
      direction: key.descending ? "DESC NULLS FIRST" : "ASC NULLS LAST",
      rowId: source.kind === "row_id",
      column: !source.readsField || indexed,
    };
  });
  if (!terms.some((term) => term.rowId)) {
    terms.push({
      value: `${columnPrefix(options.tableAlias)}row_id`,
      direction: "ASC",
      rowId: true,
      column: true,
    });
  }
  return terms;
}

/** ORDER BY terms as SQL (without the keywords); `name` can name each value otherwise. */
export function orderBySql(
  terms: readonly OrderTerm[],
  name: (term: OrderTerm, index: number) => string = (term) => term.value,
): string {
  return terms.map((term, index) => `${name(term, index)} ${term.direction}`).join(", ");
}
