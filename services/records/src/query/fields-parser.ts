import { type QueryField, resolveReference } from "./field-reference.js";
import { QueryError, quoteForMessage } from "./query-error.js";
import { splitReferenceList } from "./reference-list.js";

/**
 * The fields a `fields` parameter selects, in the order given, each once (a repeat, by name or
 * by id, is dropped). An unknown reference is an error. `row_id`, `created_at` and `updated_at`
 * (when no field has that name) are accepted and add nothing: they are always on the record.
 */
export function parseFields(text: string, fields: readonly QueryField[]): QueryField[] {
  const selected: QueryField[] = [];
  for (const item of splitReferenceList(text, "fields", { descending: false })) {
    const target = resolveReference(item.text, fields, { systemColumns: true });
    if (!target) {
      throw new QueryError(
        "fields",
        `unknown field ${quoteForMessage(item.text)}`,
        item.position,
        "not_found",
      );
    }
    if (target.kind === "column") continue;
    if (!selected.some((field) => field.id === target.field.id)) selected.push(target.field);
  }
  return selected;
}
