import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { resolveReference } from "../query/index.js";
import type { SchemaField } from "../table-schema.js";
import { queryFieldsOf } from "./query-fields.js";
import type { CheckedValues } from "./record-input.js";
import type { StoredRecord } from "./record-output.js";

/**
 * A link's value as a record change holds it: the linked row ids (audit events, change events,
 * and the comparison that finds what a write changed), where a read holds the linked records
 * (`{row_id, display}`). No linked record is no value, as a cleared cell of any type.
 */

/** Whether the table has a link field (its writes and reads reach junction tables). */
export function hasLinks(fields: readonly SchemaField[]): boolean {
  return fields.some((field) => field.type === "link");
}

/** A link value as row ids, null when it links nothing. */
function linkIds(value: JsonValue | undefined): number[] | null {
  if (!Array.isArray(value) || value.length === 0) return null;
  return value.map((item) =>
    typeof item === "object" && item !== null && !Array.isArray(item)
      ? Number(item.row_id)
      : Number(item),
  );
}

/** The record with its link values as row ids (none: no key), as a change compares them. */
export function withLinkIds(fields: readonly SchemaField[], record: StoredRecord): StoredRecord {
  if (!hasLinks(fields)) return record;
  const data: JsonObject = { ...record.data };
  for (const field of fields) {
    if (field.type !== "link") continue;
    const ids = linkIds(data[field.id]);
    if (ids) data[field.id] = ids;
    else delete data[field.id];
  }
  return { ...record, data };
}

/** Checked values with an empty link (`[]`) as none (null), as `withLinkIds` holds it. */
export function emptyLinksCleared(
  fields: readonly SchemaField[],
  values: CheckedValues,
): CheckedValues {
  if (!hasLinks(fields)) return values;
  const cleared = new Map(values);
  for (const field of fields) {
    const value = cleared.get(field.id);
    if (field.type === "link" && Array.isArray(value) && value.length === 0) {
      cleared.set(field.id, null);
    }
  }
  return cleared;
}

/** The key of the field's value in a write's `data` as sent (an id or a name), behind `prefix`. */
export function valueKey(
  fields: readonly SchemaField[],
  data: Readonly<JsonObject> | undefined,
  field: SchemaField,
  prefix: string,
): string {
  const queryFields = queryFieldsOf(fields);
  for (const reference of Object.keys(data ?? {})) {
    const target = resolveReference(reference, queryFields, { systemColumns: false });
    if (target?.kind === "field" && target.field.id === field.id) return `${prefix}${reference}`;
  }
  return `${prefix}${field.name}`;
}
