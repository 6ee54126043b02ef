import { type Migration, Migrator } from "@mikro-orm/migrations";
import { type Constructor, MikroORM, type Options } from "@mikro-orm/postgresql";
import pg, { type ClientConfig, type Pool } from "pg";
import type { EventBus } from "./bus.js";
import { STREAMS } from "./events.js";
import type { Logger } from "./logger.js";
import { type MetricsRegistry, processMetricsRegistry, trackDbPool } from "./metrics.js";
import { OutboxEvent, OutboxRelay } from "./outbox.js";
import {
  prepareNamedStatements,
  query,
  queryPool,
  type ReadStatement,
  withStatementTimeout,
} from "./sql.js";

export type Orm = MikroORM;

let defaultPoolMax = 10;

/**
 * How long opening a connection may take: a server that accepts TCP but never answers, or an
 * address whose packets are dropped, would otherwise hold every query until its caller's
 * deadline. Past it the connection fails (node-postgres: "Connection terminated due to
 * connection timeout"), which `isUnreachableDependency` knows: gRPC Unavailable, the
 * gateway's 503. It is shorter than the 8 s service-to-service deadline, so the caller gets
 * that answer rather than a deadline of its own. It bounds opening a connection only, not a
 * wait for a busy pool's next free one: slow pages under load queue there for seconds and
 * still answer (pg-pool's own `connectionTimeoutMillis` would bound both alike).
 */
export const DB_CONNECT_TIMEOUT_MS = 5_000;

/**
 * node-postgres's client, opening its connection within `timeoutMs`. The pool's options are
 * copied with their property descriptors: pg-pool keeps the password as a property that is not
 * enumerable, which a spread would drop (and the server's password request would find none).
 */
export function clientWithConnectTimeout(timeoutMs: number): typeof pg.Client {
  return class extends pg.Client {
    constructor(config?: string | ClientConfig) {
      const options: ClientConfig =
        typeof config === "string"
          ? { connectionString: config }
          : Object.defineProperties({}, Object.getOwnPropertyDescriptors(config ?? {}));
      options.connectionTimeoutMillis = timeoutMs;
      super(options);
    }
  };
}

/**
 * The connection pool size of every ORM created from now on in this process. A service alone
 * keeps 10; the one-process launcher runs six services against one PostgreSQL and asks for
 * fewer each, so that a laptop's (or a test run's) server is not out of connections.
 */
export function setDefaultPoolMax(max: number): void {
  defaultPoolMax = max;
}

/** The connections a service may hold for `configured` (DATABASE_POOL_MAX): it, else the default. */
export function poolMaxOf(configured: number | undefined): number {
  return configured ?? defaultPoolMax;
}

export interface ReadPoolOptions {
  url: string;
  /** The service's own schema: the connections' search_path, and the pool gauges' label. */
  schema: string;
  max: number;
  /** PostgreSQL's `statement_timeout` on every connection of the pool. */
  statementTimeoutMs: number;
  logger: Logger;
  /** `DB_CONNECT_TIMEOUT_MS` when absent. */
  connectTimeoutMs?: number;
  /** Where the pool gauges are; the process's registry when absent. */
  metrics?: MetricsRegistry;
}

/**
 * A pool for reads of one statement each, outside any transaction (`queryPool`), whose
 * statements PostgreSQL cancels after `statementTimeoutMs`: the timeout is set as each
 * connection opens, so a read costs one round trip. In the ORM's pool a timeout takes a
 * transaction around `SET LOCAL` (begin, set, the read, commit: four round trips, which cost a
 * list of 50 records 10-20 % of its throughput). Its connections count in the schema's pool
 * gauges; a connection that fails while idle is logged and replaced.
 */
export function openReadPool(options: ReadPoolOptions): Pool {
  if (!/^[a-z_][a-z0-9_]*$/.test(options.schema)) {
    throw new Error(`invalid schema name ${options.schema}`);
  }
  if (!Number.isSafeInteger(options.statementTimeoutMs) || options.statementTimeoutMs < 1) {
    throw new Error(`invalid statement timeout ${options.statementTimeoutMs}`);
  }
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max,
    idleTimeoutMillis: 5_000,
    options: `-c search_path=${options.schema} -c statement_timeout=${options.statementTimeoutMs}`,
    Client: clientWithConnectTimeout(options.connectTimeoutMs ?? DB_CONNECT_TIMEOUT_MS),
  });
  pool.on("error", (error) =>
    options.logger.warn({ err: error, schema: options.schema }, "idle read connection failed"),
  );
  trackDbPool(options.metrics ?? processMetricsRegistry(), options.schema, pool);
  return pool;
}

export interface OrmOptions {
  url: string;
  /** The service's own schema; it is also the connection's search_path. */
  schema: string;
  entities: NonNullable<Options["entities"]>;
  /** Committed migrations, in order. */
  migrations: Constructor<Migration>[];
  logger?: Logger;
  poolSize?: number;
  /** `DB_CONNECT_TIMEOUT_MS` when absent. */
  connectTimeoutMs?: number;
  /** Where the pool gauges are; the process's registry when absent. */
  metrics?: MetricsRegistry;
}

/** One MikroORM instance per service, confined to the service's schema. */
export async function createOrm(options: OrmOptions): Promise<Orm> {
  return MikroORM.init({
    clientUrl: options.url,
    schema: options.schema,
    entities: [OutboxEvent, ...options.entities],
    extensions: [Migrator],
    pool: { min: 0, max: options.poolSize ?? defaultPoolMax, idleTimeoutMillis: 5_000 },
    driverOptions: {
      options: `-c search_path=${options.schema}`,
      // Options here reach the pg Pool as they are; the pool makes its clients with `Client`.
      Client: clientWithConnectTimeout(options.connectTimeoutMs ?? DB_CONNECT_TIMEOUT_MS),
      onPoolCreated: (pool: Pool) => {
        trackDbPool(options.metrics ?? processMetricsRegistry(), options.schema, pool);
        pool.on("connect", prepareNamedStatements);
      },
    },
    migrations: {
      migrationsList: options.migrations.map((migration) => ({
        name: migration.name,
        class: migration,
      })),
      schema: options.schema,
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      silent: true,
    },
    debug: false,
    allowGlobalContext: false,
    logger: (message) => options.logger?.debug(message),
  });
}

/**
 * How a service sends its lists' statements: on `pool` (`openReadPool`, whose connections carry
 * the timeout: one round trip), else in a transaction of the ORM's pool around `SET LOCAL
 * statement_timeout` (`withStatementTimeout`: four).
 */
export function listReads(orm: Orm, pool: Pool | undefined, timeoutMs: number): ReadStatement {
  return pool
    ? (sql, params) => queryPool(pool, sql, params)
    : (sql, params) =>
        withStatementTimeout(orm.em.fork(), timeoutMs, (em) => query(em, sql, params));
}

/**
 * A service's own schema: `open` makes its ORM (for the service and its tests), `migrate` opens
 * one for the migrations alone, applies them and closes it (the `migrate` command, the
 * one-process launcher, the test harnesses), and `openPublishing` is a publishing service's
 * start: the bus's streams made sure of, its ORM, and the relay of its outbox (not started).
 * `openPublishingWithLists` also gives the service `read` for its lists, on half its
 * connections (rounded down) in a pool of their own whose connections carry the list timeout,
 * so that a list is one statement without a transaction; with a single connection in all, lists
 * take that transaction in the ORM's pool (`listReads`). `closeLists` ends that pool.
 */
export function serviceDatabase(
  schema: string,
  entities: OrmOptions["entities"],
  migrations: OrmOptions["migrations"],
) {
  const open = (url: string, logger?: Logger, poolSize?: number): Promise<Orm> =>
    createOrm({ url, schema, entities, migrations, logger, poolSize });
  type Config = { DATABASE_URL: string; DATABASE_POOL_MAX?: number | undefined };
  type Deps = { logger: Logger; bus: EventBus };
  const openPublishing = async (
    config: Config,
    deps: Deps,
  ): Promise<{ orm: Orm; relay: OutboxRelay }> => {
    await deps.bus.ensureStreams(STREAMS);
    const orm = await open(config.DATABASE_URL, deps.logger, config.DATABASE_POOL_MAX);
    return { orm, relay: new OutboxRelay(orm, deps.bus, deps.logger) };
  };
  return {
    open,
    openPublishing,
    async openPublishingWithLists(
      config: Config,
      deps: Deps,
      listTimeoutMs: number,
    ): Promise<{
      orm: Orm;
      relay: OutboxRelay;
      read: ReadStatement;
      closeLists(): Promise<void>;
    }> {
      const connections = poolMaxOf(config.DATABASE_POOL_MAX);
      const listConnections = Math.floor(connections / 2);
      const { orm, relay } = await openPublishing(
        { ...config, DATABASE_POOL_MAX: connections - listConnections },
        deps,
      );
      const pool =
        listConnections > 0
          ? openReadPool({
              url: config.DATABASE_URL,
              schema,
              max: listConnections,
              statementTimeoutMs: listTimeoutMs,
              logger: deps.logger,
            })
          : undefined;
      return {
        orm,
        relay,
        read: listReads(orm, pool, listTimeoutMs),
        closeLists: async () => {
          await pool?.end();
        },
      };
    },
    async migrate(url: string): Promise<string[]> {
      const orm = await open(url);
      try {
        return await migrate(orm, schema);
      } finally {
        await orm.close();
      }
    },
  };
}

/** Creates the schema if needed and applies pending migrations; returns their names. */
export async function migrate(orm: Orm, schema: string): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  await orm.em.fork().execute(`create schema if not exists "${schema}"`);
  const applied = await orm.migrator.up();
  return applied.map((m) => m.name);
}
