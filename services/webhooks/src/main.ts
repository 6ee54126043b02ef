import { runServiceMain } from "@rowbase/kit";
import { webhooksEnv } from "./config.js";
import { migrateWebhooks, startWebhooks } from "./service.js";

/** Runs the webhooks service alone, configured by environment (as in Kubernetes). */
runServiceMain({
  name: "webhooks",
  env: webhooksEnv,
  migrate: migrateWebhooks,
  start: startWebhooks,
});
