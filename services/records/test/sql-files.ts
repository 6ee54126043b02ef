import { migrations } from "../src/migrations/initial-schema.js";

/** Records' repeatable SQL files (the package's `sql/`), in the order `migrate` applies them. */
export const SQL_FILES = [
  "create_checks.sql",
  "create_gate.sql",
  "record_change_capture.sql",
  "record_change_sequence.sql",
  "record_count_add.sql",
  "record_count_change.sql",
  "record_usage.sql",
  "record_usage_add.sql",
  "reserve_records.sql",
  "take_records.sql",
  "user_table_rows_change.sql",
  "write_gate.sql",
];

/** Records' migrations by name, in the order they run. */
export const MIGRATIONS = migrations.map((migration) => migration.name);

/**
 * What `migrate` applies to a database that has every migration before `next`: `next` and
 * the migrations after it, then every SQL file. A database made from nothing: `appliedFrom()`.
 */
export function appliedFrom(next = MIGRATIONS[0]!): string[] {
  const at = MIGRATIONS.indexOf(next);
  if (at < 0) throw new Error(`records has no migration ${next}`);
  return [...MIGRATIONS.slice(at), ...SQL_FILES];
}
