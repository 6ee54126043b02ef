import { runServiceMain } from "@rowbase/kit";
import { organizationEnv } from "./config.js";
import { migrateOrganization, startOrganization } from "./service.js";

/** Runs the organization service alone, configured by environment (as in Kubernetes). */
runServiceMain({
  name: "organization",
  env: organizationEnv,
  migrate: migrateOrganization,
  start: startOrganization,
});
