/**
 * The SQL of the record routes as the service sends it, for the benchmark's raw-postgres ceiling
 * (test/bench/raw-postgres.ts), which sends these same statements straight to PostgreSQL: a
 * change here changes both sides of `rowbase / raw-postgres`.
 */
export {
  allocateRowIdsStatement,
  createRecordsStatement,
  findRecordsStatement,
  pageStatement,
  recordVersionStatement,
  type Statement,
  writeRecordIfUnchangedStatement,
  writeRecordsStatement,
} from "./db/record-store.js";
export { listQuery } from "./records.js";
export type { SchemaField, TableSchema } from "./table-schema.js";
