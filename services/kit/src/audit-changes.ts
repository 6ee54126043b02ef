import { isPlainObject } from "./plain-object.js";

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

/**
 * `changes` with the labels a compact audit message's changes share (AuditEventBatch.labels_json,
 * key to label) given to those that have none of their own, as if each had come alone.
 */
export function withSharedLabels(
  changes: readonly AuditChange[],
  labels: Readonly<Record<string, string>> | null,
): AuditChange[] {
  if (!labels) return [...changes];
  return changes.map((change) => {
    if (change.label !== undefined || !Object.hasOwn(labels, change.key)) return change;
    const { key, ...rest } = change;
    return { key, label: labels[key], ...rest };
  });
}

/**
 * What `action` of the audit log's list may be: empty (every action) or `<target>.<verb>`,
 * e.g. `record.updated`. The gateway checks it and documents it; the organization service too.
 */
export const AUDIT_ACTION_FILTER = /^(?:[a-z_]{1,40}\.[a-z_]{1,40})?$/;

/**
 * The most bytes of an AuditEvent's `changes_json`: the event, with its other fields, stays well
 * under NATS's 1 MiB per message. An event the bus refuses would stay first in its service's
 * outbox and hold back every later event of every organization.
 */
export const AUDIT_CHANGES_MAX_BYTES = 256 * 1024;

/** What an old or new value too large for the audit log becomes: its size in JSON. */
export interface OmittedValue {
  omitted_bytes: number;
}

const bytesOf = (json: string) => Buffer.byteLength(json, "utf8");

/**
 * An AuditEvent's `changes_json`: the changes as one JSON array, empty text for none. Past
 * AUDIT_CHANGES_MAX_BYTES the largest old and new values are replaced by their size
 * (`{"omitted_bytes": n}`), one by one, until the array fits; if the keys alone do not fit,
 * the changes that do are kept, followed by `{"key": "*", "label": "<n> more not recorded"}`.
 */
export function auditChangesJson(changes: readonly AuditChange[]): string {
  if (changes.length === 0) return "";
  const json = JSON.stringify(changes);
  let size = bytesOf(json);
  if (size <= AUDIT_CHANGES_MAX_BYTES) return json;
  const kept = changes.map((change) => ({ ...change }) as Record<string, unknown>);
  const values = kept
    .flatMap((change) =>
      (["old", "new"] as const)
        .filter((side) => change[side] !== undefined)
        .map((side) => ({ change, side, bytes: bytesOf(JSON.stringify(change[side])) })),
    )
    .sort((a, b) => b.bytes - a.bytes);
  for (const { change, side, bytes } of values) {
    const omitted: OmittedValue = { omitted_bytes: bytes };
    const saved = bytes - bytesOf(JSON.stringify(omitted));
    // Largest first: once a value is no larger than its note, the rest are not either.
    if (size <= AUDIT_CHANGES_MAX_BYTES || saved <= 0) break;
    change[side] = omitted;
    size -= saved;
  }
  if (size <= AUDIT_CHANGES_MAX_BYTES) return JSON.stringify(kept);
  const room = AUDIT_CHANGES_MAX_BYTES - 100;
  let used = 2;
  let count = 0;
  for (const change of kept) {
    const more = bytesOf(JSON.stringify(change)) + 1;
    if (used + more > room) break;
    used += more;
    count += 1;
  }
  const rest = kept.length - count;
  return JSON.stringify([
    ...kept.slice(0, count),
    { key: "*", label: `${rest} more not recorded` },
  ]);
}

/** The changes an AuditEvent's `changes_json` carries. */
export function auditChangesOf(changesJson: string): AuditChange[] {
  return changesJson === "" ? [] : (JSON.parse(changesJson) as AuditChange[]);
}

/** JSON text with every object's keys in order: the same for values equal but for key order. */
function canonicalJson(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, v: unknown) =>
    isPlainObject(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * Whether two JSON values are equal, whatever the order of their objects' keys (PostgreSQL's
 * jsonb gives keys back in its own order: `{"decimals":2,"max":9}` comes back as
 * `{"max":9,"decimals":2}`).
 */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** The keys whose values differ between two snapshots, in the order of `after`. */
export function changesBetween(
  before: Record<string, JsonValue>,
  after: Record<string, JsonValue>,
): AuditChange[] {
  const changes: AuditChange[] = [];
  for (const [key, value] of Object.entries(after)) {
    if (!sameJson(before[key], value)) {
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
