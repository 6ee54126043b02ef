import { setTimeout as sleep } from "node:timers/promises";
import { openEventStream } from "../e2e/support/event-stream.js";
import { type Api, login, type Tenant } from "./seed.js";

/**
 * How long a change takes from its write's answer to its event on an open change stream:
 * percentiles over the probe's own writes (one every 100 ms), in milliseconds.
 */
export interface StreamLatency {
  changes: number;
  p50_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
  /** Writes whose event had not come 5 s after the last write. */
  missing: number;
}

const WRITE_EVERY_MS = 100;
const LATE_MS = 5_000;

/** The p-th percentile of sorted values (nearest rank), null for none. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * Opens a change stream on a table of its own and writes to that table while the caller's
 * scenario loads the system: the stream then shows what a subscriber sees next to that load
 * (the change log's sequencer is shared by every table). `stop` ends the writes, waits for their
 * events and answers the latencies.
 */
export async function startStreamProbe(
  api: Api,
  tenant: Tenant,
): Promise<{ stop(): Promise<StreamLatency> }> {
  const session = await login(api, tenant.email, tenant.password);
  const created = await api.call<{ table: { table_id: number } }>("POST", "/table/create", {
    token: session,
    query: { database_id: tenant.databaseId },
    body: { name: `stream probe ${Date.now()}`, fields: [{ name: "Probe", type: "text" }] },
  });
  const base = `/public/v1/databases/${tenant.databaseId}/tables/${created.table.table_id}`;
  const present = await api.call<{ next: string }>("GET", `${base}/changes`, {
    token: tenant.apiToken,
    query: { after: "now" },
  });
  const stream = await openEventStream(
    new URL(`${base}/changes/stream`, api.baseUrl).href,
    tenant.apiToken,
    { "last-event-id": present.next },
  );
  if (stream.status !== 200) throw new Error(`the change stream answered ${stream.status}`);
  const answered = new Map<number, number>();
  const arrived = new Map<number, number>();
  const reading = (async () => {
    for (;;) {
      const event = await stream.next();
      if (event === undefined) return;
      if (event.event !== "record.created") continue;
      arrived.set((JSON.parse(event.data!) as { row_id: number }).row_id, performance.now());
    }
  })().catch(() => {});
  let stopping = false;
  const writing = (async () => {
    while (!stopping) {
      const made = await api.call<{ record: { row_id: number } }>("POST", `${base}/records`, {
        token: tenant.apiToken,
        body: { data: { Probe: "x" } },
      });
      answered.set(made.record.row_id, performance.now());
      await sleep(WRITE_EVERY_MS);
    }
  })();
  return {
    async stop() {
      stopping = true;
      await writing;
      const deadline = performance.now() + LATE_MS;
      while ([...answered.keys()].some((id) => !arrived.has(id)) && performance.now() < deadline) {
        await sleep(50);
      }
      stream.close();
      await reading;
      const latencies = [...answered]
        .flatMap(([id, at]) => {
          const seen = arrived.get(id);
          // An event may be read before its write's answer is: no wait at all.
          return seen === undefined ? [] : [Math.max(0, seen - at)];
        })
        .sort((a, b) => a - b);
      return {
        changes: latencies.length,
        p50_ms: percentile(latencies, 50),
        p99_ms: percentile(latencies, 99),
        max_ms: latencies.at(-1) ?? null,
        missing: answered.size - latencies.length,
      };
    },
  };
}
