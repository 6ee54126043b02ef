import type { z } from "zod";
import { createBus, type EventBus } from "./bus.js";
import { type Cache, createCache } from "./cache.js";
import { ConfigError, parseConfig } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { startObservability } from "./observability.js";

interface BaseServiceConfig {
  METRICS_PORT: number;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  DATABASE_URL: string;
  LOG_LEVEL: string;
  REDIS_URL?: string | undefined;
  NATS_URL?: string | undefined;
}

export interface ServiceMain<S extends z.ZodType<BaseServiceConfig>> {
  name: string;
  env: S;
  migrate(databaseUrl: string): Promise<string[]>;
  start(
    config: z.output<S>,
    deps: { logger: Logger; cache: Cache; bus: EventBus },
  ): Promise<{ server: { port: number }; stop(): Promise<void> }>;
}

/**
 * A service's process entry, the same for every service (as in Kubernetes): configuration from
 * the environment, `migrate` as an argument applies the migrations and exits, otherwise the
 * service runs until SIGTERM/SIGINT and then stops taking calls, drains and closes.
 */
export function runServiceMain<S extends z.ZodType<BaseServiceConfig>>(spec: ServiceMain<S>): void {
  const main = async () => {
    const config = parseConfig(spec.env, process.env);
    const logger = createLogger(spec.name, config.LOG_LEVEL);
    if (process.argv.includes("migrate")) {
      const applied = await spec.migrate(config.DATABASE_URL);
      logger.info({ applied }, "migrations applied");
      return;
    }
    const observability = await startObservability({ serviceName: spec.name, config, logger });
    const cache = createCache(config.REDIS_URL);
    const bus = await createBus(config.NATS_URL, logger);
    const service = await spec.start(config, { logger, cache, bus });
    logger.info({ port: service.server.port }, `${spec.name} listening`);
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
  };
  main().catch((error: unknown) => {
    process.stderr.write(
      error instanceof ConfigError
        ? `${error.message}\n`
        : `${spec.name} failed to start: ${(error as Error).stack ?? error}\n`,
    );
    process.exit(1);
  });
}
