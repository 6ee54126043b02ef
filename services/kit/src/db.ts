import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Migration, Migrator } from "@mikro-orm/migrations";
import {
  type Constructor,
  type EntityManager,
  MikroORM,
  type Options,
} from "@mikro-orm/postgresql";
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
    maxLifetimeSeconds: CONNECTION_LIFETIME_SECONDS,
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

/**
 * How long a pool keeps a connection (closed when next released past it). A connection holds
 * the plans of the statements it prepared (`preparedName`) and PostgreSQL's caches of every
 * table it touched, one set per user table read: recycling it bounds that to the tables of the
 * last quarter hour, at the cost of one reconnect per connection in that time.
 */
export const CONNECTION_LIFETIME_SECONDS = 900;

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
      maxLifetimeSeconds: CONNECTION_LIFETIME_SECONDS,
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
 * `options.sql` is the service's folder of repeatable SQL files (`migrate`).
 */
export function serviceDatabase(
  schema: string,
  entities: OrmOptions["entities"],
  migrations: OrmOptions["migrations"],
  options: MigrateOptions = {},
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
        return await migrate(orm, schema, options);
      } finally {
        await orm.close();
      }
    },
  };
}

export interface MigrateOptions {
  /**
   * A folder of repeatable SQL files (`applyRepeatableSql`), applied after the migrations;
   * `packageDirectory` finds the package's own from its code.
   */
  sql?: string;
}

/**
 * Migrates a service's schema in one transaction that first takes the schema's migration lock,
 * so that two replicas migrating at once take turns and the second finds the first's work done:
 * creates the schema if needed, applies the pending migrations in order, then the repeatable
 * SQL files of `options.sql` that changed. A failure leaves nothing of the run's migrations and
 * files behind. Returns the names of the migrations and then of the files it applied.
 */
export async function migrate(
  orm: Orm,
  schema: string,
  options: MigrateOptions = {},
): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  return orm.em.fork().transactional(async (em) => {
    await query(em, "select pg_advisory_xact_lock(hashtextextended($1, 0))", [
      `kit.migrate:${schema}`,
    ]);
    // The schema and the migrator's own table, under the lock but on another connection of the
    // pool, committed at once: the migrator looks for its table outside the transaction.
    await orm.em.fork().execute(`create schema if not exists "${schema}"`);
    await orm.migrator.getExecuted();
    const applied = await orm.migrator.up({ transaction: em.getTransactionContext() });
    const files = options.sql ? await applyRepeatableSql(em, schema, options.sql) : [];
    return [...applied.map((m) => m.name), ...files];
  });
}

/**
 * A migration statement that has PostgreSQL compress the large values (over about 2 KB, stored
 * out of line) of `columns` ("table.column", in the migration's schema) with lz4 instead of its
 * default pglz: a batch write's change log, outbox and audit rows hold hundreds of kilobytes of
 * JSON each, and pglz compressing them was a quarter of PostgreSQL's time in a batch import,
 * lz4 about a tenth of that. Only values written afterwards are affected; PostgreSQL reads
 * either. A server built without lz4 keeps pglz (the statement then only raises a notice).
 */
export function lz4CompressionSql(columns: readonly `${string}.${string}`[]): string {
  const alters = columns.map((column) => {
    const [table, name] = column.split(".") as [string, string];
    return `alter table "${table}" alter column "${name}" set compression lz4;`;
  });
  return `do $lz4$ begin
  ${alters.join("\n  ")}
exception when feature_not_supported then
  raise notice 'this PostgreSQL has no lz4: large values stay compressed with pglz';
end $lz4$;`;
}

/**
 * Applies the repeatable SQL files of `folder` (every `*.sql`, in name order) whose text changed
 * since they were last applied to `schema`: each file states one rule in force, such as a
 * function as `create or replace function`, so that it can be read in one place rather than by
 * replaying the migrations that changed it. A file is applied again whenever its SHA-256
 * differs from the one recorded in `<schema>.repeatable_sql`, so it must be safe to run again
 * over its previous version. Runs in the caller's transaction (`migrate`'s, which holds the
 * schema's migration lock), with `schema` as the search path: a function made with
 * `set search_path from current` keeps it. Returns the names of the files it applied.
 */
export async function applyRepeatableSql(
  em: EntityManager,
  schema: string,
  folder: string,
): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  await query(em, `set local search_path to "${schema}"`);
  await query(
    em,
    `create table if not exists repeatable_sql (
       name text primary key,
       checksum text not null,
       applied_at timestamptz not null default now()
     )`,
  );
  const recorded = new Map(
    (
      await query<{ name: string; checksum: string }>(
        em,
        "select name, checksum from repeatable_sql",
      )
    ).map((row) => [row.name, row.checksum]),
  );
  const names = (await readdir(folder)).filter((name) => name.endsWith(".sql")).sort();
  const applied: string[] = [];
  for (const name of names) {
    const text = await readFile(join(folder, name), "utf8");
    const checksum = createHash("sha256").update(text).digest("hex");
    if (recorded.get(name) === checksum) continue;
    // Without parameters the text goes as a simple query, which may hold several statements.
    await query(em, text);
    await query(
      em,
      `insert into repeatable_sql (name, checksum) values ($1, $2)
       on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`,
      [name, checksum],
    );
    applied.push(name);
  }
  return applied;
}

/**
 * The directory of the package that the module `moduleUrl` (its `import.meta.url`) belongs to:
 * the nearest one above it holding a package.json. It is the same from `src/` (tsx, vitest) and
 * from `dist/src/` (the image), so files kept beside package.json, such as a service's `sql/`,
 * are found from either.
 */
export function packageDirectory(moduleUrl: string): string {
  const start = dirname(fileURLToPath(moduleUrl));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}
