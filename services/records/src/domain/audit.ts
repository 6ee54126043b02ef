import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/**
 * One changed value of a record: `key` is the field id, `label` the field's name at the time.
 * `old` absent: the cell was empty before; `new` absent: it is empty after.
 */
export interface ValueChange {
  key: string;
  label: string;
  old?: JsonValue;
  new?: JsonValue;
}

/** A field as the audit log names it. */
export interface AuditedField {
  id: string;
  name: string;
}

function present(value: JsonValue | undefined): value is JsonValue {
  return value !== undefined && value !== null;
}

/**
 * Whether two stored values are equal as JSON: arrays item by item, objects key by key in any
 * order (PostgreSQL's jsonb keeps keys in an order of its own, a client sends them in its own).
 */
function sameValue(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, index) => sameValue(item, b[index]!))
    );
  }
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((key) => Object.hasOwn(b, key) && sameValue(a[key]!, b[key]!))
  );
}

/**
 * The cells whose stored values differ between two versions of a record, in field order. Only
 * fields of the table count: a value left behind by a deleted field is nobody's change.
 */
export function valueChanges(
  fields: readonly AuditedField[],
  before: Readonly<JsonObject>,
  after: Readonly<JsonObject>,
): ValueChange[] {
  const changes: ValueChange[] = [];
  for (const field of fields) {
    const old = before[field.id];
    const now = after[field.id];
    if (sameValue(old ?? null, now ?? null)) continue;
    const change: ValueChange = { key: field.id, label: field.name };
    if (present(old)) change.old = old;
    if (present(now)) change.new = now;
    changes.push(change);
  }
  return changes;
}
