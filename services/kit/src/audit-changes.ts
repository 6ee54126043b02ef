/** Audit events carry, per changed key, the old and new value; every service builds them here. */
/** A JSON value as an audit change carries it. */
export type JsonValue =
  | string
  | number
  | boolean
  | null
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * One changed key; `old` absent: the key had no value before, `new` absent: none after. A record
 * value's key is its field id, labelled with the field's name at the time.
 */
export interface AuditChange {
  key: string;
  label?: string;
  old?: JsonValue;
  new?: JsonValue;
}

/** An AuditEvent's `changes_json`: the changes as one JSON array, empty text for none. */
export function auditChangesJson(changes: readonly AuditChange[]): string {
  return changes.length === 0 ? "" : JSON.stringify(changes);
}

/** The changes an AuditEvent's `changes_json` carries. */
export function auditChangesOf(changesJson: string): AuditChange[] {
  return changesJson === "" ? [] : (JSON.parse(changesJson) as AuditChange[]);
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
