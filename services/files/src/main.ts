import { runServiceMain } from "@rowbase/kit";
import { filesEnv } from "./config.js";
import { migrateFiles, startFiles } from "./service.js";

/** Runs the files service alone, configured by environment (as in Kubernetes). */
runServiceMain({ name: "files", env: filesEnv, migrate: migrateFiles, start: startFiles });
