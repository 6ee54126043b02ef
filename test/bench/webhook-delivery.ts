import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { type Api, login, type Tenant } from "./seed.js";
import { percentile } from "./stream-latency.js";

/**
 * What a webhook on the benchmark table did while a scenario wrote to it: the deliveries its
 * receiver got per second, and how long the probe's own writes (one every 100 ms, on the same
 * table) took from their answer to their delivery, in milliseconds.
 */
export interface WebhookDelivery {
  scenario: string;
  /** Deliveries the receiver got during the scenario's load (its warm-up included). */
  deliveries: number;
  seconds: number;
  per_second: number;
  /** The probe's writes delivered, and their latencies. */
  changes: number;
  p50_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
  /** Probe writes not delivered 10 s after the last one (a backlog the webhook had not sent). */
  missing: number;
}

const WRITE_EVERY_MS = 100;
const LATE_MS = 10_000;

/**
 * A webhook receiver on loopback in the benchmark's process: it answers 200 at once and notes
 * each delivery's arrival by path (one path per webhook) and record. Signatures are not checked
 * here (the e2e tests check them with the reference library): the receiver must not be what
 * limits the rate.
 */
export async function startBenchReceiver() {
  const arrivals = new Map<string, { count: number; byRow: Map<number, number> }>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const at = performance.now();
      const seen = arrivals.get(req.url ?? "");
      if (seen) {
        seen.count++;
        const rowId = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { row_id?: number })
          .row_id;
        if (rowId !== undefined && !seen.byRow.has(rowId)) seen.byRow.set(rowId, at);
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    /** WEBHOOK_ALLOWED_TARGETS for it. */
    target: `127.0.0.1:${port}`,
    /** A path of its own to point a webhook at, and what arrives there. */
    path(name: string) {
      const seen = { count: 0, byRow: new Map<number, number>() };
      arrivals.set(name, seen);
      return { url: `http://127.0.0.1:${port}${name}`, seen };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type BenchReceiver = Awaited<ReturnType<typeof startBenchReceiver>>;

/**
 * Points a new webhook (every event, no filter) of the benchmark table at `receiver` and writes
 * a record to that table every 100 ms while the caller's scenario writes there too: the webhook
 * sends the scenario's changes and the probe's, in one queue. `loadEnded` (called as the
 * scenario's load ends) ends the writes and counts the deliveries so far; `stop` waits up to
 * 10 s for the probe's deliveries, deletes the webhook (its backlog with it, so that it does not
 * load the next scenario) and answers the figures.
 */
export async function startWebhookProbe(
  api: Api,
  tenant: Tenant,
  receiver: BenchReceiver,
  scenario: string,
): Promise<{ loadEnded(): void; stop(): Promise<WebhookDelivery> }> {
  const session = await login(api, tenant.email, tenant.password);
  const { url, seen } = receiver.path(`/bench-${Date.now()}`);
  const { webhook } = await api.call<{ webhook: { webhook_id: number } }>(
    "POST",
    "/webhook/create",
    { token: session, query: { table_id: tenant.tableId }, body: { url } },
  );
  const started = performance.now();
  const answered = new Map<number, number>();
  let stopping = false;
  let during: { deliveries: number; seconds: number } | undefined;
  const loadEnded = () => {
    stopping = true;
    during ??= { deliveries: seen.count, seconds: (performance.now() - started) / 1000 };
  };
  const writing = (async () => {
    while (!stopping) {
      const made = await api.call<{ record: { row_id: number } }>(
        "POST",
        `/public/v1/databases/${tenant.databaseId}/tables/${tenant.tableId}/records`,
        { token: tenant.apiToken, body: { data: {} } },
      );
      answered.set(made.record.row_id, performance.now());
      await sleep(WRITE_EVERY_MS);
    }
  })();
  return {
    loadEnded,
    async stop() {
      loadEnded();
      await writing;
      const { deliveries, seconds } = during!;
      const deadline = performance.now() + LATE_MS;
      while (
        [...answered.keys()].some((id) => !seen.byRow.has(id)) &&
        performance.now() < deadline
      ) {
        await sleep(50);
      }
      await api.call("POST", "/webhook/delete", {
        token: session,
        query: { webhook_id: webhook.webhook_id },
      });
      const latencies = [...answered]
        .flatMap(([id, at]) => {
          const arrived = seen.byRow.get(id);
          return arrived === undefined ? [] : [Math.max(0, arrived - at)];
        })
        .sort((a, b) => a - b);
      return {
        scenario,
        deliveries,
        seconds: Math.round(seconds * 10) / 10,
        per_second: Math.round(deliveries / seconds),
        changes: latencies.length,
        p50_ms: percentile(latencies, 50),
        p99_ms: percentile(latencies, 99),
        max_ms: latencies.at(-1) ?? null,
        missing: answered.size - latencies.length,
      };
    },
  };
}
