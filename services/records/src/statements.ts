/**
 * The SQL of the record routes as the service sends it, for the benchmark's raw-postgres ceiling
 * (test/bench/raw-postgres.ts), which sends these same statements straight to PostgreSQL: a
 * change here changes both sides of `rowbase / raw-postgres`. The per-table storage's DDL, names,
 * column values and `TableRows` are here too: the ceiling reaches a user table as the service
 * does and makes one of its own for its creates, test/bench/typed-storage.ts measures that
 * storage with these statements, and test/bench/move-table.ts the upgrade's move of a table out
 * of `record`.
 */
export { createRecordsStatement } from "./db/create-gate.js";
export {
  type CountMode,
  findRecordStatement,
  findRecordsStatement,
  type PageQuery,
  pageStatement,
  pageWithTotal,
  recordVersionStatement,
} from "./db/reads.js";
export type { Statement, TableRows } from "./db/rows.js";
export { columnFromJson, columnJson, columnTypeOf } from "./db/user-tables/columns.js";
export { createTableSql } from "./db/user-tables/ddl.js";
export { fieldIndexKeyOf } from "./db/user-tables/indexes.js";
export { moveTable } from "./db/user-tables/move.js";
export {
  fieldColumn,
  organizationSchema,
  userTable,
  userTableIndex,
} from "./db/user-tables/names.js";
export { userTableRows } from "./db/user-tables/table-rows.js";
export { changeFieldType } from "./db/user-tables/type-change.js";
export {
  allocateRowIdsStatement,
  RowIdBlock,
  rowIdsOf,
  writeRecordIfUnchangedStatement,
  writeRecordsStatement,
} from "./db/writes.js";
export { createdChange, recordChangesEntry, updatedChange } from "./domain/record-changes.js";
export { listQuery } from "./records.js";
export type { SchemaField, TableSchema } from "./table-schema.js";
