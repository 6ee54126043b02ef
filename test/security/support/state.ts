import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { STREAMS } from "@rowbase/kit";
import type { TestSystem } from "@rowbase/standalone/testing";
import pg from "pg";
import { expect } from "vitest";

/**
 * Before/after state of a running system, for proving that a refused request changed nothing:
 * every table of every service schema (row count and a hash of the rows), which covers the
 * audit log (organization.audit_event), usage counters kept in the database, sessions, tokens,
 * files and records; and the quota counters the gateway keeps in the shared cache.
 */

const SCHEMAS = ["identity", "organization", "catalog", "records", "files", "webhooks"];

/**
 * The schemas of the organizations' user tables (`org_<organization id>`), which hold the records
 * of their tables, a table each: they come and go with organizations, tables and fields, so the
 * snapshot's statement is built again whenever their tables or columns change.
 */
const USER_TABLE_SCHEMAS = "^org_[0-9]+$";

/**
 * Bookkeeping that moves on its own and is not state a request may change: the outbox relay
 * publishes and prunes, consumers remember processed ids, and the daily usage statistics are
 * fed asynchronously by the API-call events (the cache counters below are compared instead).
 */
const IGNORED_TABLES = new Set([
  "outbox",
  "processed_event",
  "usage_daily",
  "usage_daily_token",
  "mikro_orm_migrations",
]);

/** A token's last use is bookkeeping too (a refused call may still have presented it). */
const IGNORED_COLUMNS = new Set(["last_used_at"]);

export interface Snapshot {
  /** `schema.table` -> `count:hash` */
  tables: Record<string, string>;
  /** `api-calls:<org>` / `transfer:<org>` -> the month's counter */
  counters: Record<string, number>;
  /** Events not yet published by any outbox or handled by every consumer (settled: none). */
  pending: number;
}

export interface ExpectedChanges {
  /** Tables (`schema.table`) that may change. */
  tables?: string[];
  /** Expected counter deltas, e.g. `{ "api-calls:12": 1 }`; every other counter stays. */
  counters?: Record<string, number>;
}

const PENDING = "(pending outbox events)";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class StateProbe {
  private readonly organizations = new Set<number>();
  private query: { name: string; text: string; shape: string } | undefined;
  private built = 0;
  /** The last settled snapshot, and whether a request went to the gateway since. */
  private last: Snapshot | undefined;
  private dirty = true;

  private constructor(
    private readonly sys: TestSystem,
    private readonly db: pg.Client,
    private readonly nats: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {}

  static async open(sys: TestSystem): Promise<StateProbe> {
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    const nats = await connect({ servers: sys.natsUrl });
    return new StateProbe(sys, db, nats, await jetstreamManager(nats));
  }

  async close(): Promise<void> {
    await this.db.end();
    await this.nats.close();
  }

  /**
   * Events published but not yet handled by every durable consumer of the system's streams
   * (the audit log's writer among them): the outboxes can be empty while an event is on its way.
   */
  private async unconsumed(): Promise<number> {
    let n = 0;
    for (const stream of STREAMS) {
      try {
        for await (const consumer of this.jsm.consumers.list(
          `${this.sys.namespace}_${stream.name}`,
        )) {
          n += consumer.num_pending + consumer.num_ack_pending;
        }
      } catch {
        // A stream no service of this system created.
      }
    }
    return n;
  }

  /** Organizations whose quota counters are part of the snapshot. */
  track(...organizationIds: number[]): void {
    for (const id of organizationIds) this.organizations.add(id);
  }

  private async prepare(): Promise<{ name: string; text: string }> {
    const columns = await this.db.query<{ schema: string; table: string; column: string }>(
      `select n.nspname as schema, c.relname as table, a.attname as column
         from pg_class c
         join pg_namespace n on n.oid = c.relnamespace
         join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        where c.relkind in ('r', 'p') and (n.nspname = any($1) or n.nspname ~ $2)
        order by n.nspname, c.relname, a.attnum`,
      [SCHEMAS, USER_TABLE_SCHEMAS],
    );
    const shape = JSON.stringify(columns.rows);
    if (this.query?.shape === shape) return this.query;
    const tables = new Map<string, string[]>();
    for (const { schema, table, column } of columns.rows) {
      if (IGNORED_TABLES.has(table) || table.startsWith("audit_event_")) continue;
      const key = `${schema}.${table}`;
      if (!tables.has(key)) tables.set(key, []);
      if (!IGNORED_COLUMNS.has(column)) tables.get(key)!.push(column);
    }
    expect(tables.size, "tables found in the service schemas").toBeGreaterThan(15);
    const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
    let text = [...tables]
      .map(([key, cols]) => {
        const [schema, table] = key.split(".") as [string, string];
        // Row count and an order-independent sum of 64-bit row hashes: any insert, update or
        // delete shows, without sorting every table on every snapshot.
        const row = `row(${cols.map(ident).join(", ")})::text`;
        return `select '${key}' as key, count(*)::text || ':' || coalesce(sum(hashtextextended(${row}, 0)::numeric), 0)::text as value from ${ident(schema)}.${ident(table)}`;
      })
      .join("\nunion all\n");
    const outboxes = await this.db.query<{ schema: string }>(
      `select table_schema as schema from information_schema.tables
        where table_schema = any($1) and table_name = 'outbox'`,
      [SCHEMAS],
    );
    const pending = outboxes.rows
      .map(
        ({ schema }) => `(select count(*) from ${ident(schema)}.outbox where published_at is null)`,
      )
      .join(" + ");
    text += `\nunion all\nselect '${PENDING}', (${pending})::text`;
    // A named statement is planned once per connection; each shape of the tables is another one.
    this.built += 1;
    this.query = { name: `security-snapshot-${this.built}`, text, shape };
    return this.query;
  }

  /**
   * The snapshot statement's rows. A user table or column dropped between reading the catalog
   * and the snapshot (an organization, table or field deleted meanwhile) fails it: read the
   * tables again.
   */
  private async snapshotRows(): Promise<pg.QueryResult<{ key: string; value: string }>> {
    for (let attempt = 1; ; attempt++) {
      const statement = await this.prepare();
      try {
        return await this.db.query<{ key: string; value: string }>(statement);
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt === 5 || (code !== "42P01" && code !== "42703" && code !== "3F000")) {
          throw error;
        }
      }
    }
  }

  async take(): Promise<Snapshot> {
    const result = await this.snapshotRows();
    const rows = result.rows.filter((r) => r.key !== PENDING);
    const pending =
      Number(result.rows.find((r) => r.key === PENDING)?.value ?? 0) + (await this.unconsumed());
    const month = new Date().toISOString().slice(0, 7);
    const keys = [...this.organizations].flatMap((org) =>
      ["api-calls", "transfer"].map((counter) => `${counter}:${org}`),
    );
    const values = await Promise.all(
      keys.map((key) => this.sys.system.cache.get(`${key}:${month}`)),
    );
    const counters = Object.fromEntries(keys.map((key, i) => [key, Number(values[i] ?? 0)]));
    return {
      tables: Object.fromEntries(rows.map((r) => [r.key, r.value])),
      counters,
      pending,
    };
  }

  /**
   * A snapshot once the system is at rest: nothing left in any outbox and two reads in a row
   * alike, so the asynchronous consequences of what came before (audit entries written by the
   * organization service's consumers, usage counters) are in it.
   */
  async settled(): Promise<Snapshot> {
    let previous = await this.take();
    for (const started = Date.now(); Date.now() - started < 10_000; ) {
      await sleep(previous.pending === 0 ? 40 : 100);
      const current = await this.take();
      if (current.pending === 0 && same(previous, current)) return current;
      previous = current;
    }
    return previous;
  }

  /**
   * Runs `attack` (which asserts the answers) between two settled snapshots and asserts that
   * nothing changed but what `expected` allows.
   */
  async unchanged<T>(attack: () => Promise<T>, expected: ExpectedChanges = {}): Promise<T> {
    // With no request since the last settled snapshot, the state is still that one.
    const before = !this.dirty && this.last ? this.last : await this.settled();
    this.dirty = true;
    const result = await attack();
    const after = await this.settled();
    this.last = after;
    this.dirty = false;
    expectUnchanged(before, after, expected);
    return result;
  }

  /** Something may have changed the state (the fixture calls it for every request it sees). */
  touch(): void {
    this.dirty = true;
  }
}

function same(a: Snapshot, b: Snapshot): boolean {
  return (
    JSON.stringify(a.tables) === JSON.stringify(b.tables) &&
    JSON.stringify(a.counters) === JSON.stringify(b.counters)
  );
}

export function expectUnchanged(before: Snapshot, after: Snapshot, expected: ExpectedChanges = {}) {
  const allowed = new Set(expected.tables ?? []);
  const changedTables = Object.keys({ ...before.tables, ...after.tables }).filter(
    (key) => !allowed.has(key) && before.tables[key] !== after.tables[key],
  );
  expect(changedTables, "tables that changed").toEqual([]);
  const deltas: Record<string, number> = {};
  const wanted: Record<string, number> = {};
  for (const key of Object.keys({ ...before.counters, ...after.counters })) {
    deltas[key] = (after.counters[key] ?? 0) - (before.counters[key] ?? 0);
    wanted[key] = expected.counters?.[key] ?? 0;
  }
  expect(deltas, "quota counter changes").toEqual(wanted);
}
