import { type FieldTypeName, foldName } from "@rowbase/kit/field-types";

/** The field types the query language compares values of: all of them. */
export type QueryFieldType = FieldTypeName;

/** What the query language needs to know about one field of the table. */
export interface QueryField {
  /** The field id as a decimal string; it is the key of the value in `record.data`. */
  id: string;
  name: string;
  type: QueryFieldType;
  /**
   * The choice names of a select field, when the caller has them. A filter value is then matched
   * to its choice as the write path matches it (exactly, else regardless of case), so
   * `(Status,eq,active)` finds the stored "Active"; a name that is no choice is kept as given and
   * matches nothing. Without them values compare exactly.
   */
  choices?: readonly string[];
  /** The choices' ids, in the order of `choices`: what a select's column holds (column storage). */
  choiceIds?: readonly string[];
  /**
   * How a link's, lookup's or rollup's values are reached, on the per-table storage (made by
   * `user-tables/computed-values.ts` from the table's and the linked tables' schemas). Absent
   * for such a field whose link, inverse or looked-up field is not in the schemas (deleted
   * mid-flight): it then has no value.
   */
  relation?: FieldRelation;
}

/**
 * The linked records of a link field: its junction table (`relation`, the record's own row ids in
 * `own`, the linked ones' in `other`) and the linked user table. SQL identifiers made by
 * `user-tables/names.ts` from ids only.
 */
export interface LinkPath {
  junction: string;
  own: "row_id" | "linked_row_id";
  other: "row_id" | "linked_row_id";
  table: string;
}

/** What a rollup computes over the linked records (kit's `ROLLUP_FUNCTIONS`). */
export type RollupFunctionName = "count" | "count_values" | "sum" | "avg" | "min" | "max";

/**
 * A relational field's values: a link's linked records; a lookup's values of `field` (a field of
 * the linked table) across them; a rollup's one value over them (`field` undefined when the
 * looked-up field is gone: then only `count` has a value).
 */
export type FieldRelation =
  | { type: "link"; path: LinkPath }
  | { type: "lookup"; path: LinkPath; field: QueryField }
  | { type: "rollup"; path: LinkPath; function: RollupFunctionName; field: QueryField | undefined };

/** Record columns that `where` and `sort` accept besides fields. */
export const SYSTEM_COLUMNS = ["row_id", "created_at", "updated_at"] as const;

export type SystemColumn = (typeof SYSTEM_COLUMNS)[number];

/** What a reference names: a field of the table, or a column of the record itself. */
export type ReferenceTarget =
  | { kind: "field"; field: QueryField }
  | { kind: "column"; column: SystemColumn };

const ALL_DIGITS = /^[0-9]+$/;

function isSystemColumn(text: string): text is SystemColumn {
  return (SYSTEM_COLUMNS as readonly string[]).includes(text);
}

/**
 * Finds what a reference names, or undefined when it names nothing. The order:
 *
 * 1. All digits: always a field id, never a name, so that an id can always be written.
 * 2. A field whose name is exactly the text.
 * 3. `row_id`, `created_at`, `updated_at` (when `systemColumns`): the record's own columns. A
 *    field named exactly so wins over them, so a user's field is never shadowed; its column is
 *    then reached through nothing else, which only matters for a table that chose those names.
 * 4. A field whose name equals the text regardless of case, by catalog's own rule (`foldName`,
 *    which its unique index keeps): names are unique by it within a table, so
 *    this is not ambiguous, save for names the migration to that rule found equal, where the
 *    first in field order wins.
 */
export function resolveReference(
  text: string,
  fields: readonly QueryField[],
  options: { systemColumns: boolean },
): ReferenceTarget | undefined {
  const lookup = lookupOf(fields);
  if (ALL_DIGITS.test(text)) {
    const field = lookup.byId.get(text);
    return field && { kind: "field", field };
  }
  const exact = lookup.byName.get(text);
  if (exact) return { kind: "field", field: exact };
  if (options.systemColumns && isSystemColumn(text)) return { kind: "column", column: text };
  const folded = lookup.byFoldedName.get(foldName(text));
  return folded && { kind: "field", field: folded };
}

interface FieldLookup {
  byId: Map<string, QueryField>;
  byName: Map<string, QueryField>;
  byFoldedName: Map<string, QueryField>;
}

/**
 * The fields of each list by id, name and folded name (the first of equals, as a search in
 * order finds it), made once per list: a batch resolves every key of 1000 records against one.
 */
const lookups = new WeakMap<readonly QueryField[], FieldLookup>();

function lookupOf(fields: readonly QueryField[]): FieldLookup {
  let lookup = lookups.get(fields);
  if (!lookup) {
    lookup = { byId: new Map(), byName: new Map(), byFoldedName: new Map() };
    for (const field of fields) {
      const folded = foldName(field.name);
      if (!lookup.byId.has(field.id)) lookup.byId.set(field.id, field);
      if (!lookup.byName.has(field.name)) lookup.byName.set(field.name, field);
      if (!lookup.byFoldedName.has(folded)) lookup.byFoldedName.set(folded, field);
    }
    lookups.set(fields, lookup);
  }
  return lookup;
}

/** Whether two targets are the same field or column. */
export function sameTarget(a: ReferenceTarget, b: ReferenceTarget): boolean {
  if (a.kind === "field" && b.kind === "field") return a.field.id === b.field.id;
  if (a.kind === "column" && b.kind === "column") return a.column === b.column;
  return false;
}
