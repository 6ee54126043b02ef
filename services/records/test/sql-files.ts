/** Records' repeatable SQL files (the package's `sql/`), in the order `migrate` applies them. */
export const SQL_FILES = [
  "create_checks.sql",
  "create_gate.sql",
  "record_change_capture.sql",
  "record_change_sequence.sql",
  "record_count_add.sql",
  "record_count_change.sql",
  "reserve_records.sql",
  "take_records.sql",
  "user_table_rows_change.sql",
  "write_gate.sql",
];
