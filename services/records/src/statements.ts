/**
 * The SQL of the record routes as the service sends it, for the benchmark's raw-postgres ceiling
 * (test/bench/raw-postgres.ts), which sends these same statements straight to PostgreSQL: a
 * change here changes both sides of `rowbase / raw-postgres`.
 */
export { createRecordsStatement } from "./db/create-gate.js";
export { findRecordsStatement, pageStatement, recordVersionStatement } from "./db/reads.js";
export type { Statement } from "./db/rows.js";
export {
  allocateRowIdsStatement,
  writeRecordIfUnchangedStatement,
  writeRecordsStatement,
} from "./db/writes.js";
export { listQuery } from "./records.js";
export type { SchemaField, TableSchema } from "./table-schema.js";
