import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Pool } from "pg";
import {
  Counter,
  type CounterConfiguration,
  collectDefaultMetrics,
  Gauge,
  type GaugeConfiguration,
  Histogram,
  type HistogramConfiguration,
  Registry,
} from "prom-client";

export type { Registry as MetricsRegistry } from "prom-client";

/** Seconds; from a cached read (5 ms) to the gateway's RPC timeout (10 s). */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

let processRegistry: Registry | undefined;

/**
 * The registry of this process, with Node's process metrics (CPU, memory, event loop lag, GC).
 * Servers, relays and pools that are not handed a registry record here, so a process has one
 * `/metrics` whatever it runs: one service, or every service and the gateway in the launcher.
 */
export function processMetricsRegistry(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** A registry apart from the process's one (tests, or embedding several systems). */
export function createMetricsRegistry(options: { processMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  return registry;
}

/*
 * Metrics are created on first use per registry and found by name afterwards, so that every
 * server, relay or gateway built on one registry shares its families (prom-client refuses a
 * second registration of a name).
 */

export function counterOn<L extends string>(
  registry: Registry,
  config: Omit<CounterConfiguration<L>, "registers">,
): Counter<L> {
  return (
    (registry.getSingleMetric(config.name) as Counter<L> | undefined) ??
    new Counter({ ...config, registers: [registry] })
  );
}

export function histogramOn<L extends string>(
  registry: Registry,
  config: Omit<HistogramConfiguration<L>, "registers">,
): Histogram<L> {
  return (
    (registry.getSingleMetric(config.name) as Histogram<L> | undefined) ??
    new Histogram({ ...config, registers: [registry] })
  );
}

export function gaugeOn<L extends string>(
  registry: Registry,
  config: Omit<GaugeConfiguration<L>, "registers">,
): Gauge<L> {
  return (
    (registry.getSingleMetric(config.name) as Gauge<L> | undefined) ??
    new Gauge({ ...config, registers: [registry] })
  );
}

/** What kit's server interceptor records for every call. */
export function rpcServerMetrics(registry: Registry) {
  const labelNames = ["procedure", "code"] as const;
  return {
    handled: counterOn(registry, {
      name: "rowbase_rpc_server_handled_total",
      help: "RPCs answered, by procedure (package.Service/Method) and gRPC status code (OK, NotFound, ...).",
      labelNames,
    }),
    duration: histogramOn(registry, {
      name: "rowbase_rpc_server_handling_seconds",
      help: "Time from receiving an RPC to its answer, by procedure and gRPC status code.",
      labelNames,
      buckets: LATENCY_BUCKETS,
    }),
  };
}

/** Set by OutboxRelay: how far event publication lags behind the commits that enqueued them. */
export function outboxMetrics(registry: Registry) {
  return {
    pending: gaugeOn(registry, {
      name: "rowbase_outbox_pending_events",
      help: "Committed events not yet published to NATS, by service schema.",
      labelNames: ["schema"] as const,
    }),
    oldestAge: gaugeOn(registry, {
      name: "rowbase_outbox_oldest_pending_age_seconds",
      help: "Age of the oldest committed event not yet published (0 when none), by service schema.",
      labelNames: ["schema"] as const,
    }),
  };
}

/** The `pg` pools to report, per registry, with the schema of the ORM that owns each. */
const trackedPools = new WeakMap<Registry, Map<Pool, string>>();

/**
 * Reports a connection pool's state at every scrape: connections idle and in use, callers
 * waiting for one, and the pool's size limit, summed per schema. A pool that has ended drops out.
 */
export function trackDbPool(registry: Registry, schema: string, pool: Pool): void {
  let pools = trackedPools.get(registry);
  if (!pools) {
    pools = new Map();
    trackedPools.set(registry, pools);
    const tracked = pools;
    const perSchema = () => {
      const sums = new Map<string, { idle: number; used: number; waiting: number; max: number }>();
      for (const [each, owner] of tracked) {
        if (each.ended) {
          tracked.delete(each);
          continue;
        }
        const sum = sums.get(owner) ?? { idle: 0, used: 0, waiting: 0, max: 0 };
        sum.idle += each.idleCount;
        sum.used += each.totalCount - each.idleCount;
        sum.waiting += each.waitingCount;
        sum.max += each.options.max ?? 10;
        sums.set(owner, sum);
      }
      return sums;
    };
    gaugeOn(registry, {
      name: "rowbase_db_pool_connections",
      help: "PostgreSQL connections of the pool, by service schema and state (idle, used).",
      labelNames: ["schema", "state"] as const,
      collect() {
        this.reset();
        for (const [owner, sum] of perSchema()) {
          this.set({ schema: owner, state: "idle" }, sum.idle);
          this.set({ schema: owner, state: "used" }, sum.used);
        }
      },
    });
    gaugeOn(registry, {
      name: "rowbase_db_pool_waiting_clients",
      help: "Queries waiting for a free PostgreSQL connection, by service schema.",
      labelNames: ["schema"] as const,
      collect() {
        this.reset();
        for (const [owner, sum] of perSchema()) this.set({ schema: owner }, sum.waiting);
      },
    });
    gaugeOn(registry, {
      name: "rowbase_db_pool_max_connections",
      help: "Size limit of the PostgreSQL connection pool, by service schema.",
      labelNames: ["schema"] as const,
      collect() {
        this.reset();
        for (const [owner, sum] of perSchema()) this.set({ schema: owner }, sum.max);
      },
    });
  }
  for (const each of pools.keys()) if (each.ended) pools.delete(each);
  pools.set(pool, schema);
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` in Prometheus' text format over plain HTTP/1.1, apart from the gRPC
 * port (HTTP/2 only, which Prometheus does not speak) and from the gateway's public port. No
 * authentication: keep the port inside the cluster.
 */
export async function startMetricsServer(options: {
  registry?: Registry;
  /** 0 picks a free port. */
  port: number;
  /** Defaults to every interface. */
  host?: string;
}): Promise<MetricsServer> {
  const registry = options.registry ?? processMetricsRegistry();
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (error: unknown) =>
        res.writeHead(500, { "content-type": "text/plain" }).end(`${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
