export { type RecordsConfig, recordsEnv } from "./config.js";
export { migrateRecords, type RunningRecords, SCHEMA, startRecords } from "./service.js";
