export { type RecordsConfig, recordsEnv } from "./config.js";
export {
  createRecordsOrm,
  migrateRecords,
  type RunningRecords,
  SCHEMA,
  startRecords,
} from "./service.js";
