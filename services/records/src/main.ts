import {
  ConfigError,
  createBus,
  createCache,
  createLogger,
  parseConfig,
  startObservability,
} from "@rowbase/kit";
import { recordsEnv } from "./config.js";
import { migrateRecords, startRecords } from "./service.js";

/** Runs the records service alone, configured by environment (as in Kubernetes). */
async function main() {
  const config = parseConfig(recordsEnv, process.env);
  const logger = createLogger("records", config.LOG_LEVEL);
  if (process.argv.includes("migrate")) {
    const applied = await migrateRecords(config.DATABASE_URL);
    logger.info({ applied }, "migrations applied");
    return;
  }
  const observability = await startObservability({ serviceName: "records", config, logger });
  const cache = createCache(config.REDIS_URL);
  const bus = await createBus(config.NATS_URL, logger);
  const service = await startRecords(config, { logger, cache, bus });
  logger.info({ port: service.server.port }, "records listening");
  const shutdown = async () => {
    logger.info("shutting down");
    await service.stop();
    await bus.close();
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
    process.stderr.write(`records failed to start: ${(error as Error).stack ?? error}\n`);
  }
  process.exit(1);
});
