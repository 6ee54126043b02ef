import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { STREAMS } from "@rowbase/kit";
import type pg from "pg";

/**
 * Waits until the events of the last scenario are through (every service's outbox relayed, every
 * durable consumer of the run's streams caught up), so that one scenario's background work (the
 * audit log being written, caches evicted) does not run during the next one. Gives up after
 * `maxMs` and says so.
 */
export async function settle(
  pool: pg.Pool | undefined,
  nats: { url: string; namespace: string } | undefined,
  maxMs: number,
): Promise<string | undefined> {
  const deadline = Date.now() + maxMs;
  const nc = nats ? await connect({ servers: nats.url }) : undefined;
  try {
    const jsm = nc ? await jetstreamManager(nc) : undefined;
    let pending = "";
    while (Date.now() < deadline) {
      const parts: string[] = [];
      if (pool) {
        const schemas = await pool.query<{ table_schema: string }>(
          `select table_schema from information_schema.tables
           where table_name = 'outbox' and table_schema <> 'bench_raw'`,
        );
        for (const { table_schema: schema } of schemas.rows) {
          const counted = await pool.query<{ n: string }>(
            `select count(*) as n from "${schema}".outbox where published_at is null`,
          );
          const n = Number(counted.rows[0]?.n);
          if (n > 0) parts.push(`${n} ${schema} outbox rows`);
        }
      }
      if (jsm && nats) {
        for (const stream of STREAMS) {
          const name = `${nats.namespace}_${stream.name}`;
          try {
            for await (const consumer of jsm.consumers.list(name)) {
              const n = consumer.num_pending + consumer.num_ack_pending;
              if (n > 0) parts.push(`${n} ${stream.name}/${consumer.name}`);
            }
          } catch {
            // A stream nobody created in this run.
          }
        }
      }
      if (parts.length === 0) return undefined;
      pending = parts.join(", ");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return `still pending after ${Math.round(maxMs / 1000)} s: ${pending}`;
  } finally {
    await nc?.close();
  }
}
