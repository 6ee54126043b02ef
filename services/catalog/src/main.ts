import { runServiceMain } from "@rowbase/kit";
import { catalogEnv } from "./config.js";
import { migrateCatalog, startCatalog } from "./service.js";

/** Runs the catalog service alone, configured by environment (as in Kubernetes). */
runServiceMain({ name: "catalog", env: catalogEnv, migrate: migrateCatalog, start: startCatalog });
