import type { z } from "zod";
import type { EventBus } from "./bus.js";
import { type Cache, createCache } from "./cache.js";
import { ConfigError, parseConfig } from "./config.js";
import { createBus } from "./create-bus.js";
import { type GrpcServer, type GrpcServerOptions, startGrpcServer } from "./grpc-server.js";
import { createLogger, type Logger } from "./logger.js";
import { startObservability } from "./observability.js";
import { schemaChangeDeadlines } from "./schema-change-deadline.js";

interface BaseServiceConfig {
  METRICS_PORT: number;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  DATABASE_URL: string;
  LOG_LEVEL: string;
  REDIS_URL?: string | undefined;
  NATS_URL?: string | undefined;
}

/** A service started by `serveService`. */
export interface RunningService {
  server: GrpcServer;
  stop(): Promise<void>;
}

/** What `serveService` reads of a service's configuration (`serviceEnv` and its GRPC_PORT). */
interface GrpcServiceConfig {
  GRPC_HOST?: string | undefined;
  GRPC_PORT: number;
  INTERNAL_JWT_SECRET: string;
  INTERNAL_JWT_SECRET_PREVIOUS?: string | undefined;
  /** A schema change's conversion may take this long: the longest call a service serves. */
  SCHEMA_CHANGE_TIMEOUT_SECONDS?: number | undefined;
}

/** A running event consumer. */
interface Consumer {
  stop(): Promise<void>;
}

/**
 * The end of every service's start, once its database, relay and domain are made: its event
 * consumers start in order, then its gRPC server. On stop the server closes first (no call runs
 * on what stops after it), then the consumers in the order they started, then `close` (the
 * relay, the database...). A start that fails stops what had started and runs `close` before it
 * throws, so that it leaves no consumer, relay or connection behind.
 */
export async function serveService(
  config: GrpcServiceConfig,
  logger: Logger,
  grpc: Pick<GrpcServerOptions, "routes" | "services" | "interceptors">,
  parts: {
    consumers?: (() => Promise<Consumer | Consumer[]>)[];
    close(): Promise<void>;
  },
): Promise<RunningService> {
  const consumers: Consumer[] = [];
  const stopParts = async () => {
    for (const consumer of consumers) await consumer.stop();
    await parts.close();
  };
  let server: GrpcServer;
  try {
    for (const start of parts.consumers ?? []) consumers.push(...[await start()].flat());
    server = await startGrpcServer({
      ...grpc,
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      internalSecret: config.INTERNAL_JWT_SECRET,
      previousInternalSecret: config.INTERNAL_JWT_SECRET_PREVIOUS,
      ...(config.SCHEMA_CHANGE_TIMEOUT_SECONDS
        ? {
            longestCallMs: schemaChangeDeadlines(config.SCHEMA_CHANGE_TIMEOUT_SECONDS).requestMs,
          }
        : {}),
    });
  } catch (error) {
    await stopParts();
    throw error;
  }
  return {
    server,
    async stop() {
      await server.close();
      await stopParts();
    },
  };
}

/** What a service is started with and does not own: the process closes them after it. */
export interface ServiceDeps {
  logger: Logger;
  cache: Cache;
  bus: EventBus;
}

export interface ServiceMain<S extends z.ZodType<BaseServiceConfig>> {
  name: string;
  env: S;
  migrate(databaseUrl: string): Promise<string[]>;
  start(
    config: z.output<S>,
    deps: ServiceDeps,
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
    const shutdown = () =>
      shutDown(logger, {
        service: () => service.stop(),
        bus: () => bus.close(),
        cache: () => cache.close(),
        observability: () => observability.close(),
      });
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

/**
 * A process's end after SIGTERM/SIGINT: runs the steps in order, each one even when one before
 * it failed (a service whose stop rejects still has its bus, cache and exporter closed), logs a
 * failed step with its error, and exits, 1 when a step failed (so that a supervisor sees it)
 * and 0 otherwise. It never rejects: from a signal handler, a rejection would be unhandled, and
 * would end the process with the remaining steps skipped and nothing in the log.
 */
export async function shutDown(
  logger: Logger,
  steps: Record<string, () => Promise<unknown>>,
): Promise<never> {
  logger.info("shutting down");
  let failed = false;
  for (const [step, run] of Object.entries(steps)) {
    try {
      await run();
    } catch (error) {
      failed = true;
      logger.error({ step, err: error }, "shutdown step failed");
    }
  }
  process.exit(failed ? 1 : 0);
}
