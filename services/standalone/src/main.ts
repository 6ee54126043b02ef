import path from "node:path";
import { ConfigError, createLogger, parseConfig, shutDown, startObservability } from "@rowbase/kit";
import { standaloneEnv } from "./config.js";
import { startEmbeddedPostgres } from "./embedded-postgres.js";
import { loadOrCreateSecrets } from "./secrets.js";
import { startSystem } from "./system.js";

/**
 * `npm start`: the whole of Rowbase in one process on embedded defaults. Setting DATABASE_URL,
 * REDIS_URL or NATS_URL switches that piece to the real server.
 */
async function main() {
  const config = parseConfig(standaloneEnv, process.env);
  const logger = createLogger("rowbase", config.LOG_LEVEL);
  const observability = await startObservability({ serviceName: "rowbase", config, logger });
  const dataDir = path.resolve(config.DATA_DIR);
  const secrets = await loadOrCreateSecrets(dataDir);
  const postgres = config.DATABASE_URL
    ? undefined
    : await startEmbeddedPostgres(dataDir, secrets.postgresPassword, logger);
  const system = await startSystem({
    env: process.env,
    databaseUrl: config.DATABASE_URL ?? postgres!.url,
    redisUrl: config.REDIS_URL,
    natsUrl: config.NATS_URL,
    internalJwtSecret: process.env.INTERNAL_JWT_SECRET || secrets.internalJwtSecret,
    fileUrlSecret: process.env.FILE_URL_SECRET || secrets.fileUrlSecret,
    filesDir: path.join(dataDir, "files"),
    jwtSigningKeys: process.env.JWT_SIGNING_KEYS || JSON.stringify(secrets.jwtSigningKeys),
    port: config.PORT,
    grpcPorts:
      config.GRPC_BASE_PORT === 0
        ? undefined
        : {
            identity: config.GRPC_BASE_PORT,
            organization: config.GRPC_BASE_PORT + 1,
            catalog: config.GRPC_BASE_PORT + 2,
            records: config.GRPC_BASE_PORT + 3,
            files: config.GRPC_BASE_PORT + 4,
            webhooks: config.GRPC_BASE_PORT + 5,
          },
    logger,
  });
  logger.info(
    {
      url: `http://localhost:${system.port}`,
      postgres: postgres ? "embedded" : "external",
      redis: system.cache.kind,
      nats: system.bus.kind,
    },
    "Rowbase is running",
  );
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    void shutDown(logger, {
      system: () => system.stop(),
      postgres: async () => postgres?.stop(),
      observability: () => observability.close(),
    });
  };
  // The embedded-postgres package stops its servers, then exits the process, on these signals
  // itself (async-exit-hook): the services lost their database halfway through their stop, and
  // the process could exit before they were done. Here the database stops last, after them. A
  // closed terminal's SIGHUP too: PostgreSQL, which gets it as well, would otherwise outlive us.
  // Ours is added before the others go, so the signal never has no listener: Node would close
  // its watcher, and a signal already caught but not yet handled would be lost.
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    const others = process.listeners(signal);
    process.on(signal, shutdown);
    if (postgres) for (const other of others) process.off(signal, other);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    error instanceof ConfigError
      ? `${error.message}\n`
      : `Rowbase failed to start: ${(error as Error).stack ?? error}\n`,
  );
  process.exit(1);
});
