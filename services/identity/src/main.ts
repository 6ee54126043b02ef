import {
  ConfigError,
  createCache,
  createLogger,
  parseConfig,
  startObservability,
} from "@rowbase/kit";
import { identityEnv } from "./config.js";
import { migrateIdentity, startIdentity } from "./service.js";

/** Runs the identity service alone, configured by environment (as in Kubernetes). */
async function main() {
  const config = parseConfig(identityEnv, process.env);
  const logger = createLogger("identity", config.LOG_LEVEL);
  if (process.argv.includes("migrate")) {
    const applied = await migrateIdentity(config.DATABASE_URL);
    logger.info({ applied }, "migrations applied");
    return;
  }
  const observability = await startObservability({ serviceName: "identity", config, logger });
  const cache = createCache(config.REDIS_URL);
  const service = await startIdentity(config, { logger, cache });
  logger.info({ port: service.server.port }, "identity listening");
  const shutdown = async () => {
    logger.info("shutting down");
    await service.stop();
    await cache.close();
    await observability.close();
    process.exit(0);
  };
  process.once("SIGTERM", shutdown);
  process.once("SIGINT", shutdown);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`identity failed to start: ${(error as Error).stack ?? error}\n`);
  }
  process.exit(1);
});
