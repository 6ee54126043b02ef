import { runServiceMain } from "@rowbase/kit";
import { identityEnv } from "./config.js";
import { migrateIdentity, startIdentity } from "./service.js";

/** Runs the identity service alone, configured by environment (as in Kubernetes). */
runServiceMain({
  name: "identity",
  env: identityEnv,
  migrate: migrateIdentity,
  start: (config, { logger, cache }) => startIdentity(config, { logger, cache }),
});
