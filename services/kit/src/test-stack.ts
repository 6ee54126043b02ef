import pg from "pg";
import type { BusMessage } from "./bus.js";
import { RedisCache } from "./cache.js";
import { STREAMS } from "./events.js";
import { createLogger, type Logger } from "./logger.js";
import { NatsBus } from "./nats-bus.js";
import type { Principal } from "./principal.js";
import {
  createTestDatabase,
  type MailCatcher,
  signedAs,
  startMailCatcher,
  testInfra,
  uniqueName,
} from "./testing.js";

/** The internal secret of every service of a test stack, which tests sign principals with. */
export const TEST_SECRET = "test-internal-secret-of-at-least-32-chars";

/** Call options carrying `who` as a principal signed as the stack's services expect it. */
export const as = (who: { id: bigint } | Principal) => signedAs(TEST_SECRET, who);

/** What a service's `start…` function needs besides its configuration. */
export interface TestServiceDeps {
  logger: Logger;
  cache: RedisCache;
  bus: NatsBus;
}

/** A service started on a test stack. */
export interface ServedService<C, S> {
  service: S;
  config: C;
  /** `http://127.0.0.1:<port>` of its gRPC server. */
  url: string;
  /** Stops it now rather than with the stack (a restart, a replica going away). */
  stop(): Promise<void>;
}

/**
 * The shared ground of one service test run: a fresh database, a mail catcher, Redis under a
 * unique key prefix, NATS under a unique namespace, and connections to the database for direct
 * queries. The services a harness starts on it (`serve`) are stopped with it, last started first.
 */
export interface TestStack {
  databaseUrl: string;
  redisUrl: string;
  natsUrl: string;
  /** The Redis key prefix (with a colon after it) and the NATS namespace of this stack. */
  namespace: string;
  mail: MailCatcher;
  logger: Logger;
  cache: RedisCache;
  bus: NatsBus;
  /** Direct connections to the test database (schema-qualified queries). */
  db: pg.Pool;
  /** Every message published on the streams passed to `record` since then. */
  events: BusMessage[];
  /**
   * Starts a service's gRPC server on a free port against the stack: its configuration is `env`
   * over the database, the internal secret and the loopback address.
   */
  serve<C, S extends { server: { port: number }; stop(): Promise<void> }>(
    schema: { parse(env: Record<string, string>): C },
    start: (config: C, deps: TestServiceDeps) => Promise<S>,
    env?: Record<string, string>,
  ): Promise<ServedService<C, S>>;
  /** Collects into `events` what is published on `streams` (CATALOG, ORG…) from now on. */
  record(streams: string[]): Promise<void>;
  /** Runs `cleanup` when the stack stops, before what was set up before it. */
  onStop(cleanup: () => Promise<void>): void;
  stop(): Promise<void>;
}

/** Starts a test stack; `name` (the service under test) names its logger, key prefix and namespace. */
export async function startTestStack(
  name: string,
  options: { databaseLocale?: string; natsUrl?: string } = {},
): Promise<TestStack> {
  const infra = await testInfra();
  const database = await createTestDatabase(
    infra.databaseUrl,
    options.databaseLocale ? { locale: options.databaseLocale } : {},
  );
  const mail = await startMailCatcher();
  const logger = createLogger(`${name}-test`, process.env.TEST_LOG_LEVEL ?? "silent");
  const namespace = uniqueName(name);
  const natsUrl = options.natsUrl ?? infra.natsUrl;
  const cache = RedisCache.connect(infra.redisUrl, `${namespace}:`);
  const bus = await NatsBus.connect(natsUrl, logger, namespace);
  const db = new pg.Pool({ connectionString: database.url, max: 4 });
  const events: BusMessage[] = [];
  const consumers: { stop(): Promise<void> }[] = [];
  const cleanups: (() => Promise<void>)[] = [
    () => database.drop(),
    () => mail.close(),
    () => cache.close(),
    async () => {
      await bus.deleteStreams(STREAMS.map((s) => s.name));
      await bus.close();
    },
  ];
  const onStop = (cleanup: () => Promise<void>) => {
    cleanups.push(cleanup);
  };

  return {
    databaseUrl: database.url,
    redisUrl: infra.redisUrl,
    natsUrl,
    namespace,
    mail,
    logger,
    cache,
    bus,
    db,
    events,
    async serve(schema, start, env = {}) {
      const config = schema.parse({
        DATABASE_URL: database.url,
        INTERNAL_JWT_SECRET: TEST_SECRET,
        GRPC_HOST: "127.0.0.1",
        GRPC_PORT: "0",
        ...env,
      });
      const service = await start(config, { logger, cache, bus });
      const stop = () => service.stop();
      onStop(stop);
      return {
        service,
        config,
        url: `http://127.0.0.1:${service.server.port}`,
        async stop() {
          cleanups.splice(cleanups.indexOf(stop), 1);
          await service.stop();
        },
      };
    },
    async record(streams) {
      consumers.push(
        ...(await Promise.all(
          streams.map((stream) =>
            bus.consume(
              {
                stream,
                durable: `test_${stream.toLowerCase()}`,
                subject: `${stream.toLowerCase()}.>`,
              },
              async (message) => {
                events.push(message);
              },
            ),
          ),
        )),
      );
    },
    onStop,
    async stop() {
      for (const consumer of consumers) await consumer.stop();
      await db.end();
      for (const cleanup of cleanups.reverse()) await cleanup();
    },
  };
}
