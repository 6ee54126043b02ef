import { createHash } from "node:crypto";
import type { EntityManager, Kysely } from "@mikro-orm/postgresql";
import type { Pool, PoolClient } from "pg";

type CompiledQuery = Extract<Parameters<Kysely<unknown>["executeQuery"]>[0], { sql: string }>;

/**
 * Runs one statement with `$1, $2, ...` placeholders as a real parameterised query (values travel
 * apart from the SQL text), inside the EntityManager's transaction when it has one.
 *
 * Use it instead of `em.execute`, which in MikroORM 7 quotes its `?` parameters into the SQL
 * text client-side: values from a client (records' query language compiles to placeholders with
 * casts such as `$3::numeric`) must never become SQL text, and quoting a large value (the
 * outbox's payloads, the audit log's rows as one JSON parameter) costs more than the statement.
 *
 * Values as node-postgres sends them: bigint and number as their text, arrays as PostgreSQL
 * arrays, strings as they are; pass JSON as a string (`JSON.stringify`) with a `::jsonb` cast.
 *
 * `prepare`: send it as a named prepared statement (`preparedName`), parsed and planned once per
 * connection. Only for a text from a fixed set: each distinct text stays prepared on every
 * connection of the pool for the connection's life.
 */
export async function query<R extends object = Record<string, unknown>>(
  em: EntityManager,
  sql: string,
  params: readonly unknown[] = [],
  options: { prepare?: boolean } = {},
): Promise<R[]> {
  if (options.prepare) preparedName(sql);
  const compiled: CompiledQuery = {
    sql,
    parameters: params,
    // What kysely's CompiledQuery.raw builds; only plugins would read it.
    query: { kind: "RawNode", sqlFragments: [sql], parameters: [] } as CompiledQuery["query"],
    queryId: { queryId: crypto.randomUUID() },
  };
  const result = await em.getKysely().executeQuery(compiled);
  return result.rows as R[];
}

/**
 * JSON texts as the UTF-8 text of one JSON array, for a parameter read as `$n::text::jsonb`: a
 * Buffer, which node-postgres sends as it is (binary format: for `text`, its bytes). Written
 * straight into one buffer: joining the texts into a string that node-postgres then measures
 * and copies cost the organization's audit store a third of its time for a batch of 1000
 * events (the joined text, wrapped in brackets, is flattened once more to be measured).
 */
export function jsonArrayText(texts: readonly string[]): Buffer {
  let size = 2 + Math.max(texts.length - 1, 0);
  for (const text of texts) size += Buffer.byteLength(text);
  const buffer = Buffer.allocUnsafe(size);
  let at = 0;
  buffer[at++] = 0x5b; // [
  texts.forEach((text, index) => {
    if (index > 0) buffer[at++] = 0x2c; // ,
    at += buffer.write(text, at);
  });
  buffer[at] = 0x5d; // ]
  return buffer;
}

/** Sends one read statement (`$1, $2, ...` placeholders) outside any transaction of the caller. */
export type ReadStatement = <R extends object>(
  sql: string,
  params: readonly unknown[],
) => Promise<R[]>;

/** `query` on a pool of its own (kit `openReadPool`): one statement, outside any transaction. */
export async function queryPool<R extends object = Record<string, unknown>>(
  pool: Pool,
  sql: string,
  params: readonly unknown[] = [],
): Promise<R[]> {
  const result = await pool.query<R>(sql, params as unknown[]);
  return result.rows;
}

/**
 * Runs reads in a transaction whose statements PostgreSQL cancels after `ms`
 * (`statement_timeout`): a list nobody waits for any more (the gateway gives up after 10 s) must
 * not hold a connection of the pool and a backend. A cancelled statement is gRPC
 * DeadlineExceeded (kit's server), the gateway's 503.
 */
export async function withStatementTimeout<T>(
  em: EntityManager,
  ms: number,
  work: (em: EntityManager) => Promise<T>,
): Promise<T> {
  return em.transactional(async (tx) => {
    await query(tx, "select set_config('statement_timeout', $1, true)", [String(ms)], {
      prepare: true,
    });
    return work(tx);
  });
}

/**
 * Statement texts sent as named prepared statements, with their names, the most recently named
 * last. Per-table statements make one text per table (and per schema), so the map keeps the
 * last `PREPARED_TEXTS_MAX`: a text dropped from it is sent unprepared until its next
 * `preparedName`, which names it again, as before (the name is a hash of the text).
 */
const preparedNames = new Map<string, string>();
export const PREPARED_TEXTS_MAX = 5_000;

/**
 * The name under which a statement text is prepared, from a hash of the text; the text is sent
 * as that prepared statement on kit's pools from now on (`prepareNamedStatements`).
 * PostgreSQL then parses and plans it once per connection rather than on every call: measured
 * here, a record lookup by id cost it 73 µs of CPU instead of 95, a one-record insert 163
 * instead of 283. A connection keeps what it prepared until it closes: the pools close theirs
 * after `CONNECTION_LIFETIME_SECONDS` (db.ts), so a process that reads many tables does not
 * keep a plan of each on every connection.
 */
export function preparedName(sql: string): string {
  let name = preparedNames.get(sql);
  if (name === undefined) {
    name = `rb_${createHash("sha256").update(sql).digest("hex").slice(0, 32)}`;
    if (preparedNames.size >= PREPARED_TEXTS_MAX) {
      preparedNames.delete(preparedNames.keys().next().value as string);
    }
  } else {
    preparedNames.delete(sql);
  }
  preparedNames.set(sql, name);
  return name;
}

/**
 * Makes a pool connection send the texts `preparedName` knows as named statements. Kysely (under
 * MikroORM) calls `client.query(text, values)` and has no way to name a statement, so the
 * connection does it: node-postgres then sends the statement's Parse only the first time.
 */
export function prepareNamedStatements(client: PoolClient): void {
  const send = client.query.bind(client) as (...args: unknown[]) => unknown;
  const named = (config: unknown, ...rest: unknown[]) => {
    const name = typeof config === "string" ? preparedNames.get(config) : undefined;
    return name === undefined
      ? send(config, ...rest)
      : send({ name, text: config, values: rest[0] }, ...rest.slice(1));
  };
  client.query = named as PoolClient["query"];
}
