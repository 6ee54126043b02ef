/** Audit events carry, per changed key, the old and new value; every service builds them here. */
/** A JSON value as an audit change carries it (google.protobuf.Value). */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

/** One changed key; `old` absent: the key had no value before, `new` absent: none after. */
export interface AuditChange {
  key: string;
  old?: JsonValue;
  new?: JsonValue;
}

/** The keys whose values differ between two snapshots, in the order of `after`. */
export function changesBetween(
  before: Record<string, JsonValue>,
  after: Record<string, JsonValue>,
): AuditChange[] {
  const changes: AuditChange[] = [];
  for (const [key, value] of Object.entries(after)) {
    if (JSON.stringify(before[key]) !== JSON.stringify(value)) {
      changes.push({ key, old: before[key], new: value });
    }
  }
  return changes;
}

/** The values of a created target, as changes without an old value. */
export function valuesSet(values: Record<string, JsonValue>): AuditChange[] {
  return Object.entries(values).map(([key, value]) => ({ key, new: value }));
}

/** The values of a removed target, as changes without a new value. */
export function valuesRemoved(values: Record<string, JsonValue>): AuditChange[] {
  return Object.entries(values).map(([key, value]) => ({ key, old: value }));
}
