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

/** Whether two stored values are equal: primitives directly, arrays and objects as JSON. */
function sameValue(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
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
