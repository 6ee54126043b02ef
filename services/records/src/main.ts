import { runServiceMain } from "@rowbase/kit";
import { recordsEnv } from "./config.js";
import { migrateRecords, startRecords } from "./service.js";

/** Runs the records service alone, configured by environment (as in Kubernetes). */
runServiceMain({ name: "records", env: recordsEnv, migrate: migrateRecords, start: startRecords });
